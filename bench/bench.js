#!/usr/bin/env node
'use strict';
/**
 * `npm run bench`: the same preloaded payments through each variant, side by side, in one run on this machine.
 *
 *   npm run bench -- [--count 100000] [--partitions 6] [--variants P,P0,O,A,AT,B,C,D,DT,DP,DD,DK,E,J] [--slow-count 1000]
 *                    [--sweep] [--accounts 200] [--load-concurrency 64] [--cpu-prof]
 *                    [--latency | --no-latency] [--latency-seconds 20] [--latency-rate N]
 *
 * Publishers: P is producer-app's load command (the EventPublisher: idempotent producer, circuit breaker,
 * spool) publishing `--count` payments; P0 is a plain KafkaJS idempotent producer sending the very same records
 * (bytes, keys, headers, partitions) in batches of 500, acks all. P's topic is the input every consumer variant
 * gets a copy of (sent by P0), so all of them read the same records. O is the transactional outbox's relay
 * (bench/variants/outbox.js): `--count` events preloaded with Outbox.add, then timed from the relay being active
 * until all are in Kafka; then its commit-to-visible latency (a writer's COMMIT to the event read committed) at
 * 1,000 events/s for 10 s. Targets: O ≥ 0.5 × P0, p99 ≤ 100 ms.
 *
 * Consumers, each a process of its own, from the start of its own input topic with its own group and output:
 *   A  plain KafkaJS consume → produce copy, at-least-once, no database (the limit)
 *   AT A's copy in Kafka transactions: a transactional producer per partition, sendOffsets, read committed, no database
 *   C  exactly-once by hand: one Kafka and one PostgreSQL transaction per record (`--slow-count` records)
 *   D  consumer-app as shipped (the payments handler, a batch handler: the ledger rule in set-based SQL)
 *   DJ D reading and writing JSON (EVENT_FORMAT=json): the same records, each value the JSON of its Avro record
 *      (validated with the app's DTO), the outputs plain JSON; beside D, what the format costs (no latency phase)
 *   DT, DP, DD, DK D's payments handler (consumer-app's PaymentsLedger, the same statements) on TypeORM, Prisma 7,
 *      Drizzle and Kysely (bench/variants/data-layer-ledger.js), the ledger's statements sent through each data
 *      layer's own API for SQL; CPU per record of each against DT's and D's (target ≤ 1.2 × TypeORM's; no latency phase)
 *   E  the library with a trivial handler (`ctx.emit` of the input), default settings
 *   B  the stock @nestjs/microservices Kafka transport, the ledger rule per event, at-least-once (`--slow-count` records)
 *   J  the ledger rule by hand on the JVM, one Kafka and one PostgreSQL transaction per poll
 *   F  E's copy where 1 record in 100 fails for good (dead-lettered after its 3 in-place attempts): the handler
 *      calls it costs, counted per record in the process, failed and rolled-back calls included: calls per failing
 *      record, and extra calls (past the first) of records that never failed, per 1,000 records
 *   G  F's handler, each call first sending a statement (SELECT 1) in the unit's transaction: failures after
 *      statements, which roll the unit back
 *   AX, DX, DX4, EX (only when named in --variants) A on @platformatic/kafka, D and E on the platformatic driver
 *   (docs/drivers.md: its consumer group and producers), DX4 on Kafka 4's consumer groups.
 *   K1, K (only when named in --variants) E's copy after a 2 ms lookup per event, under @OrderedEvent by the
 *      record key: one key of a partition at a time (K1), 16 keys of a partition at once in key lanes (K)
 * A variant is done when its group has committed every input offset. For each: records/s (from its group
 * being ready, every process a member, to its last commit), start-up time, CPU seconds and peak RSS of its
 * processes, PostgreSQL transactions committed in its database, and the transaction markers on its output; and
 * CPU µs per record over the same span (from ready to done): of the variant's processes, of the local broker
 * (by its pid file, when scripts/kafka started it) and of the whole machine (/proc/stat: the variant, the broker,
 * PostgreSQL and the bench's own polling).
 *
 * Latency (on by default when --count is 20,000 or more, so not in the CI smoke run; --latency / --no-latency
 * override): after each consumer variant's throughput run, a second run of it (one process) on a fresh input
 * topic, group, output topic and database, idle until its group is ready. A read_committed reader of its output
 * joins first; then a plain KafkaJS idempotent producer in the bench publishes the input records at a steady rate
 * (every 10 ms the records due, each stamped with its publish time as CreateTime) for 2 s of warm-up (not
 * counted) and then --latency-seconds. The rate is half the variant's records/s of its throughput run in this
 * bench run (--latency-rate N: N records/s for every variant); D runs a third time at a quarter of it (not with
 * --latency-rate). When more records are needed than the input has,
 * they come round again with a fresh message-id and paymentId. Each output is matched to its input (A: the
 * copied message-id header; D, E: causation-id; B, C, J, whose outputs carry no link: the paymentId in the
 * value); its latency is the moment the reader receives it minus the input's publish time, also split at the
 * output's own CreateTime (when the variant sent it, before its commit). Reported per variant: the rate
 * achieved, outputs matched of published, p50, p99 and max; the targets (p99 of D ≤ 250 ms at half and at a
 * quarter of its peak, of E ≤ 100 ms at half) are reported as met or missed, never asserted. Code: bench/latency.js.
 *
 * Spool catch-up (with P, on by default from 20,000 records; --spool-catch-up / --no-spool-catch-up): producer-app's
 * load command again at 80% of P's measured rate for 25 s, and the local broker (started by scripts/kafka, killed
 * and started by its pid file) away for 5 s after 5 s. Reported: publishes spooled, how soon after Kafka's
 * return every publish went out live again (target: within 30 s) and the spool was empty, and whether every
 * acknowledged event is on the topic once at least, in per-key order of acknowledgement (read committed).
 *
 * --sweep repeats D and E over 1, 6 and 12 partitions and 1, 2 and 3 processes. --cpu-prof writes a V8 CPU
 * profile of every consumer process (bench/results/<run>/profiles; summarise one with bench/profile-summary.js).
 * Results: a table on stdout, and bench/results/<run>/{results.json,summary.md,throughput.svg,latency.svg}.
 */
