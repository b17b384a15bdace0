'use strict';
/**
 * Variant O: the transactional outbox's relay. Preloads BENCH_COUNT PaymentRequested events with `Outbox.add`
 * (transactions of 100, relay off), then starts the relay (`OutboxRelay`, as the module runs it) and times it
 * until every event is in Kafka (the outbox table empty, the topic holding them all, read committed). Then the
 * latency phase: a writer commits one event per transaction at BENCH_LATENCY_RATE/s for BENCH_LATENCY_SECONDS
 * while the relay runs, and a read-committed reader measures each event from its writer's COMMIT to its
 * arrival. Prints one line `RESULT <json>`.
 *
 * KAFKA_CLIENT=platformatic: the relay's producer, checkpoint reads and admin on @platformatic/kafka (Node.js 22
 * or later), as `kafka-eo outbox relay` runs them; the latency reader is KafkaJS's consumer on either driver.
 * BENCH_OUTBOX_STEPS=1: RESULT's `steps` says where each event's time went, step by step (p50, p90, p99 in ms):
 * commit to the relay's pick-up, the statement that gave out its batch, waiting for the batch before it, its
 * transaction's records (AddPartitionsToTxn, Produce), its commit (EndTxn), then to the reader (markers, fetch).
 */
require('reflect-metadata');
const { join } = require('path');
const { randomUUID } = require('crypto');
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { TypeOrmModule, getDataSourceToken } = require('@nestjs/typeorm');
const { logLevel } = require('kafkajs');
const { KafkaExactlyOnceModule, Outbox } = require('../../dist/libs/kafka-exactly-once');
const { OutboxRelay } = require('../../dist/libs/kafka-exactly-once/outbox/outbox-relay');
const { createKafkaClient } = require('../../dist/libs/kafka-exactly-once/kafkajs');
const { resolveOutbox } = require('../../dist/libs/kafka-exactly-once/options/resolve-options');
const { eventSteps, stepPercentiles } = require('../../dist/libs/kafka-exactly-once/outbox/relay-steps');

const env = {
  brokers: (process.env.KAFKA_BROKERS || '127.0.0.1:9092').split(','),
  databaseUrl: process.env.BENCH_DATABASE_URL,
  prefix: process.env.BENCH_PREFIX,
  count: Number(process.env.BENCH_COUNT),
  accounts: Number(process.env.BENCH_ACCOUNTS || 200),
  rate: Number(process.env.BENCH_LATENCY_RATE || 1000),
  seconds: Number(process.env.BENCH_LATENCY_SECONDS || 10),
  driver: process.env.KAFKA_CLIENT || 'kafkajs',
  steps: process.env.BENCH_OUTBOX_STEPS === '1',
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ROOT = join(__dirname, '..', '..');

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : null;
}

