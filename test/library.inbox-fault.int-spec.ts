import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { kafkaBrokers, testDriver } from './support/environment';
import { waitUntil } from './support/payments';

const ENTRY = { type: 'record', name: 'Entry', namespace: 'test.inboxfault', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class EntriesHandler {
  @IdempotentHandler({ topic: 'entries', schema: 'test.inboxfault.Entry' })
  async onEntry(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO entries (id) VALUES ($1)', [event.id]);
  }
}

/**
 * When the library's own inbox statements fail (here: a column of the inbox is missing, as after a skipped
 * migration), no record is to blame: nothing is isolated, counted or dead-lettered; the partition waits,
 * health names the cause, and everything is handled once the schema is right again.
 */
describe('library: a broken inbox is an infrastructure fault, not the records\'', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('inbox-fault')}.`;
  const dir = schemasDirectory('inbox-fault', { 'entry.avsc': ENTRY });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('inbox_fault');
    await queryDatabase(databaseUrl, 'CREATE TABLE entries (id text PRIMARY KEY)');
    await createTopics(kafka, [`${prefix}entries`], 1);

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'inbox-fault-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'inbox-fault-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000, stallAfterMs: 3000, maxRetryDelayMs: 1000 },
          inbox: { lockTimeoutMs: 1000 },
          isolation: { maxFailures: 2, retryDelayMs: 50 },
        }),
      ],
      providers: [EntriesHandler],
    })
    class EntriesModule {}
    moduleRef = await startLibraryModule(EntriesModule, ['error']);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('waits without blaming a record, shows the cause in health, and goes on once the inbox is repaired', async () => {
    await queryDatabase(databaseUrl, 'ALTER TABLE kafka_eo_inbox RENAME COLUMN taken_over TO taken_over_moved');
    const schema = SchemaRegistry.fromDirectory(dir).current('test.inboxfault.Entry');
    const ids = ['e-1', 'e-2', 'e-3'];
    await sendRaw(kafka, `${prefix}entries`, ids.map((id) => ({ key: 'k', value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));

    const lifecycle = moduleRef.get(KafkaExactlyOnceLifecycle);
    await waitUntil(async () => lifecycle.status()?.partitions.some((p) => p.stalled) ?? false, 30000, 'the partition to show as stalled');
    const [partition] = lifecycle.status()?.partitions ?? [];
    expect(partition.lastError).toMatchObject({ kind: 'infrastructure' });
    expect(partition.lastError?.message).toMatch(/the inbox claim failed: .*taken_over/);
    // Several failed attempts, and still nobody blamed: no failure counted, nothing handled.
    expect(partition.consecutiveFailures).toBeGreaterThan(2);
    expect(await queryDatabase(databaseUrl, `SELECT message_id FROM kafka_eo_inbox`)).toEqual([]);
    expect(await queryDatabase(databaseUrl, `SELECT id FROM entries`)).toEqual([]);

    await queryDatabase(databaseUrl, 'ALTER TABLE kafka_eo_inbox RENAME COLUMN taken_over_moved TO taken_over');
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM entries')).length === ids.length, 30000, 'the records to be handled');
    const inbox = await queryDatabase<{ message_id: string; status: string; failures: number }>(databaseUrl, `SELECT message_id, status, failures FROM kafka_eo_inbox ORDER BY message_id`);
    expect(inbox).toEqual(ids.map((id) => ({ message_id: id, status: 'processed', failures: 0 })));
    // No dead letter at all: the dead-letter topic is empty (a marker record proves the read reached its end).
    await sendRaw(kafka, `${prefix}entries.dlq`, [{ key: 'marker', value: Buffer.from('end') }]);
    const letters = await readTopic(kafka, `${prefix}entries.dlq`, { until: (r) => r.some((x) => x.key === 'marker'), timeoutMs: 30000 });
    expect(letters.map((r) => r.key)).toEqual(['marker']);
  });
});
