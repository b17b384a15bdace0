import { Kafka } from 'kafkajs';
import { StableOffsets } from 'kafka-exactly-once/engine/stable-offsets';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';

/**
 * Regression test of a duplicate found by `npm run verify` (broker-kill): offsets committed by a transaction are
 * applied by the group coordinator after the transaction completes. KafkaJS's OffsetFetch (v4) returns the last
 * stable offset meanwhile, so a consumer that re-read its position then took committed records for uncommitted
 * ones and sent their outputs again. StableOffsets asks with require_stable and waits instead.
 */
describe('library: stable committed offsets', () => {
  let kafka: Kafka;
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
});