const { spawn, spawnSync } = require('child_process');
const { mkdirSync, readFileSync, writeFileSync, existsSync } = require('fs');
const { join } = require('path');
const { Kafka, logLevel } = require('kafkajs');
const { Client } = require('pg');
const latency = require('./latency');
const report = require('./report');

const ROOT = join(__dirname, '..');

// This script's own Kafka client (P0's producer, the readers, the admin): one the library builds
// (src/kafkajs/client.ts: its request queue, its read-committed filter), KafkaJS's own before the library is built.
const LIBRARY_KAFKAJS = join(ROOT, 'dist/libs/kafka-exactly-once/kafkajs/index.js');
const kafkaClient = (config) => (existsSync(LIBRARY_KAFKAJS) ? require(LIBRARY_KAFKAJS).createKafkaClient(config) : new Kafka(config));
const DATABASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const LOAD_CLI = join(ROOT, 'dist/apps/producer-app/apps/producer-app/src/cli.js');
const CONSUMER_MAIN = join(ROOT, 'dist/apps/consumer-app/apps/consumer-app/src/main.js');
/** The first records of a latency phase are published but not counted: the variant's first units of work start
 * its per-partition producers (the library's InitProducerId runs on a partition's first batch) and warm the JIT. */
const LATENCY_WARMUP_MS = 2000;
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

// match: how the latency phase finds an output's input (bench/latency.js); transactional: outputs in Kafka
// transactions (the latency phase then counts the markers of its output).
const VARIANTS = {
  A: { label: 'A. plain KafkaJS copy, at-least-once, no database', script: 'variants/plain-copy.js', database: false, match: 'message-id' },
  AT: { label: "AT. KafkaJS copy in Kafka transactions (a producer per partition, sendOffsets), no database", script: 'variants/transactional-copy.js', database: false, match: 'message-id', transactional: true },
  C: { label: 'C. exactly-once by hand, one Kafka + one PostgreSQL transaction per record', script: 'variants/hand-eos.js', database: true, slow: true, match: 'json-payment', transactional: true },
  D: { label: 'D. consumer-app as shipped (batch handler: the ledger rule in set-based SQL)', consumerApp: true, database: true, match: 'causation-id', transactional: true },
  // DJ: D with JSON in and out; its input is D's records, each value rewritten as the JSON of its Avro record.
  DX: { label: "DX. D on the platformatic driver (KAFKA_CLIENT=platformatic, the classic group protocol)", consumerApp: true, database: true, match: 'causation-id', transactional: true, env: { KAFKA_CLIENT: 'platformatic' }, ratesOf: 'D' },
  DX4: { label: "DX4. D on the platformatic driver and Kafka 4's consumer groups (KAFKA_GROUP_PROTOCOL=consumer)", consumerApp: true, database: true, match: 'causation-id', transactional: true, env: { KAFKA_CLIENT: 'platformatic', KAFKA_GROUP_PROTOCOL: 'consumer' }, ratesOf: 'D' },
  DJ: { label: "DJ. consumer-app reading and writing JSON (EVENT_FORMAT=json), D's records as JSON", consumerApp: true, database: true, match: 'causation-id', transactional: true, env: { EVENT_FORMAT: 'json' }, json: true, noLatency: true },
  // DT, DP, DD, DK: D's handler (consumer-app's PaymentsLedger, the same statements) on each data layer, in a
  // process of their own (bench/variants/data-layer-ledger.js); DT is TypeORM, the control for the other three.
  DT: { label: "DT. D's payments handler on TypeORM (ctx.manager), bench/variants/data-layer-ledger.js", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'typeorm' }, dlq: true, noLatency: true },
  DP: { label: "DP. D's payments handler on Prisma 7 (prismaDatabase, ctx.db.$queryRawUnsafe)", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'prisma' }, dlq: true, noLatency: true, prepare: () => require('./variants/prisma/client').generate() },
  DD: { label: "DD. D's payments handler on Drizzle (drizzleDatabase, ctx.db.execute)", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'drizzle' }, dlq: true, noLatency: true },
  DK: { label: "DK. D's payments handler on Kysely (kyselyDatabase, ctx.db.executeQuery)", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'kysely' }, dlq: true, noLatency: true },
  E: { label: 'E. the library, trivial handler (ctx.emit of the input)', script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true },
  // The platformatic driver (docs/drivers.md; Node.js 22.22+ or 24.6+), not in the default set: --variants D,DX,DX4,E,EX.
  AX: { label: 'AX. A on @platformatic/kafka (its own consumer group and producer), at-least-once, no database', script: 'variants/plain-copy-platformatic.mjs', database: false, match: 'message-id', ratesOf: 'A' },
  EX: { label: "EX. E on the platformatic driver (@platformatic/kafka's consumer group)", script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true, env: { KAFKA_CLIENT: 'platformatic' }, ratesOf: 'E' },
  // F: the cost of failing records in handler calls (BENCH_CALLS_FILE) and in throughput, against E.
  F: { label: 'F. the library, trivial handler, 1 record in 100 failing for good (dead-lettered)', script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_FAIL_EVERY: '100' }, countsCalls: true },
  // G: F's, each call first sending a statement (a read) in the unit's transaction: failures after statements.
  G: { label: "G. F's handler after a statement (SELECT 1) in the unit's transaction, 1 record in 100 failing", script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_FAIL_EVERY: '100', BENCH_STATEMENT: '1' }, countsCalls: true },
  B: { label: 'B. @nestjs/microservices Kafka transport, @EventPattern, ledger rule in PostgreSQL, at-least-once', script: 'variants/nest-transport.js', database: true, slow: true, match: 'avro-payment' },
  // Key lanes (not in the default set: --variants K1,K): E's copy under @OrderedEvent by the record key, each
  // handler call first waiting BENCH_LOOKUP_MS for a lookup (a remote call, simulated by a timer); one key of a
  // partition at a time (K1), and 16 keys of a partition at once (K).
  K1: { label: 'K1. the library, copy after a 2 ms lookup, @OrderedEvent, one key at a time', script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_LOOKUP_MS: '2', BENCH_LANES: '1' } },
  K: { label: 'K. the library, copy after a 2 ms lookup, @OrderedEvent({ lanes: 16 })', script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_LOOKUP_MS: '2', BENCH_LANES: '16' } },
  // J runs on the JVM: its launch() compiles it once (cached) and answers the command line.
  J: { label: 'J. the ledger rule by hand on the JVM: one Kafka and one PostgreSQL transaction per poll, set-based SQL', launch: () => require('./variants/jvm/build').launch(), database: true, match: 'json-payment', transactional: true },
};

