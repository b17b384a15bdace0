import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { DEAD_LETTER_HEADERS, EventContext, IdempotentHandler, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { kafkaBrokers, testDriver } from './support/environment';
import { waitUntil } from './support/payments';

const ITEM = { type: 'record', name: 'Item', namespace: 'test.isolation', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class ItemsHandler {
  @IdempotentHandler({ topic: 'items', schema: 'test.isolation.Item' })
  async onItem(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO items (id) VALUES ($1)', [event.id]);
    // "bad" breaks a deferred constraint: its unit of work fails at COMMIT, never inside the handler.
    if (event.id === 'bad') await ctx.manager.query('INSERT INTO child (parent) VALUES (42)');
  }
}

/**
 * The failure count of a record isolated after its unit of work failed lives in the inbox: a restart in the
 * middle of the isolation goes on counting, so a poison record is dead-lettered after `isolation.maxFailures`
 * failures in all, not retried afresh by every new instance.
 */
describe('library: isolation survives a restart', () => {
  let kafka: Kafka;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('isolation')}.`;
  const dir = schemasDirectory('isolation', { 'item.avsc': ITEM });

  const start = async (): Promise<TestingModule> => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'isolation-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'isolation-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000 },
          isolation: { maxFailures: 3, retryDelayMs: 3000 },
        }),
      ],
      providers: [ItemsHandler],
    })
    class ItemsModule {}
    return startLibraryModule(ItemsModule, ['error']);
  };

  const query = <T = Record<string, unknown>>(sql: string) => queryDatabase<T>(databaseUrl, sql);

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('isolation');
    await query('CREATE TABLE items (id text PRIMARY KEY)');
    await query('CREATE TABLE parent (id int PRIMARY KEY)');
    await query('CREATE TABLE child (parent int REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)');
    await createTopics(kafka, [`${prefix}items`], 1);
  });

  it('keeps counting across instances and dead-letters after maxFailures in all', async () => {
    const first = await start();
    let failuresAtRestart = 0;
    try {
      const schema = SchemaRegistry.fromDirectory(dir).current('test.isolation.Item');
      await sendRaw(kafka, `${prefix}items`, ['ok-1', 'bad', 'ok-2'].map((id) => ({ key: 'k', value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));
      await waitUntil(async () => (await query(`SELECT 1 FROM kafka_eo_inbox WHERE message_id = 'bad' AND status = 'failing'`)).length === 1, 60000, 'a first isolated failure');
    } finally {
      await first.close();
    }
    const [row] = await query<{ status: string; failures: number }>(`SELECT status, failures FROM kafka_eo_inbox WHERE message_id = 'bad'`);
    expect(row.status).toBe('failing');
    failuresAtRestart = row.failures;
    expect(failuresAtRestart).toBeGreaterThanOrEqual(1);
    expect(failuresAtRestart).toBeLessThan(3);

    const second = await start();
    try {
      const [letter] = await readTopic(kafka, `${prefix}items.dlq`, { until: (r) => r.length >= 1, timeoutMs: 90000 });
      expect(letter.headers).toMatchObject({ 'message-id': 'bad', [DEAD_LETTER_HEADERS.reason]: 'handler-failed', [DEAD_LETTER_HEADERS.attempts]: '3' });
      expect(letter.headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/foreign key/);
      await waitUntil(async () => (await query(`SELECT 1 FROM items WHERE id = 'ok-2'`)).length === 1, 30000, 'the record after it');
      expect((await query<{ id: string }>('SELECT id FROM items ORDER BY id')).map((r) => r.id)).toEqual(['ok-1', 'ok-2']);
      const [done] = await query<{ status: string; failures: number; attempts: number }>(`SELECT status, failures, attempts FROM kafka_eo_inbox WHERE message_id = 'bad'`);
      expect(done).toEqual({ status: 'dead-lettered', failures: 3, attempts: 3 });
    } finally {
      await second.close();
    }
  });
});
