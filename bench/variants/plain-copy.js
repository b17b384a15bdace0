'use strict';
/**
 * Variant A, the limit: plain KafkaJS consume → produce copy, at-least-once, no database. Each batch is sent
 * (acks all) and then its offset committed; a crash between the two copies records again.
 */
const { Kafka, logLevel } = require('kafkajs');
const { benchEnv, onStop } = require('./common');

async function main() {
  const env = benchEnv();
  const kafka = new Kafka({ clientId: 'bench-plain-copy', brokers: env.brokers, logLevel: logLevel.ERROR });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  const consumer = kafka.consumer({ groupId: env.group, allowAutoTopicCreation: false });
  await Promise.all([producer.connect(), consumer.connect()]);
  await consumer.subscribe({ topic: env.input, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    partitionsConsumedConcurrently: env.partitions,
    eachBatch: async ({ batch, heartbeat }) => {
      if (batch.messages.length === 0) return;
      await producer.send({ topic: env.output, acks: -1, messages: batch.messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })) });
      const next = (BigInt(batch.lastOffset()) + 1n).toString();
      await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }]);
      await heartbeat();
    },
  });
  onStop(async () => {
    await consumer.disconnect();
    await producer.disconnect();
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
