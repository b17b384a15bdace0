import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { SchemaRegistry } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.aborted', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.aborted.Note' })
  async onNote(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
  }
}

/**
 * Records of aborted transactions reach no handler. KafkaJS 2.2.4's read-committed filter delivers them when two
 * producers' aborted transactions overlap on a partition and the one begun first aborts last (it reads the
 * broker's list of aborted transactions in marker order); the library's clients filter each Fetch answer
 * themselves (src/kafkajs/aborted-transactions.ts). Upstream here: two transactional producers, A then B writing, B then A
 * aborting, then a committed record.
 */
describe('library: records of aborted transactions', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('aborted')}.`;
  const topic = `${prefix}notes`;
  const dir = schemasDirectory('aborted', { 'note.avsc': NOTE });
  const note = (id: string) => encodeSingleObject(SchemaRegistry.fromDirectory(dir).current('test.aborted.Note'), { id });

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [topic], 1);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('are handed to no handler, nor to a read-committed reader of the process, when aborted transactions overlap', async () => {
    const databaseUrl = await createSuiteDatabase('aborted');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
    const producers = ['a', 'b', 'c'].map((name) => kafka.producer({ transactionalId: `${prefix}${name}`, idempotent: true, maxInFlightRequests: 1 }));
    await Promise.all(producers.map((p) => p.connect()));
    try {
      const [a, b, c] = producers;
      const ta = await a.transaction();
      await ta.send({ topic, acks: -1, messages: [{ key: 'k', value: note('aborted-by-a'), headers: { 'message-id': 'aborted-by-a' } }] });
      const tb = await b.transaction();
      await tb.send({ topic, acks: -1, messages: [{ key: 'k', value: note('aborted-by-b'), headers: { 'message-id': 'aborted-by-b' } }] });
      await tb.abort();
      await ta.abort();
      const tc = await c.transaction();
      await tc.send({ topic, acks: -1, messages: [{ key: 'k', value: note('committed'), headers: { 'message-id': 'committed' } }] });
      await tc.commit();
    } finally {
      await Promise.all(producers.map((p) => p.disconnect()));
    }

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'aborted-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'aborted-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}

    moduleRef = await startLibraryModule(NotesModule);
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length > 0, 60000, 'the committed note applied');
    await new Promise((r) => setTimeout(r, 2000));
    expect((await queryDatabase(databaseUrl, 'SELECT id FROM applied ORDER BY id')).map((r) => r.id)).toEqual(['committed']);
    // The module applied the correction to the process's KafkaJS: the suites' own read-committed reader too.
    const records = await readTopic(kafka, topic, { until: quietAfter(1, 2000), pollIdleMs: 500 });
    expect(records.map((r) => r.headers['message-id'])).toEqual(['committed']);

    // Health counts records still to handle: the partition's last offsets are transaction markers, so the
    // committed offset stays below the high watermark, and the lag is 0 all the same.
    const lifecycle = moduleRef.get(KafkaExactlyOnceLifecycle);
    const partition = () => lifecycle.status()?.partitions.find((p) => p.topic === topic);
    // The lag may read 0 a moment before the commit of the records skipped as aborted is reported (the fetch
    // position moves first): both, then.
    await waitUntil(async () => partition()?.lag === 0 && partition()?.committedOffset === '5', 30000, 'the partition reported caught up and committed');
    expect(partition()).toMatchObject({ committedOffset: '5', highWatermark: '6', lag: 0 });

    // Another transaction, whose commit marker a later fetch may bring alone: lag 0 again once it is handled.
    const d = kafka.producer({ transactionalId: `${prefix}d`, idempotent: true, maxInFlightRequests: 1 });
    await d.connect();
    try {
      const td = await d.transaction();
      await td.send({ topic, acks: -1, messages: [{ key: 'k', value: note('later'), headers: { 'message-id': 'later' } }] });
      await td.commit();
    } finally {
      await d.disconnect();
    }
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT id FROM applied WHERE id = 'later'`)).length === 1, 60000, 'the later note applied');
    await waitUntil(async () => partition()?.lag === 0 && partition()?.highWatermark === '8', 30000, 'the partition reported caught up again');
    expect(partition()).toMatchObject({ committedOffset: '7', highWatermark: '8', lag: 0 });
  });
});
