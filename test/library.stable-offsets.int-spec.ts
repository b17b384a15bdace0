import { Injectable, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { KafkaClient } from 'kafka-exactly-once/kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { StableOffsets } from 'kafka-exactly-once/kafkajs/stable-offsets';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.stable', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.stable.Note' })
  async onNote(_event: { id: string }, _ctx: EventContext): Promise<void> {}
}

/**
 * Regression test of a duplicate found by `npm run verify` (broker-kill): offsets committed by a transaction are
 * applied by the group coordinator after the transaction completes. KafkaJS's OffsetFetch (v4) returns the last
 * stable offset meanwhile, so a consumer that re-read its position then took committed records for uncommitted
 * ones and sent their outputs again. StableOffsets asks with require_stable and waits instead.
 */
describe('library: stable committed offsets', () => {
  let kafka: KafkaClient;
  const topic = uniqueTopic('stable-offsets');
  const group = `${topic}.group`;

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [topic], 1);
  });

  it('waits while a transaction has offsets pending, then returns the committed one', async () => {
    const stable = new StableOffsets(kafka);
    const admin = kafka.admin();
    const producer = kafka.producer({ transactionalId: `${topic}.txn`, idempotent: true, maxInFlightRequests: 1 });
    await Promise.all([admin.connect(), producer.connect()]);
    try {
      expect(await stable.committed(group, topic, 0)).toBe(-1n);

      const txn = await producer.transaction();
      await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '42' }] }] });
      // Pending: the old offset reads as committed through KafkaJS's OffsetFetch, and StableOffsets waits.
      const [pending] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
      expect(pending.partitions[0].offset).toBe('-1');
      let settled: bigint | undefined;
      const read = stable.committed(group, topic, 0).then((offset) => (settled = offset));
      await new Promise((r) => setTimeout(r, 1500));
      expect(settled).toBeUndefined();

      await txn.commit();
      await read;
      expect(settled).toBe(42n);

      // An aborted transaction's offsets never count.
      const aborted = await producer.transaction();
      await aborted.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '99' }] }] });
      const afterAbort = stable.committed(group, topic, 0);
      await new Promise((r) => setTimeout(r, 500));
      await aborted.abort();
      expect(await afterAbort).toBe(42n);
    } finally {
      await producer.disconnect();
      await admin.disconnect();
      await stable.disconnect();
    }
  });

  it("the replay worker reads its markers stable: a replay whose Kafka transaction committed is never sent again", async () => {
    // A dead-letter replay's step commits PostgreSQL, then sends its outputs with a marker offset (the replay's
    // number + 1, in the group `<group>.kafka-eo-replays`) in one Kafka transaction. After a crash between the
    // two, the next worker settles the replay: marker there, outputs went out; marker missing, send them. A
    // marker whose transaction committed a moment ago is pending in the group coordinator, and OffsetFetch v4
    // (KafkaJS's) reads it as missing. Here the marker's transaction is held open while the worker settles.
    const prefix = `${uniqueTopic('stable-replay')}.`;
    const group = `${prefix}group`;
    const output = `${prefix}notes.out`;
    await createTopics(kafka, [`${prefix}notes`, output], 1);
    const databaseUrl = await createSuiteDatabase('stable_replay');

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'stable-replay', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: 'stable-replay',
          schemas: { directory: schemasDirectory('stable', { 'note.avsc': NOTE }) },
          topicPrefix: prefix,
          operations: { pollIntervalMs: 300 },
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}

    // The replay's output, recorded as the worker's PostgreSQL transaction recorded it.
    const recorded = [{ topic: output, key: Buffer.from('n-1').toString('base64'), value: Buffer.from('replayed').toString('base64'), h: [] }];
    const moduleRef = await startLibraryModule(NotesModule);
    const producer = kafka.producer({ transactionalId: `${prefix}earlier-step`, idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    try {
      // The earlier step's Kafka transaction: the output and the marker, not yet complete.
      const txn = await producer.transaction();
      await txn.send({ topic: output, acks: -1, messages: [{ key: 'n-1', value: 'replayed' }] });
      const [{ seq }] = await queryDatabase(
        databaseUrl,
        `INSERT INTO kafka_eo_replays (consumer_group, topic, partition, audit_id, outputs) VALUES ($1, $2, 0, 0, $3::jsonb) RETURNING seq::text AS seq`,
        [group, `${prefix}notes`, JSON.stringify(recorded)],
      );
      await txn.sendOffsets({ consumerGroupId: `${group}.kafka-eo-replays`, topics: [{ topic: `${prefix}notes`, partitions: [{ partition: 0, offset: String(BigInt(seq) + 1n) }] }] });
      // The worker polls every 300 ms and finds the unsettled replay meanwhile.
      await new Promise((r) => setTimeout(r, 2000));
      await txn.commit();
      await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT settled FROM kafka_eo_replays WHERE seq = $1', [seq]))[0].settled === true, 30000, 'the replay settled');
      const records = await readTopic(kafka, output, { until: quietAfter(1, 3000), pollIdleMs: 500 });
      // The output once: the earlier step's (read committed), none sent again by the worker.
      expect(records.map((r) => r.value?.toString())).toEqual(['replayed']);
    } finally {
      await producer.disconnect();
      await moduleRef.close();
    }
  });
});
