#!/usr/bin/env node
'use strict';
/**
 * consumer-app's memory over a backlog: a fresh topic of `partitions` partitions filled with `records` payments
 * (PaymentRequested in Avro single-object encoding, as producer-app's load command writes them: key = accountId,
 * `message-id` and `event-type` headers), a fresh database, then consumer-app started over the backlog and its RSS
 * sampled (VmHWM and VmRSS of /proc/<pid>/status) until its group has committed every offset. Then it is stopped,
 * and the database and the run's topics are removed.
 *
 *   node bench/backlog-memory.js --records 1000000 --partitions 12 [--main <consumer-app main.js>] [--heap]
 *
 * Prints progress lines and one `RESULT {...}` line. As a module: measureBacklogMemory({ brokers, databaseUrl,
 * records, partitions, log, dir }) -> { records, partitions, peakRssMb, recordsPerSecond, seconds, heapPeakMb? }.
 *
 * Options beyond the brief ones: `main` (another build's consumer-app, to compare), `env` (more environment for
 * consumer-app, e.g. KAFKA_CLIENT=platformatic), `nodeFlags`, `heap` (sample process.memoryUsage() in consumer-app
 * through a preloaded module: heapPeakMb and externalPeakMb; off by default, it costs a little CPU).
 * `recordsPerSecond` counts from the first committed offset (start-up excluded); `seconds` from the spawn.
 */
const { spawn } = require('child_process');
const { randomUUID } = require('crypto');
const { mkdirSync, readFileSync, writeFileSync, existsSync } = require('fs');
const { join } = require('path');
const avro = require('avsc');
const { Client } = require('pg');

const ROOT = join(__dirname, '..');
const LIBRARY = join(ROOT, 'dist/libs/kafka-exactly-once');
const CONSUMER_MAIN = join(ROOT, 'dist/apps/consumer-app/apps/consumer-app/src/main.js');
const ACCOUNTS = 200;
/** Records per produce request; each partition's requests one after another, the partitions side by side. */
const PER_SEND = 4000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The payment schema's Avro type and its single-object header (C3 01, the 8-byte CRC-64-AVRO fingerprint). */
function paymentCodec() {
  const type = avro.Type.forSchema(JSON.parse(readFileSync(join(ROOT, 'schemas/payment-requested.v1.avsc'), 'utf8')));
  const { canonicalForm } = require(join(LIBRARY, 'formats/avro/schema-registry.js'));
  const { rabinFingerprint64, fingerprintBytes } = require(join(LIBRARY, 'formats/avro/rabin-fingerprint.js'));
  const header = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprintBytes(rabinFingerprint64(Buffer.from(canonicalForm(type), 'utf8')))]);
  return { encode: (payment) => Buffer.concat([header, type.toBuffer(payment)]), eventType: type.name };
}

/** A seeded generator (the load command's mulberry32): the same backlog for the same arguments, as its --seed. */
const prng = (seed) => require(join(ROOT, 'dist/apps/producer-app/apps/producer-app/src/load/prng.js')).prng(seed);

/** Publishes `records` payments on `topic`: an account's payments on one partition (account n on n mod partitions), in order. */
async function publishBacklog(kafka, topic, records, partitions) {
  const { encode, eventType } = paymentCodec();
  const random = prng(2026);
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const perPartition = Array.from({ length: partitions }, () => 0);
  for (let i = 0; i < records; i++) perPartition[i % ACCOUNTS % partitions]++;
  const started = Date.now();
  let next = 0;
  const make = () => {
    const account = next++ % ACCOUNTS;
    const amount = (Math.floor(random() * 5000) + 100) * (random() < 0.6 ? 1 : -1);
    const value = encode({ paymentId: randomUUID(), accountId: `acc-${account}`, amountCents: amount, requestedAt: new Date().toISOString() });
    return { key: `acc-${account}`, value, headers: { 'message-id': randomUUID(), 'event-type': eventType } };
  };
  // Records are made a request's worth at a time for whichever partition sends next, so the backlog is never all in memory.
  const pending = Array.from({ length: partitions }, () => []);
  const fill = (partition) => {
    while (pending[partition].length < Math.min(PER_SEND, perPartition[partition]) && next < records) {
      const account = next % ACCOUNTS;
      const record = make();
      pending[account % partitions].push(record);
    }
  };
  await Promise.all(
    Array.from({ length: partitions }, async (_, partition) => {
      while (perPartition[partition] > 0) {
        fill(partition);
        const messages = pending[partition].splice(0, PER_SEND);
        if (messages.length === 0) break;
        perPartition[partition] -= messages.length;
        await producer.send({ topic, acks: 1, messages: messages.map((m) => ({ ...m, partition })) });
      }
    }),
  );
  await producer.disconnect();
  return { seconds: (Date.now() - started) / 1000 };
}