function args(argv) {
  const flag = (name, fallback) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
  };
  const int = (name, fallback) => {
    const raw = flag(name, String(fallback));
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got "${raw}"`);
    return n;
  };
  const count = int('count', 100000);
  if (argv.includes('--latency') && argv.includes('--no-latency')) throw new Error('--latency and --no-latency: choose one');
  const variants = flag('variants', 'P,P0,O,A,AT,B,C,D,DJ,DT,DP,DD,DK,E,F,G,J').split(',').filter(Boolean);
  for (const v of variants) if (!['P', 'P0', 'O', ...Object.keys(VARIANTS)].includes(v)) throw new Error(`unknown variant ${v} (P, P0, O, ${Object.keys(VARIANTS).join(', ')})`);
  return {
    count,
    partitions: int('partitions', 6),
    accounts: int('accounts', 200),
    // P's publishes in flight (the load command's --concurrency; its default is 64).
    loadConcurrency: int('load-concurrency', 64),
    slowCount: int('slow-count', 1000),
    variants,
    sweep: argv.includes('--sweep'),
    cpuProf: argv.includes('--cpu-prof'),
    // On by default for runs of 20,000 records or more (not for the CI smoke run).
    latency: argv.includes('--latency') || (!argv.includes('--no-latency') && count >= 20000),
    // The spool's catch-up after an outage (it stops the local broker for a few seconds): with P, from 20,000 records.
    spoolCatchUp: argv.includes('--spool-catch-up') || (!argv.includes('--no-spool-catch-up') && count >= 20000),
    latencySeconds: int('latency-seconds', 20),
    latencyRate: flag('latency-rate') === undefined ? undefined : int('latency-rate', 1),
    brokers: (process.env.KAFKA_BROKERS || '127.0.0.1:9092').split(','),
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (line) => process.stdout.write(`bench [${new Date().toISOString().slice(11, 19)}] ${line}\n`);

function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function adminQuery(sql, params = []) {
  const client = new Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** Busy CPU seconds of the whole machine so far (every core: user, nice, system, irq, softirq, steal), from /proc/stat. */
function machineCpuSeconds() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = fields;
  return (user + nice + system + irq + softirq + (steal || 0)) / CLOCK_TICKS;
}

/** The local broker's pid, from the pid file of scripts/kafka (undefined when another broker is used). */
function brokerPid() {
  try {
    const pid = Number(readFileSync(join(process.env.KAFKA_STATE_DIR || join(ROOT, '.kafka'), 'broker.pid'), 'utf8').trim());
    return Number.isInteger(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('kafka.Kafka') ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** CPU seconds of the variant's processes, of the broker and of the machine, at one moment. */
function cpuSnapshot(children, broker) {
  return { variant: sum(children.map((c) => processStats(c.pid)?.cpu ?? 0)), broker: broker === undefined ? undefined : processStats(broker)?.cpu, machine: machineCpuSeconds() };
}

/** CPU µs per record between two snapshots. */
function cpuPerRecord(from, to, records) {
  const us = (a, b) => (a === undefined || b === undefined ? undefined : ((b - a) * 1e6) / records);
  return { variant: us(from.variant, to.variant), broker: us(from.broker, to.broker), machine: us(from.machine, to.machine) };
}

/** CPU seconds (user + system) and peak RSS (MB) of a live process, from /proc. */
function processStats(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpu = (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
    const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return { cpu, peakRssMb: hwm ? Number(hwm[1]) / 1024 : undefined };
  } catch {
    return undefined;
  }
}

class Bench {
  constructor(opts) {
    this.opts = opts;
    this.id = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '');
    this.tag = `bench-${this.id.toLowerCase()}-${Math.random().toString(36).slice(2, 6)}`;
    this.dir = join(ROOT, 'bench/results', this.id);
    mkdirSync(join(this.dir, 'logs'), { recursive: true });
    this.kafka = kafkaClient({ clientId: 'bench', brokers: opts.brokers, logLevel: logLevel.NOTHING });
    this.admin = this.kafka.admin();
    this.databases = [];
    /** How many times each consumer variant was prepared (a variant may be named more than once). */
    this.runsOf = new Map();
  }

  async createTopics(names, partitions) {
    await require(join(ROOT, 'dist/libs/kafka-exactly-once/kafka-topics.js')).createTopicsAndWait(this.admin, names.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })));
  }

  async createDatabase(name) {
    await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await adminQuery(`CREATE DATABASE ${name}`);
    this.databases.push(name);
    return withDatabase(DATABASE_URL, name);
  }

  async dropDatabases() {
    for (const name of this.databases.splice(0)) await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
  }

  /** P: producer-app's load command publishes the payments; its own "published N in T" figure and our clock. */
  async publishWithLoadCommand(prefix, count) {
    const started = Date.now();
    const child = spawn(process.execPath, [LOAD_CLI, 'payments', '--count', String(count), '--accounts', String(this.opts.accounts), '--seed', '2026', '--concurrency', String(this.opts.loadConcurrency)], {
      cwd: ROOT,
      env: { ...process.env, KAFKA_BROKERS: this.opts.brokers.join(','), KAFKA_TOPIC_PREFIX: prefix, SPOOL_DIR: join(this.dir, 'spool') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const code = await new Promise((resolve) => child.on('close', resolve));
    writeFileSync(join(this.dir, 'logs', 'P-load.log'), output);
    if (code !== 0) throw new Error(`producer-app's load command exited with ${code}: ${output.slice(-1500)}`);
    // The command's own clock (from its first publish to the last acknowledgement), without its start-up.
    const summary = /^SUMMARY (\{.*\})$/m.exec(output);
    const elapsedMs = summary ? JSON.parse(summary[1]).elapsedMs : undefined;
    return { seconds: (elapsedMs ?? Date.now() - started) / 1000, startupSeconds: elapsedMs ? (Date.now() - started - elapsedMs) / 1000 : undefined };
  }

  /**
   * The spool's catch-up after an outage: the load command at `rate` publishes/s for `seconds`, the local broker
   * stopped for `outageSeconds` after `outageAt` s; then every acknowledged event looked for on the topic.
   */
  async spoolCatchUp(rate, { seconds = 25, outageAt = 5, outageSeconds = 5 } = {}) {
    const prefix = `${this.tag}.spool.`;
    const topic = `${prefix}payments.requested`;
    await this.createTopics([topic], this.opts.partitions);
    const ackLog = join(this.dir, 'spool-catch-up-acks.log');
    const count = Math.max(1, Math.round(rate * seconds));
    const child = spawn(process.execPath, [LOAD_CLI, 'payments', '--count', String(count), '--accounts', String(this.opts.accounts), '--rate', String(rate), '--seed', '2027', '--ack-log', ackLog], {
      cwd: ROOT,
      env: { ...process.env, KAFKA_BROKERS: this.opts.brokers.join(','), KAFKA_TOPIC_PREFIX: prefix, SPOOL_DIR: join(this.dir, 'spool-catch-up') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exited = new Promise((resolve) => child.on('close', resolve));
    await sleep(outageAt * 1000);
    await this.admin.disconnect().catch(() => undefined);
    kafkaScript('kill'); // as a crash (a controlled shutdown of Kafka 4.4 can leave a transaction hanging: docs/operations.md §8)
    const stoppedAt = Date.now();
    await sleep(outageSeconds * 1000);
    kafkaScript('start');
    const backAt = Date.now();
    await this.admin.connect();
    const code = await exited;
    writeFileSync(join(this.dir, 'logs', 'P-spool-catch-up.log'), output);
    if (code !== 0) throw new Error(`the load command of the spool catch-up exited with ${code}: ${output.slice(-1500)}`);
    const summary = JSON.parse(/^SUMMARY (\{.*\})$/m.exec(output)[1]);
    // Every acknowledged event on the topic; per key, their first copies in the order they were acknowledged.
    const acked = readFileSync(ackLog, 'utf8').split('\n').filter(Boolean).map((line) => line.split(' ')[0]);
    let records = [];
    for (let want = acked.length; ; want = records.length + 1) {
      records = await this.readAll(topic, want);
      const ids = new Set(records.map((r) => r.headers?.['message-id']?.toString()));
      if (acked.every((id) => ids.has(id)) || records.length < want) break;
    }
    const firstSeen = new Map();
    const keyOf = new Map();
    for (const r of records) {
      const id = r.headers?.['message-id']?.toString();
      if (!firstSeen.has(id)) firstSeen.set(id, firstSeen.size);
      keyOf.set(id, r.key?.toString() ?? '');
    }
    const missing = acked.filter((id) => !firstSeen.has(id)).length;
    const lastSeen = new Map();
    let orderViolations = 0;
    for (const id of acked) {
      if (!firstSeen.has(id)) continue;
      const key = keyOf.get(id);
      if (firstSeen.get(id) < (lastSeen.get(key) ?? -1)) orderViolations++;
      lastSeen.set(key, firstSeen.get(id));
    }
    const after = (at) => (at === undefined ? undefined : (at - backAt) / 1000);
    return {
      rate,
      seconds,
      outageSeconds: (backAt - stoppedAt) / 1000,
      published: acked.length,
      spooled: summary.spooled,
      spoolPeak: summary.spoolPeak,
      // Every publish answered after this one went out live: 0 when none was spooled after Kafka's return.
      liveAgainSeconds: summary.lastSpooledAt === undefined ? undefined : Math.max(0, after(summary.lastSpooledAt)),
      spoolEmptySeconds: summary.spoolEmptyAt === undefined ? undefined : Math.max(0, after(summary.spoolEmptyAt)),
      onTopic: firstSeen.size,
      copies: records.length - firstSeen.size,
      missing,
      orderViolations,
    };
  }

  /** Reads a topic from the beginning until `count` records (read committed). */
  async readAll(topic, count, { withValues = true } = {}) {
    const consumer = this.kafka.consumer({ groupId: `${this.tag}-reader-${Math.random().toString(36).slice(2)}`, readUncommitted: false, maxBytesPerPartition: 4 << 20 });
    const records = [];
    let n = 0;
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const deadline = Date.now() + 300000;
    await consumer.run({
      eachBatch: async ({ batch }) => {
        n += batch.messages.length;
        if (withValues) for (const m of batch.messages) records.push({ partition: batch.partition, key: m.key, value: m.value, headers: m.headers, timestamp: m.timestamp });
      },
    });
    let last = n;
    let idleSince = Date.now();
    while (n < count) {
      if (n !== last) [last, idleSince] = [n, Date.now()];
      if (!withValues && Date.now() - idleSince > 5000) break; // counting: what is there is the answer
      if (Date.now() > deadline) throw new Error(`read only ${n} of ${count} records of ${topic}`);
      await sleep(100);
    }
    await consumer.disconnect();
    return withValues ? records : n;
  }

  /**
   * O: the outbox relay (bench/variants/outbox.js) over `count` events preloaded with Outbox.add, in a process of
   * its own; then its commit-to-visible latency at 1,000 events/s for 10 s.
   */
  async runOutbox(count) {
    const prefix = `${this.tag}.o.`;
    await this.createTopics([`${prefix}payments.requested`], this.opts.partitions);
    const databaseUrl = await this.createDatabase(`${this.tag.replace(/[^a-z0-9]/g, '_')}_o`.slice(0, 63));
    const result = spawnSync(process.execPath, [join(__dirname, 'variants/outbox.js')], {
      encoding: 'utf8',
      env: { ...process.env, BENCH_DATABASE_URL: databaseUrl, BENCH_PREFIX: prefix, BENCH_COUNT: String(count), BENCH_ACCOUNTS: String(this.opts.accounts), BENCH_LATENCY_RATE: '1000', BENCH_LATENCY_SECONDS: '10' },
      maxBuffer: 64 * 1024 * 1024,
    });
    const line = (result.stdout || '').split('\n').find((l) => l.startsWith('RESULT '));
    if (result.status !== 0 || !line) throw new Error(`variant O failed (exit ${result.status}): ${(result.stderr || '').slice(-2000)}`);
    const o = JSON.parse(line.slice('RESULT '.length));
    log(`O: relay ${Math.round(o.recordsPerSecond)} events/s (preload ${o.preloadSeconds.toFixed(1)} s), latency at ${Math.round(o.latency.achievedRate)}/s: p50 ${o.latency.p50} ms, p99 ${o.latency.p99} ms (${o.latency.matched}/${o.latency.published} seen)`);
    return { variant: 'O', label: 'O. the outbox relay, from a preloaded outbox (Outbox.add) to Kafka, the default batches (up to 2,000 events) in Kafka transactions', records: count, recordsPerSecond: o.recordsPerSecond, totalSeconds: o.relaySeconds, outboxLatency: o.latency };
  }

  /** P0: a plain KafkaJS idempotent producer sending the records in batches of 500, acks all, each to its partition. */
  async copyRecords(records, topic) {
    const producer = this.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const started = Date.now();
    const byPartition = new Map();
    for (const r of records) {
      if (!byPartition.has(r.partition)) byPartition.set(r.partition, []);
      byPartition.get(r.partition).push({ key: r.key, value: r.value, headers: r.headers, partition: r.partition });
    }
    // One request at a time per partition, the partitions side by side: per-key order as published.
    await Promise.all(
      [...byPartition.values()].map(async (messages) => {
        for (let i = 0; i < messages.length; i += 500) await producer.send({ topic, acks: -1, messages: messages.slice(i, i + 500) });
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    await producer.disconnect();
    return { seconds };
  }

  async committedLag(group, topic) {
    const [ends, [committed]] = await Promise.all([this.admin.fetchTopicOffsets(topic), this.admin.fetchOffsets({ groupId: group, topics: [topic] })]);
    let lag = 0;
    for (const end of ends) {
      const done = Number(committed.partitions.find((p) => p.partition === end.partition)?.offset ?? -1);
      lag += Number(end.high) - Math.max(Number(end.low), done);
    }
    return lag;
  }

  /** Transaction markers on a topic: its offsets minus its records (control records are never delivered). */
  async markers(topic, records) {
    const offsets = await this.admin.fetchTopicOffsets(topic);
    const span = offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
    const read = await this.readAll(topic, records, { withValues: false });
    return span - read;
  }

  /**
   * A consumer variant's own input and output topics (and D's dead-letter topic), group, database, and the
   * environment its processes get. `suffix` names a second set for the same variant (the sweep, the latency phase).
   */
  async prepareVariant(key, { partitions = this.opts.partitions, suffix = '' } = {}) {
    const variant = VARIANTS[key];
    const name = `${key}${suffix}`;
    // A variant named twice in --variants (D,DJ,D,DJ) gets topics, a group and a database of its own each time: the
    // second run would otherwise add its records to the first's topic and count the markers of both.
    const nth = (this.runsOf.get(name) ?? 0) + 1;
    this.runsOf.set(name, nth);
    const prefix = `${this.tag}.${name.toLowerCase()}${nth > 1 ? `-${nth}` : ''}.`;
    const input = `${prefix}payments.requested`;
    const output = ['A', 'AX', 'AT', 'E', 'F', 'G', 'K1', 'K'].includes(key) ? `${prefix}payments.copied` : `${prefix}payments.processed`;
    const group = `${prefix}group`;
    const topics = [input, output];
    const dlq = variant.consumerApp || variant.dlq || variant.countsCalls ? `${prefix}payments.requested.dlq` : undefined;
    if (dlq) topics.push(dlq);
    await this.createTopics(topics, partitions);
    const databaseUrl = variant.database ? await this.createDatabase(prefix.replace(/[^a-z0-9]/g, '_').replace(/_+$/, '').slice(0, 63)) : undefined;
    const database = databaseUrl ? new URL(databaseUrl).pathname.slice(1) : undefined;
    const env = {
      ...process.env,
      BENCH_BROKERS: this.opts.brokers.join(','),
      BENCH_INPUT: input,
      BENCH_OUTPUT: output,
      BENCH_GROUP: group,
      BENCH_PREFIX: prefix,
      BENCH_PARTITIONS: String(partitions),
      DATABASE_URL: databaseUrl ?? '',
      // consumer-app's names
      KAFKA_BROKERS: this.opts.brokers.join(','),
      KAFKA_TOPIC_PREFIX: prefix,
      KAFKA_GROUP_ID: group,
      HTTP_PORT: '0',
      DEMO_TOPIC_PARTITIONS: String(partitions),
      // No payment waits for an approval here: the bench measures the flow, not the operators.
      PAYMENT_APPROVAL_LIMIT_CENTS: String(Number.MAX_SAFE_INTEGER),
      ...variant.env,
    };
    return { key, variant, name, prefix, input, output, dlq, group, partitions, database, env };
  }

  /**
   * Starts `processes` processes of a prepared variant. A variant that is not a Node script (J) is compiled first;
   * `started` is taken after that, so its JVM start-up is counted and its build is not.
   */
  async spawnVariant(setup, processes) {
    const { variant, name, env } = setup;
    const launched = variant.launch ? await variant.launch() : undefined;
    if (variant.prepare) await variant.prepare();
    const started = Date.now();
    const children = Array.from({ length: processes }, (_, i) => {
      const prof = this.opts.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', join(this.dir, 'profiles'), '--cpu-prof-name', `${name}-${i + 1}.cpuprofile`] : [];
      // For experiments with V8's settings: BENCH_NODE_FLAGS='--max-semi-space-size=32' (Node variants only).
      const flags = (process.env.BENCH_NODE_FLAGS || '').split(' ').filter(Boolean);
      const [command, argv] = launched ? [launched.command, launched.args] : [process.execPath, [...flags, ...prof, variant.consumerApp ? CONSUMER_MAIN : join(__dirname, variant.script)]];
      const callsFile = variant.countsCalls ? join(this.dir, 'logs', `${name}-${i + 1}.calls.json`) : undefined;
      const child = spawn(command, argv, { cwd: ROOT, env: callsFile ? { ...env, BENCH_CALLS_FILE: callsFile } : env, stdio: ['ignore', 'pipe', 'pipe'] });
      child.callsFile = callsFile;
      child.output = '';
      child.stdout.on('data', (d) => (child.output = (child.output + d).slice(-200000)));
      child.stderr.on('data', (d) => (child.output = (child.output + d).slice(-200000)));
      child.exitedEarly = new Promise((resolve) => child.on('close', (code) => resolve(code)));
      child.logFile = join(this.dir, 'logs', `${name}-${i + 1}.log`);
      return child;
    });
    return { children, started };
  }

  /** Throws if a process of the variant has exited. */
  assertRunning(name, children) {
    for (const child of children) if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}: ${child.output.slice(-2000)}`);
  }

  /** The group stable with every process a member: start-up (boot, migrations, join) is over. */
  async groupReady(group, processes) {
    const { groups } = await this.admin.describeGroups([group]).catch(() => ({ groups: [] }));
    return groups[0]?.state === 'Stable' && groups[0].members.length >= processes;
  }

  /** SIGTERM, up to 15 s for a clean exit, then SIGKILL; each process's output to its log file. */
  async stopVariant(children) {
    for (const child of children) {
      if (child.exitCode === null) child.kill('SIGTERM');
    }
    await Promise.race([Promise.all(children.map((c) => c.exitedEarly)), sleep(15000)]);
    for (const child of children) {
      if (child.exitCode === null) child.kill('SIGKILL');
      writeFileSync(child.logFile, child.output);
    }
  }

  async xactCommit(database) {
    return database ? Number((await adminQuery('SELECT xact_commit FROM pg_stat_database WHERE datname = $1', [database]))[0]?.xact_commit ?? 0) : 0;
  }

  /**
   * Runs one consumer variant over `records` (copied into its own input topic) with `processes` processes and
   * waits until its group has committed every offset.
   */
  async runConsumer(key, records, { partitions = this.opts.partitions, processes = 1, suffix = '' } = {}) {
    const setup = await this.prepareVariant(key, { partitions, suffix });
    const { variant, name, input, output, group, database } = setup;
    const repartitioned = partitions === this.opts.partitions ? records : records.map((r, i) => ({ ...r, partition: hashPartition(r.key, partitions, i) }));
    await this.copyRecords(repartitioned, input);
    const count = records.length;
    const xactBefore = await this.xactCommit(database);
    const { children, started } = await this.spawnVariant(setup, processes);

    let ready; // the group stable with every process a member: start-up (boot, migrations, join) is over
    let firstProgress;
    const broker = brokerPid();
    let cpuFrom; // at ready (or the first progress, if ready was missed)
    let cpuTo;
    let lag = count;
    let stats = children.map(() => undefined);
    const samples = [];
    const deadline = started + Math.max(600000, count * 20);
    try {
      for (;;) {
        this.assertRunning(name, children);
        lag = await this.committedLag(group, input).catch(() => lag);
        stats = children.map((c, i) => processStats(c.pid) ?? stats[i]);
        const t = Date.now() - started;
        samples.push({ t, lag });
        if (ready === undefined && (await this.groupReady(group, processes))) ready = Date.now();
        if (firstProgress === undefined && lag < count) firstProgress = Date.now();
        if (cpuFrom === undefined && (ready !== undefined || firstProgress !== undefined)) cpuFrom = cpuSnapshot(children, broker);
        if (lag === 0) {
          cpuTo = cpuSnapshot(children, broker);
          break;
        }
        if (Date.now() > deadline) throw new Error(`${name}: lag ${lag} after ${(t / 1000).toFixed(0)} s`);
        await sleep(200);
      }
    } finally {
      await this.stopVariant(children);
    }
    const finished = samples[samples.length - 1].t + started;
    const xactAfter = await this.xactCommit(database);
    // F's outputs are fewer than its records (the failing ones are dead-lettered): no marker count.
    const outputs = key === 'A' || key === 'AX' || variant.countsCalls ? undefined : await this.markers(output, count);
    const handlerCalls = variant.countsCalls ? handlerCallsOf(children.map((c) => c.callsFile), count) : undefined;
    // The payments are all valid: a dead letter of a variant that does not fail records on purpose (F, G) is its
    // handler failing, and its figures would be those of dead-lettering, not of handling.
    if (!variant.countsCalls && setup.dlq) {
      const dead = (await this.admin.fetchTopicOffsets(setup.dlq)).reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
      if (dead > 0) throw new Error(`${name}: records of its ${count} were dead-lettered to ${setup.dlq} (${dead} offsets there, transaction markers included): its handler fails (its logs: ${children.map((c) => c.logFile).join(', ')})`);
    }
    // From the group being ready (or, if that was missed between two samples, the first committed offset).
    const from = Math.min(ready ?? Infinity, firstProgress ?? Infinity, finished);
    const steadySeconds = (finished - from) / 1000;
    return {
      variant: name,
      label: variant.label,
      records: count,
      partitions,
      processes,
      recordsPerSecond: count / Math.max(steadySeconds, 0.001),
      startupSeconds: (from - started) / 1000,
      totalSeconds: (finished - started) / 1000,
      cpuSeconds: sum(stats.map((s) => s?.cpu ?? 0)),
      cpuUsPerRecord: cpuFrom && cpuTo ? cpuPerRecord(cpuFrom, cpuTo, count) : undefined,
      peakRssMb: Math.max(0, ...stats.map((s) => s?.peakRssMb ?? 0)),
      pgTransactions: database ? xactAfter - xactBefore : undefined,
      kafkaMarkers: outputs,
      handlerCalls,
      samples,
    };
  }

  /**
   * The latency phase of a variant: one process of it on a fresh input topic, group, output topic and database
   * (the same set-up as its throughput run); a read_committed reader of its output joined first; once its group
   * is ready, `rate` records/s for a warm-up and then `seconds`, and the wait until every output is seen.
   */
  async runLatency(key, records, rate, suffix = '-lat') {
    const { latencySeconds: seconds } = this.opts;
    const setup = await this.prepareVariant(key, { suffix });
    const { variant, name, input, output, group, database } = setup;
    const tracker = new latency.Tracker();
    const reader = await latency.startReader(this.kafka, output, `${setup.prefix}reader`, variant.match, tracker);
    let children = [];
    try {
      const spawned = await this.spawnVariant(setup, 1);
      children = spawned.children;
      const deadline = spawned.started + 300000;
      while (!(await this.groupReady(group, 1))) {
        this.assertRunning(name, children);
        if (Date.now() > deadline) throw new Error(`${name}: its group was not ready after 300 s`);
        await sleep(200);
      }
      const ready = Date.now();
      const xactBefore = await this.xactCommit(database);
      const cpuBefore = children.map((c) => processStats(c.pid)?.cpu ?? 0);
      const benchCpuBefore = process.cpuUsage();
      const check = () => this.assertRunning(name, children);
      const published = await latency.publishSteady(this.kafka, input, latency.feed(records, variant.match), { rate, seconds, warmupMs: LATENCY_WARMUP_MS, tracker, check });
      // Every output seen, or none for 10 s, or the cap.
      const cap = published.end + Math.max(60000, seconds * 3000);
      while (tracker.pending.size > 0 && Date.now() < cap && Date.now() - Math.max(tracker.lastMatchAt, published.end) < 10000) {
        check();
        await sleep(100);
      }
      const drainSeconds = (Date.now() - published.end) / 1000;
      const cpuSeconds = sum(children.map((c, i) => (processStats(c.pid)?.cpu ?? cpuBefore[i]) - cpuBefore[i]));
      const benchCpu = process.cpuUsage(benchCpuBefore);
      const xactAfter = await this.xactCommit(database);
      const offsets = await this.admin.fetchTopicOffsets(output);
      const span = offsets.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
      const wall = (Date.now() - published.start) / 1000;
      return {
        rate,
        seconds,
        warmupSeconds: LATENCY_WARMUP_MS / 1000,
        startupSeconds: (ready - spawned.started) / 1000,
        drainSeconds,
        ...latency.summarize(tracker, { measuredSeconds: published.measuredSeconds, measureFrom: tracker.measureFrom }),
        // Over the whole publishing and drain, warm-up included.
        cpuSeconds,
        benchCpuSeconds: (benchCpu.user + benchCpu.system) / 1e6,
        wallSeconds: wall,
        pgTransactions: database ? xactAfter - xactBefore : undefined,
        // Offsets minus records on the output: one marker per transaction per output partition (once all is read).
        kafkaMarkers: variant.transactional && tracker.pending.size === 0 ? span - tracker.received : undefined,
      };
    } finally {
      await this.stopVariant(children);
      await reader.disconnect().catch(() => undefined);
    }
  }
}


/** Runs scripts/kafka/kafka.sh (the local broker, by its pid file). */
function kafkaScript(command) {
  const result = spawnSync('bash', [join(ROOT, 'scripts/kafka/kafka.sh'), command], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`kafka.sh ${command} failed: ${result.stdout}${result.stderr}`);
}

function sum(values) {
  return values.reduce((a, b) => a + b, 0);
}

/**
 * What F's processes counted (each wrote its calls per paymentId when it stopped): the records that failed, the
 * calls each failing record got, and the calls past the first of the records that never failed, per 1,000 records.
 */
function handlerCallsOf(files, records) {
  const calls = new Map();
  const failing = new Set();
  for (const file of files) {
    const counted = JSON.parse(readFileSync(file, 'utf8'));
    for (const [id, n] of counted.calls) calls.set(id, (calls.get(id) ?? 0) + n);
    for (const id of counted.failing) failing.add(id);
  }
  let extra = 0;
  let failingCalls = 0;
  for (const [id, n] of calls) {
    if (failing.has(id)) failingCalls += n;
    else extra += n - 1;
  }
  return {
    records,
    called: calls.size,
    failing: failing.size,
    callsPerFailingRecord: failing.size > 0 ? failingCalls / failing.size : 0,
    extraCallsPerThousand: (extra * 1000) / records,
  };
}

/**
 * The input records as JSON (DJ): each value the JSON of its Avro PaymentRequested (decoded by avsc, not by the
 * library), the amount an integer; same keys, partitions and message ids, `event-type: json`.
 */
function asJson(records) {
  const avsc = require('avsc');
  const type = avsc.Type.forSchema(JSON.parse(readFileSync(join(ROOT, 'schemas/payment-requested.v1.avsc'), 'utf8')));
  return records.map((r) => {
    const event = type.fromBuffer(r.value.subarray(10)); // after C3 01 and the 8-byte fingerprint
    return { ...r, value: Buffer.from(JSON.stringify({ ...event, amountCents: Number(event.amountCents) })), headers: { ...r.headers, 'event-type': Buffer.from('json') } };
  });
}

/** A stable partition for a record when the sweep repartitions (Kafka's own partitioner is not needed for a bench). */
function hashPartition(key, partitions, i) {
  if (!key) return i % partitions;
  let h = 0;
  for (const byte of key) h = (h * 31 + byte) >>> 0;
  return h % partitions;
}

async function main() {
  const opts = args(process.argv.slice(2));
  if (!existsSync(LOAD_CLI) || !existsSync(CONSUMER_MAIN)) throw new Error('build first: npm run build');
  const bench = new Bench(opts);
  await bench.admin.connect();
  const results = [];
  const publishers = [];
  try {
    log(`run ${bench.id}: ${opts.count} payments, ${opts.partitions} partitions, variants ${opts.variants.join(',')}${opts.sweep ? ', sweep' : ''}; results in bench/results/${bench.id}/`);
    // The input: P publishes it (timed when P is a variant), then it is read once into memory.
    const srcPrefix = `${bench.tag}.src.`;
    const src = `${srcPrefix}payments.requested`;
    await bench.createTopics([src], opts.partitions);
    log(`P: producer-app's load command publishes ${opts.count} payments`);
    const p = await bench.publishWithLoadCommand(srcPrefix, opts.count);
    const records = await bench.readAll(src, opts.count);
    if (opts.variants.includes('P')) publishers.push({ variant: 'P', label: "P. producer-app's load command (EventPublisher)", records: opts.count, recordsPerSecond: opts.count / p.seconds, totalSeconds: p.seconds, startupSeconds: p.startupSeconds });
    if (opts.variants.includes('P0')) {
      const p0Topic = `${bench.tag}.p0.payments.requested`;
      await bench.createTopics([p0Topic], opts.partitions);
      const p0 = await bench.copyRecords(records, p0Topic);
      publishers.push({ variant: 'P0', label: 'P0. plain KafkaJS idempotent producer, batches of 500', records: opts.count, recordsPerSecond: opts.count / p0.seconds, totalSeconds: p0.seconds });
    }
    if (opts.variants.includes('O')) {
      log(`O: the outbox relay, ${opts.count} events preloaded with Outbox.add, then commit-to-visible latency at 1000 events/s`);
      publishers.push(await bench.runOutbox(opts.count));
    }
    for (const pub of publishers) log(`${pub.variant}: ${Math.round(pub.recordsPerSecond)} records/s`);
    const live = publishers.find((x) => x.variant === 'P');
    if (live && opts.spoolCatchUp) {
      if (brokerPid() === undefined) log('P: spool catch-up skipped: the broker was not started by scripts/kafka, so the bench does not stop it');
      else {
        const rate = Math.max(1, Math.round(live.recordsPerSecond * 0.8));
        log(`P: spool catch-up: the load command at ${rate} publishes/s (80% of P), the broker killed for 5 s after 5 s`);
        live.spoolCatchUp = await bench.spoolCatchUp(rate);
        log(`P: ${report.spoolCatchUpLine(live.spoolCatchUp)}`);
      }
    }

    for (const key of opts.variants.filter((v) => VARIANTS[v])) {
      const input = VARIANTS[key].json ? asJson(records) : VARIANTS[key].slow ? records.slice(0, opts.slowCount) : records;
      log(`${key}: ${VARIANTS[key].label}, ${input.length} records`);
      const result = await bench.runConsumer(key, input);
      results.push(result);
      log(`${key}: ${Math.round(result.recordsPerSecond)} records/s, start-up ${result.startupSeconds.toFixed(1)} s, CPU ${result.cpuSeconds.toFixed(1)} s, peak RSS ${result.peakRssMb.toFixed(0)} MB`);
      if (result.handlerCalls) log(report.handlerCallsLines([result])[0]);
      // F measures what failures cost in calls and throughput; its latency would be E's plus its retries' delays.
      if (opts.latency && !VARIANTS[key].countsCalls && !VARIANTS[key].noLatency) {
        // Half the peak this run measured (a backlog), unless --latency-rate says otherwise. A variant on the other
        // driver (AX, DX, DX4, EX) at the rates of its KafkaJS twin when that ran first: both drivers at the same load.
        const twin = results.find((r) => r.variant === VARIANTS[key].ratesOf);
        const peak = twin ? twin.recordsPerSecond : result.recordsPerSecond;
        if (twin) log(`${key}: latency at the rates of ${twin.variant}'s peak (${Math.round(peak)} records/s), for the drivers side by side`);
        const rate = opts.latencyRate ?? Math.max(1, Math.round(peak / 2));
        log(`${key}: latency at ${rate} records/s for ${opts.latencySeconds} s (after ${LATENCY_WARMUP_MS / 1000} s of warm-up)`);
        result.latency = await bench.runLatency(key, input, rate);
        result.latency.halfPeak = opts.latencyRate === undefined;
        log(`${key}: ${report.latencyLine(result)}`);
        // consumer-app's target holds at a quarter of its peak too (a lighter load has smaller units, not none).
        if (VARIANTS[key].consumerApp && opts.latencyRate === undefined) {
          const quarter = Math.max(1, Math.round(peak / 4));
          log(`${key}: latency at ${quarter} records/s (a quarter of its peak) for ${opts.latencySeconds} s`);
          result.latencyQuarter = await bench.runLatency(key, input, quarter, '-lat4');
          log(`${key}: ${report.latencyLine({ ...result, latency: result.latencyQuarter })} (a quarter of its peak)`);
        }
      }
    }
    if (opts.sweep) {
      for (const key of ['D', 'E']) {
        for (const partitions of [1, 6, 12]) {
          for (const processes of [1, 2, 3]) {
            if (processes > partitions) continue;
            const result = await bench.runConsumer(key, records, { partitions, processes, suffix: `-${partitions}p${processes}x` });
            results.push(result);
            log(`${result.variant}: ${Math.round(result.recordsPerSecond)} records/s`);
          }
        }
      }
    }
  } finally {
    await bench.admin.disconnect().catch(() => undefined);
    await bench.dropDatabases();
  }
  const run = {
    id: bench.id,
    date: new Date().toISOString(),
    count: opts.count,
    partitions: opts.partitions,
    node: process.version,
    kafka: process.env.KAFKA_VERSION || '4.4.0',
    postgres: (await adminQuery('SHOW server_version'))[0].server_version,
    cpus: require('os').cpus().length,
    cpuModel: require('os').cpus()[0]?.model,
  };
  const ratios = report.ratios(results, publishers);
  const latencyTargets = [...report.latencyTargets(results), ...report.quarterLatencyTargets(results), ...report.outboxLatencyTargets(publishers), ...report.spoolCatchUpTargets(publishers)];
  writeFileSync(join(bench.dir, 'results.json'), JSON.stringify({ run, publishers, results, ratios, latencyTargets }, null, 2));
  writeFileSync(join(bench.dir, 'summary.md'), report.markdown(run, publishers, results, ratios, latencyTargets));
  writeFileSync(join(bench.dir, 'throughput.svg'), report.chart(`throughput, ${opts.count} payments, ${opts.partitions} partitions`, [...publishers, ...results]));
  if (results.some((r) => r.latency)) writeFileSync(join(bench.dir, 'latency.svg'), report.latencyChart(`end-to-end latency (read committed), ${opts.partitions} partitions`, results));
  const latencyText = results.some((r) => r.latency) ? `\n\n${report.latencyTable(results)}` : '';
  const lines = [...report.ratioLines(ratios), ...report.handlerCallsLines(results), ...report.formatLines(results), ...report.dataLayerLines(results), ...report.latencyTargetLines(latencyTargets)];
  process.stdout.write(`\n${report.table(publishers, results)}${latencyText}\n\n${lines.map((l) => `${l}\n`).join('')}${lines.length ? '\n' : ''}bench/results/${bench.id}/summary.md\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${err.stack || err}\n`);
    process.exit(1);
  },
);
