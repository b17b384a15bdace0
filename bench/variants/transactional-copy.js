'use strict';
/**
 * Variant AT: A's copy in Kafka transactions, no database. Each batch of a partition is copied in one Kafka
 * transaction of that partition's own transactional producer (as the library does: one per input partition),
 * with the consumer offset committed in it (sendOffsets), read committed. What separates it from A is what Kafka
 * transactions cost in KafkaJS; what separates E from it is what the library and PostgreSQL add.
 */
const { Kafka, logLevel } = require('kafkajs');
const { benchEnv, onStop } = require('./common');

/** Records per transaction at most, as the library's units of work (chunk.maxRecords). */
const MAX_RECORDS = 500;

async function main() {
  const env = benchEnv();
  const kafka = new Kafka({ clientId: 'bench-transactional-copy', brokers: env.brokers, logLevel: logLevel.ERROR });
  const consumer = kafka.consumer({ groupId: env.group, readUncommitted: false, allowAutoTopicCreation: false });
  const producers = new Map();
  const producerOf = async (partition) => {
    let producer = producers.get(partition);
    if (!producer) {
      producer = kafka.producer({ transactionalId: `${env.group}.${partition}`, idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false, retry: { initialRetryTime: 20, multiplier: 4 } });
      producers.set(partition, producer);
      await producer.connect();
    }
    return producer;
  };
  await consumer.connect();
  await consumer.subscribe({ topic: env.input, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: env.partitions,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      const producer = await producerOf(batch.partition);
      for (let i = 0; i < batch.messages.length && isRunning() && !isStale(); i += MAX_RECORDS) {
        const chunk = batch.messages.slice(i, i + MAX_RECORDS);
        const last = chunk[chunk.length - 1].offset;
        const txn = await producer.transaction();
        try {
          await txn.send({ topic: env.output, acks: -1, messages: chunk.map((m) => ({ key: m.key, value: m.value, headers: m.headers })) });
          await txn.sendOffsets({ consumerGroupId: env.group, topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: (BigInt(last) + 1n).toString() }] }] });
          await txn.commit();
        } catch (err) {
          await txn.abort().catch(() => undefined);
          throw err;
        }
        resolveOffset(last);
        await heartbeat();
      }
    },
  });
  onStop(async () => {
    await consumer.disconnect();
    await Promise.all([...producers.values()].map((p) => p.disconnect()));
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