/** VmHWM and VmRSS of a live process, in MB. */
function memoryOf(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (name) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? NaN);
    return { hwm: kb('VmHWM') / 1024, rss: kb('VmRSS') / 1024 };
  } catch {
    return undefined;
  }
}

/** Records of `topic` the group has not committed yet. */
async function committedLag(admin, group, topic) {
  const [ends, [committed]] = await Promise.all([admin.fetchTopicOffsets(topic), admin.fetchOffsets({ groupId: group, topics: [topic] })]);
  let lag = 0;
  for (const end of ends) {
    const done = Number(committed.partitions.find((p) => p.partition === end.partition)?.offset ?? -1);
    lag += Number(end.high) - Math.max(Number(end.low), done);
  }
  return lag;
}

async function adminQuery(databaseUrl, sql) {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

/** A preloaded module for consumer-app that appends process.memoryUsage() to a file every 250 ms. */
function heapSampler(dir) {
  const file = join(dir, 'memory-sampler.js');
  writeFileSync(
    file,
    `'use strict';
const { appendFileSync } = require('fs');
const out = process.env.BACKLOG_MEMORY_SAMPLES;
setInterval(() => {
  const m = process.memoryUsage();
  appendFileSync(out, JSON.stringify({ t: Date.now(), rss: m.rss, heapTotal: m.heapTotal, heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers }) + '\\n');
}, 250).unref();
`,
  );
  return file;
}

async function measureBacklogMemory({ brokers, databaseUrl, records, partitions, log = () => undefined, dir, main = CONSUMER_MAIN, env = {}, nodeFlags = [], heap = false }) {
  const { createKafkaClient } = require(join(LIBRARY, 'kafkajs/index.js'));
  const { createTopicsAndWait } = require(join(LIBRARY, 'kafka-topics.js'));
  const tag = `backlog-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
  const prefix = `${tag}.`;
  const topic = `${prefix}payments.requested`;
  const group = `${prefix}group`;
  const database = tag.replace(/[^a-z0-9]/g, '_');
  const runDir = join(dir, tag);
  mkdirSync(runDir, { recursive: true });
  const kafka = createKafkaClient({ clientId: 'backlog-memory', brokers, logLevel: 0 });
  const admin = kafka.admin();
  await admin.connect();
  let child;
  try {
    await createTopicsAndWait(admin, [topic, `${prefix}payments.processed`, `${topic}.dlq`].map((t) => ({ topic: t, numPartitions: partitions, replicationFactor: 1 })));
    await adminQuery(databaseUrl, `CREATE DATABASE ${database}`);
    const published = await publishBacklog(kafka, topic, records, partitions);
    log(`published ${records} payments on ${partitions} partitions in ${published.seconds.toFixed(1)} s`);

    const samplesFile = join(runDir, 'memory-usage.jsonl');
    const flags = [...nodeFlags, ...(heap ? ['--require', heapSampler(runDir)] : [])];
    const url = new URL(databaseUrl);
    url.pathname = `/${database}`;
    const started = Date.now();
    child = spawn(process.execPath, [...flags, main], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        DATABASE_URL: url.toString(),
        KAFKA_BROKERS: brokers.join(','),
        KAFKA_TOPIC_PREFIX: prefix,
        KAFKA_GROUP_ID: group,
        HTTP_PORT: '0',
        DEMO_TOPIC_PARTITIONS: String(partitions),
        PAYMENT_APPROVAL_LIMIT_CENTS: String(Number.MAX_SAFE_INTEGER),
        BACKLOG_MEMORY_SAMPLES: samplesFile,
        ...env,
      },
    });
    let output = '';
    child.stdout.on('data', (d) => (output = (output + d).slice(-200000)));
    child.stderr.on('data', (d) => (output = (output + d).slice(-200000)));
    const exited = new Promise((resolve) => child.on('close', resolve));

    let peakRssMb = 0;
    let firstProgress;
    let lag = records;
    let lastLog = 0;
    const deadline = started + Math.max(600000, records * 5);
    for (;;) {
      if (child.exitCode !== null) throw new Error(`consumer-app exited with ${child.exitCode}: ${output.slice(-2000)}`);
      const memory = memoryOf(child.pid);
      if (memory) peakRssMb = Math.max(peakRssMb, memory.hwm, memory.rss);
      lag = await committedLag(admin, group, topic).catch(() => lag);
      if (firstProgress === undefined && lag < records) firstProgress = { at: Date.now(), lag };
      if (Date.now() - lastLog >= 10000) {
        lastLog = Date.now();
        log(`${records - lag} of ${records} committed, RSS ${memory?.rss.toFixed(0)} MB (peak ${peakRssMb.toFixed(0)} MB)`);
      }
      if (lag === 0) break;
      if (Date.now() > deadline) throw new Error(`consumer-app did not commit the backlog in time (${lag} left): ${output.slice(-2000)}`);
      await sleep(500);
    }
    const done = Date.now();
    const memory = memoryOf(child.pid);
    if (memory) peakRssMb = Math.max(peakRssMb, memory.hwm);
    const from = firstProgress ?? { at: started, lag: records };
    const result = {
      records,
      partitions,
      peakRssMb: Math.round(peakRssMb),
      recordsPerSecond: Math.round(from.lag / Math.max((done - from.at) / 1000, 0.001)),
      seconds: Math.round((done - started) / 100) / 10,
    };
    if (heap && existsSync(samplesFile)) {
      const samples = readFileSync(samplesFile, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
      const peak = (field) => Math.round(Math.max(...samples.map((s) => s[field])) / 1048576);
      Object.assign(result, { heapPeakMb: peak('heapTotal'), heapUsedPeakMb: peak('heapUsed'), externalPeakMb: peak('external'), arrayBuffersPeakMb: peak('arrayBuffers') });
    }
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(15000)]);
    writeFileSync(join(runDir, 'consumer-app.log'), output);
    return result;
  } finally {
    if (child && child.exitCode === null) {
      child.kill('SIGKILL');
      await sleep(500);
    }
    await adminQuery(databaseUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch((err) => log(`could not drop database ${database}: ${err.message}`));
    const own = (await admin.listTopics().catch(() => [])).filter((t) => t.startsWith(prefix));
    if (own.length > 0) await admin.deleteTopics({ topics: own }).catch((err) => log(`could not delete topics ${own.join(', ')}: ${err.message}`));
    await admin.deleteGroups([group]).catch(() => undefined);
    await admin.disconnect();
  }
}

module.exports = { measureBacklogMemory, publishBacklog };

if (require.main === module) {
  const argv = process.argv.slice(2);
  const flag = (name, fallback) => {
    const i = argv.indexOf(`--${name}`);
    return i === -1 ? fallback : argv[i + 1];
  };
  const int = (name, fallback) => {
    const value = Number(flag(name, fallback));
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
    return value;
  };
  const stamp = () => new Date().toISOString().slice(11, 19);
  measureBacklogMemory({
    brokers: (process.env.KAFKA_BROKERS || '127.0.0.1:9092').split(','),
    databaseUrl: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    records: int('records', 1000000),
    partitions: int('partitions', 12),
    dir: flag('dir', join(ROOT, 'bench/results/backlog-memory')),
    main: flag('main', CONSUMER_MAIN),
    nodeFlags: (process.env.BENCH_NODE_FLAGS || '').split(' ').filter(Boolean),
    heap: argv.includes('--heap'),
    log: (line) => process.stdout.write(`backlog-memory [${stamp()}] ${line}\n`),
  }).then(
    (result) => process.stdout.write(`RESULT ${JSON.stringify(result)}\n`),
    (err) => {
      process.stderr.write(`${err.stack ?? err}\n`);
      process.exit(1);
    },
  );
}