async function main() {
  const topic = `${env.prefix}payments.requested`;
  const checkpointTopic = `${env.prefix}outbox-checkpoints`;
  const config = {
    kafka: { clientId: 'bench-outbox', brokers: env.brokers },
    driver: env.driver,
    transactionalIdPrefix: `${env.prefix}bench`,
    schemas: { directory: join(ROOT, 'schemas') },
    topicPrefix: env.prefix,
    topics: { 'payments.requested': { schema: 'com.example.PaymentRequested', key: (e) => e.accountId } },
    outbox: { relay: false, checkpointTopic },
  };
  class BenchModule {}
  Reflect.decorate([Module({ imports: [TypeOrmModule.forRoot({ type: 'postgres', url: env.databaseUrl, extra: { max: 20 } }), KafkaExactlyOnceModule.forRoot(config)] })], BenchModule);
  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['warn', 'error'] });
  const outbox = app.get(Outbox);
  const dataSource = app.get(getDataSourceToken());
  const payment = (i) => ({ paymentId: randomUUID(), accountId: `acc-${i % env.accounts}`, amountCents: BigInt((i % 7) * 1000 - 2000), requestedAt: new Date().toISOString() });

  // Preload (not timed as the relay's): transactions of 100 events, four writers side by side.
  const preloadStarted = Date.now();
  let next = 0;
  await Promise.all(
    [0, 1, 2, 3].map(async () => {
      while (next < env.count) {
        const from = next;
        const to = (next = Math.min(env.count, next + 100));
        // Each transaction's keys in one order (ascending accounts): two such writers never deadlock on them.
        await dataSource.transaction(async (manager) => {
          for (let i = from; i < to; i++) await outbox.add(manager, 'payments.requested', payment(i));
        });
      }
    }),
  );
  const preloadSeconds = (Date.now() - preloadStarted) / 1000;

  const kafka = createKafkaClient({ clientId: 'bench-outbox-reader', brokers: env.brokers, logLevel: logLevel.NOTHING });
  if (env.driver === 'platformatic') {
    const { useDriverParts } = require('../../dist/libs/kafka-exactly-once/client/driver-parts');
    const { platformaticParts } = require('../../dist/libs/kafka-exactly-once/platformatic/driver-parts');
    useDriverParts(kafka, platformaticParts({ clientId: 'bench-outbox-relay', brokers: env.brokers }));
  }
  const pool = dataSource.driver.master;
  // The module's defaults (BENCH_OUTBOX_BATCH and BENCH_OUTBOX_BATCH_BYTES for experiments).
  const batch = (name) => (process.env[name] ? Number(process.env[name]) : undefined);
  const relayConfig = { ...resolveOutbox({ name: 'bench', checkpointTopic, batchMaxRecords: batch('BENCH_OUTBOX_BATCH'), batchMaxBytes: batch('BENCH_OUTBOX_BATCH_BYTES') }, `${env.prefix}bench`), transactionalIdPrefix: `${env.prefix}bench`, transactionTimeoutMs: 60000 };
  const batchTimes = [];
  const relay = new OutboxRelay(kafka, pool, relayConfig, undefined, env.steps ? (times) => batchTimes.push(times) : undefined);
  relay.start();
  // Timed from the moment the relay is active (lock held, earlier relay fenced, checkpoint read), as P0 is from
  // its connected producer's first send.
  while (relay.status().state !== 'active') await sleep(2);
  const cpuBefore = process.cpuUsage();
  const relayStarted = Date.now();
  for (;;) {
    const [{ n }] = await dataSource.query('SELECT count(*)::int AS n FROM kafka_eo_outbox');
    if (n === 0) break;
    if (Date.now() - relayStarted > 600000) throw new Error(`${n} events still in the outbox after 600 s`);
    await sleep(10);
  }
  const relaySeconds = (Date.now() - relayStarted) / 1000;
  const cpu = process.cpuUsage(cpuBefore);

  // Latency: one event per transaction at env.rate/s, COMMIT to read-committed arrival.
  const committedAt = new Map();
  const order = new Map();
  const seen = new Set();
  const probeSeen = new Set();
  const latencies = [];
  const arrivedAt = new Map();
  const consumer = kafka.consumer({ groupId: `${env.prefix}latency-reader`, maxWaitTimeInMs: 20, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: false });
  let assigned = false;
  consumer.on(consumer.events.GROUP_JOIN, () => (assigned = true));
  await consumer.run({
    eachMessage: async ({ message }) => {
      const id = message.headers['message-id']?.toString();
      probeSeen.add(id);
      if (!arrivedAt.has(id)) arrivedAt.set(id, Date.now());
    },
  });
  while (!assigned) await sleep(50);
  // A probe event first, not counted: the reader's position is set (a reader that joined with no offset starts
  // at the end of the topic as of its first fetch, which a busy machine can delay past the first events).
  const probe = await dataSource.transaction((manager) => outbox.add(manager, 'payments.requested', payment(-1)));
  for (const deadline = Date.now() + 30000; !probeSeen.has(probe.messageId); ) {
    if (Date.now() > deadline) throw new Error('the latency reader did not see the probe event within 30 s');
    await sleep(20);
  }
  const interval = 1000 / env.rate;
  const latencyStarted = Date.now();
  const total = Math.round(env.rate * env.seconds);
  let written = 0;
  const inFlight = new Set();
  for (let i = 0; i < total; i++) {
    const slot = latencyStarted + i * interval;
    if (slot > Date.now()) await sleep(slot - Date.now());
    const write = dataSource
      .transaction((manager) => outbox.add(manager, 'payments.requested', payment(i)))
      .then(({ messageId }) => {
        committedAt.set(messageId, Date.now());
        order.set(messageId, i);
        written++;
      })
      .finally(() => inFlight.delete(write));
    inFlight.add(write);
    if (inFlight.size >= 16) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  const achievedRate = written / ((Date.now() - latencyStarted) / 1000);
  // Each event from its writer's COMMIT answered to its arrival (an event can arrive before its writer's process
  // has taken that answer from the event loop: 0 then).
  const arrivals = () => [...committedAt.keys()].filter((id) => arrivedAt.has(id)).length;
  for (const deadline = Date.now() + 30000; arrivals() < written && Date.now() < deadline; ) await sleep(100);
  for (const [id, at] of committedAt) {
    if (!arrivedAt.has(id)) continue;
    seen.add(id);
    latencies.push(Math.max(0, arrivedAt.get(id) - at));
  }
  await consumer.disconnect();
  await relay.stop();
  await app.close();
  const sorted = [...latencies].sort((a, b) => a - b);
  const result = {
    records: env.count,
    preloadSeconds,
    relaySeconds,
    recordsPerSecond: env.count / relaySeconds,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    ...(env.steps ? { steps: stepBreakdown(batchTimes, committedAt, arrivedAt), driver: env.driver } : {}),
    latency: { rate: env.rate, achievedRate, published: written, matched: latencies.length, missing: [...order].filter(([id]) => !seen.has(id)).map(([, i]) => i).slice(0, 20), p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? null },
  };
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

/** Where the latency phase's events' time went (BENCH_OUTBOX_STEPS=1), and its batches. */
function stepBreakdown(batchTimes, committedAt, arrivedAt) {
  const batchOf = new Map();
  for (const times of batchTimes) for (const id of times.messageIds) batchOf.set(id, times);
  const events = [];
  let batches = new Set();
  for (const [id, at] of committedAt) {
    const times = batchOf.get(id);
    if (!times || !arrivedAt.has(id)) continue;
    const steps = eventSteps(times, at, arrivedAt.get(id));
    if (!steps) continue;
    events.push(steps);
    batches.add(times);
  }
  batches = [...batches];
  return { events: events.length, batches: batches.length, eventsPerBatch: batches.length ? events.length / batches.length : 0, ...stepPercentiles(events) };
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`outbox variant failed: ${err.stack || err}${err.driverError?.detail ? `\n${err.driverError.detail}` : ""}\n`);
    process.exit(1);
  },
);
