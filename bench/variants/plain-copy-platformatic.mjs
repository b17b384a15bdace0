/**
 * Variant AX: A's plain consume → produce copy on @platformatic/kafka (the platformatic driver's client; Node.js
 * 22.22+ or 24.6+), at-least-once, no database: what the client itself can do on this machine. The client's message
 * stream (its own consumer group, every assigned partition) is read in batches of up to 500 records: each batch is
 * sent (acks all) and then its offsets committed, the stream paused meanwhile; a crash between the two copies
 * records again.
 */
import { createRequire } from 'node:module';
import { Consumer, MessagesStreamFallbackModes, MessagesStreamModes, ProduceAcks, Producer } from '@platformatic/kafka';

const require = createRequire(import.meta.url);
const { benchEnv, onStop } = require('./common');

const env = benchEnv();
const base = { clientId: 'bench-plain-copy-platformatic', bootstrapBrokers: env.brokers };
const producer = new Producer({ ...base, acks: ProduceAcks.ALL, autocreateTopics: false });
const consumer = new Consumer({ ...base, groupId: env.group, autocommit: false, maxWaitTime: 100 });
const stream = await consumer.consume({ topics: [env.input], mode: MessagesStreamModes.COMMITTED, fallbackMode: MessagesStreamFallbackModes.EARLIEST, autocommit: false });

let pending = [];
let flushing = false;
let timer;

async function flush() {
  if (flushing || pending.length === 0) return;
  flushing = true;
  stream.pause();
  const batch = pending;
  pending = [];
  try {
    await producer.send({ messages: batch.map((m) => ({ topic: env.output, key: m.key, value: m.value, headers: m.headers })) });
    const last = new Map();
    for (const m of batch) last.set(m.partition, m);
    await consumer.commit({ offsets: [...last.values()].map((m) => ({ topic: m.topic, partition: m.partition, offset: m.offset + 1n, leaderEpoch: m.leaderEpoch })) });
  } catch (err) {
    console.error(err);
    process.exit(1);
  } finally {
    flushing = false;
    stream.resume();
  }
  if (pending.length >= 500) await flush();
}

stream.on('data', (message) => {
  pending.push(message);
  if (pending.length >= 500) void flush();
  else if (!timer) timer = setTimeout(() => ((timer = undefined), void flush()), 5);
});
stream.on('error', (err) => {
  console.error(err);
  process.exit(1);
});

onStop(async () => {
  await stream.close();
  await consumer.close();
  await producer.close();
});
