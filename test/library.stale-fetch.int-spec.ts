import { ConsoleLogger, Injectable, Logger, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Consumer, Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';

const ITEM = { type: 'record', name: 'Item', namespace: 'test.stale', fields: [{ name: 'id', type: 'string' }] };

class CapturingLogger extends ConsoleLogger {
  readonly lines: string[] = [];
  override log(message: unknown, ...rest: unknown[]): void {
    this.lines.push(String(message));
    super.log(message, ...(rest as []));
  }
}

@Injectable()
class ItemsHandler {
  readonly calls: string[] = [];

  @IdempotentHandler({ topic: 'items', schema: 'test.stale.Item' })
  async onItem(event: { id: string }, ctx: EventContext): Promise<void> {
    this.calls.push(event.id);
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
    ctx.emit('items.done', { id: event.id }, { key: event.id });
  }
}

/**
 * Regression test of a duplicate found by `npm run verify` (cluster): KafkaJS fetches each partition from its
 * leader, one fetcher per broker. When the leader moves, the new leader's fetcher can ask for the partition
 * from the position read before the last commit and deliver the committed records again once the old fetcher's
 * batch is done, in the same assignment. Their inbox rows hold the same offsets, which reads as "the earlier
 * Kafka transaction did not commit": their outputs were sent a second time. A leader move cannot be timed
 * from a test, so this moves KafkaJS's fetch position back the way such a fetch does (the consumer's own seek,
 * which with autoCommit off only resolves the position), after the records were committed. Every record is
 * handled once, and every output is in the output topic once.
 */
describe('library: records fetched again after their unit of work committed', () => {
  let kafka: Kafka;
  let databaseUrl: string;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('stale-fetch')}.`;
  const group = `${prefix}group`;
  const dir = schemasDirectory('stale', { 'item.avsc': ITEM });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('stale_fetch');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
    await createTopics(kafka, [`${prefix}items`, `${prefix}items.done`], 1);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('are skipped: no handler call, no output sent again', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'stale-fetch-test', brokers: kafkaBrokers() },
          groupId: group,
          transactionalIdPrefix: 'stale-fetch-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { 'items.done': { schema: 'test.stale.Item' } },
        }),
      ],
      providers: [ItemsHandler],
    })
    class ItemsModule {}
    const logger = new CapturingLogger({ logLevels: ['log', 'warn', 'error'] });
    Logger.overrideLogger(logger);
    moduleRef = await Test.createTestingModule({ imports: [ItemsModule] }).setLogger(logger).compile();
    moduleRef.enableShutdownHooks();
    await moduleRef.init();
    await moduleRef.get(KafkaExactlyOnceLifecycle).whenRunning();
    const schema = SchemaRegistry.fromDirectory(dir).current('test.stale.Item');
    const publish = (ids: string[]) => sendRaw(kafka, `${prefix}items`, ids.map((id) => ({ key: 'k', value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));
    const applied = async () => (await queryDatabase<{ id: string }>(databaseUrl, 'SELECT id FROM applied ORDER BY id')).map((r) => r.id);

    const first = ['a-1', 'a-2', 'a-3', 'a-4', 'a-5', 'a-6'];
    await publish(first);
    await waitForGroupCaughtUp(kafka, group, `${prefix}items`, 90000);
    expect(await applied()).toEqual(first);

    // The engine's KafkaJS consumer (reached through internals, for this test only): its fetch position goes
    // back to offset 0 within the same assignment, as when a new leader's fetcher asked from an old position.
    const engine = (moduleRef.get(KafkaExactlyOnceLifecycle) as unknown as { consumer: { consumer: Consumer } }).consumer;
    engine.consumer.seek({ topic: `${prefix}items`, partition: 0, offset: '0' });

    // A record after them: once it is handled, the records before it were fetched again.
    await publish(['b-1']);
    await waitUntil(async () => (await applied()).length === 7, 60000, 'the record published after the rewind to be handled');
    await waitForGroupCaughtUp(kafka, group, `${prefix}items`, 60000);

    const handler = moduleRef.get(ItemsHandler);
    expect(handler.calls).toEqual([...first, 'b-1']);
    // Every output once: read until the last one, then a little longer for any copy behind it.
    const done = await readTopic(kafka, `${prefix}items.done`, { until: (r) => r.some((x) => x.key === 'b-1'), timeoutMs: 30000 });
    const settled = await readTopic(kafka, `${prefix}items.done`, { until: (r) => r.length >= done.length, timeoutMs: 30000, pollIdleMs: 3000 });
    expect(settled.map((r) => r.key)).toEqual([...first, 'b-1']);
    // They were fetched again, and skipped as committed, not replayed.
    expect(logger.lines.some((line) => /6 record\(s\) at offsets 0\.\.5 fetched again below the committed offset 6; skipped/.test(line))).toBe(true);
    expect(logger.lines.filter((line) => /replayed from the inbox/.test(line) && !/ 0 replayed/.test(line))).toEqual([]);
  }, 240000);
});
