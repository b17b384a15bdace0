#!/usr/bin/env node
'use strict';
/**
 * `npm run bench`: the same preloaded payments through each variant, side by side, in one run on this machine.
 *
 *   npm run bench -- [--count 100000] [--partitions 6] [--variants P,P0,O,A,AT,B,C,D,DT,DP,DD,DK,E,J] [--slow-count 1000]
 *                    [--rounds 3] [--sweep] [--accounts 200] [--load-concurrency 64] [--cpu-prof]
 *                    [--latency | --no-latency] [--latency-seconds 20] [--latency-rate N] [--latency-rounds N] [--tail-steps]
 *                    [--memory-backlog 1000000 | --no-memory-backlog]
 *
 * Rounds (--rounds N: 3 from 20,000 records, else 1): the variants compared by the targets (P0, O, A, AT, D, E, J,
 * and AX, DX, DX4, EX when named) run once in each round, alternating, the order turned by one from round to round
 * (no variant always first or last); the others (B, C, DJ, DT, DP, DD, DK, F, G, K1, K) once, in the first round.
 * Every figure is reported as the median of a variant's runs with its spread (min–max, and ± half the range as a
 * % of the median); results.json keeps each run's figures (`rounds`). A ratio target is the ratio of the two
 * medians (its spread: the ratio per round); a CPU target the median of the ratio per round.
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
 * override), after every throughput round: each consumer variant again (one process) on a fresh input topic, group,
 * output topic and database, idle until its group is ready, at fixed rates: a quarter, a half and three quarters of
 * D's peak (its median records/s over the rounds), the same rates for every variant so that latency against rate
 * compares across them (--latency-rate N: N records/s only); B and C once, at half their own peak. --latency-rounds
 * N (default: --rounds) repeats every rate, the order of the variants turned each time. A reader of the output
 * (bench/latency-reader.js, read_committed, a process of its own) joins first; then a publisher
 * (bench/latency-publisher.js, a process of its own, a plain KafkaJS idempotent producer) publishes the input
 * records at the rate (every 10 ms the records due, each stamped with its publish time as CreateTime) for 2 s of
 * warm-up (not counted) and then --latency-seconds. When more records are needed than the input has, they come
 * round again with a fresh message-id and paymentId. The publisher writes each record's match key, publish time,
 * partition and offset; the reader each output's match key, receive time and CreateTime: the raw samples, in
 * bench/results/<run>/latency/ (gzipped). The bench merges them after the phase (bench/latency.js): each output
 * matched to its input (A: the copied message-id header; D, E: causation-id; B, C, J, whose outputs carry no link:
 * the paymentId in the value); its latency is its receive time minus the input's publish time, also split at the
 * output's own CreateTime (when the variant sent it, before its commit). Reported per variant and rate: the rate
 * achieved, outputs matched of published, p50, p99 and max; the targets (p99 of D ≤ 250 ms and of E ≤ 100 ms, at a
 * quarter and at half of D's peak) are reported as met or missed, never asserted.
 *
 * --tail-steps: D and E (and their driver twins) write the library's step log in their latency phases (consumer-app:
 * STEP_LOG, the bench's E: BENCH_STEP_LOG, both the module's operations.stepLog); each of the slowest 1% of records
 * (by published → received) is found in its unit of work (input partition, offset within first..last), and the
 * median and p90 of each step (published → fetched → started → claimed → handled → recorded → produced →
 * pgCommitted → committed → received) printed beside those of all records.
 *
 * Memory (--memory-backlog N: 1,000,000 from 20,000 records, else off; --no-memory-backlog): consumer-app over a
 * backlog of N records at 12 partitions, its peak RSS (bench/backlog-memory.js, when there). Target: < 300 MB.
 *
 * Spool catch-up (with P, on by default from 20,000 records; --spool-catch-up / --no-spool-catch-up), last of all:
 * producer-app's load command again at 80% of P's measured rate for 25 s, and the local broker (started by scripts/kafka, killed
 * and started by its pid file) away for 5 s after 5 s. Reported: publishes spooled, how soon after Kafka's
 * return every publish went out live again (target: within 30 s) and the spool was empty, and whether every
 * acknowledged event is on the topic once at least, in per-key order of acknowledgement (read committed).
 *
 * --sweep repeats D and E over 1, 6 and 12 partitions and 1, 2 and 3 processes. --cpu-prof writes a V8 CPU
 * profile of every consumer process (bench/results/<run>/profiles; summarise one with bench/profile-summary.js).
 * Results: a table on stdout and every target in one block at its end (target, median, spread, met or missed), and
 * bench/results/<run>/{results.json,summary.md,throughput.svg,latency.svg,latency-rate.svg,latency/}.
 */
const { spawn, spawnSync } = require('child_process');
const { mkdirSync, readFileSync, writeFileSync, existsSync, unlinkSync } = require('fs');
const { join, relative } = require('path');
const { gzipSync } = require('zlib');
const { logLevel } = require('kafkajs');
const { Client } = require('pg');
const latency = require('./latency');
const report = require('./report');

const ROOT = join(__dirname, '..');

// This script's own Kafka client (P0's producer, the readers, the admin): one the library builds
// (src/kafkajs/client.ts: its request queue, its read-committed filter), KafkaJS's own before the library is built.
const kafkaClient = latency.kafkaClient;
const DATABASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const LOAD_CLI = join(ROOT, 'dist/apps/producer-app/apps/producer-app/src/cli.js');
const CONSUMER_MAIN = join(ROOT, 'dist/apps/consumer-app/apps/consumer-app/src/main.js');
/** The first records of a latency phase are published but not counted: the variant's first units of work start
 * its per-partition producers (the library's InitProducerId runs on a partition's first batch) and warm the JIT. */
const LATENCY_WARMUP_MS = 2000;
/** The latency phase's rates, as fractions of D's peak (its median records/s over the throughput rounds). */
const LATENCY_FRACTIONS = [0.25, 0.5, 0.75];
/** The variants that run in every round (the others once, in the first round). */
const ROUND_VARIANTS = ['P0', 'O', 'A', 'AT', 'D', 'E', 'J', 'AX', 'DX', 'DX4', 'EX'];
/** The backlog of the memory phase's target: consumer-app over 1,000,000 records at 12 partitions. */
const MEMORY_PARTITIONS = 12;
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

// match: how the latency phase finds an output's input (bench/latency.js); transactional: outputs in Kafka
// transactions (the latency phase then counts the markers of its output); stepLog: the library's step log of
// each committed unit (operations.stepLog) can be asked of it (--tail-steps).
const VARIANTS = {
  A: { label: 'A. plain KafkaJS copy, at-least-once, no database', script: 'variants/plain-copy.js', database: false, match: 'message-id' },
  AT: { label: "AT. KafkaJS copy in Kafka transactions (a producer per partition, sendOffsets), no database", script: 'variants/transactional-copy.js', database: false, match: 'message-id', transactional: true },
  C: { label: 'C. exactly-once by hand, one Kafka + one PostgreSQL transaction per record', script: 'variants/hand-eos.js', database: true, slow: true, match: 'json-payment', transactional: true },
  D: { label: 'D. consumer-app as shipped (batch handler: the ledger rule in set-based SQL)', consumerApp: true, database: true, match: 'causation-id', transactional: true, stepLog: true },
  // DJ: D with JSON in and out; its input is D's records, each value rewritten as the JSON of its Avro record.
  DX: { label: "DX. D on the platformatic driver (KAFKA_CLIENT=platformatic, the classic group protocol)", consumerApp: true, database: true, match: 'causation-id', transactional: true, stepLog: true, env: { KAFKA_CLIENT: 'platformatic' }, ratesOf: 'D' },
  DX4: { label: "DX4. D on the platformatic driver and Kafka 4's consumer groups (KAFKA_GROUP_PROTOCOL=consumer)", consumerApp: true, database: true, match: 'causation-id', transactional: true, stepLog: true, env: { KAFKA_CLIENT: 'platformatic', KAFKA_GROUP_PROTOCOL: 'consumer' }, ratesOf: 'D' },
  DJ: { label: "DJ. consumer-app reading and writing JSON (EVENT_FORMAT=json), D's records as JSON", consumerApp: true, database: true, match: 'causation-id', transactional: true, env: { EVENT_FORMAT: 'json' }, json: true, noLatency: true },
  // DT, DP, DD, DK: D's handler (consumer-app's PaymentsLedger, the same statements) on each data layer, in a
  // process of their own (bench/variants/data-layer-ledger.js); DT is TypeORM, the control for the other three.
  DT: { label: "DT. D's payments handler on TypeORM (ctx.manager), bench/variants/data-layer-ledger.js", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'typeorm' }, dlq: true, noLatency: true },
  DP: { label: "DP. D's payments handler on Prisma 7 (prismaDatabase, ctx.db.$queryRawUnsafe)", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'prisma' }, dlq: true, noLatency: true, prepare: () => require('./variants/prisma/client').generate() },
  DD: { label: "DD. D's payments handler on Drizzle (drizzleDatabase, ctx.db.execute)", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'drizzle' }, dlq: true, noLatency: true },
  DK: { label: "DK. D's payments handler on Kysely (kyselyDatabase, ctx.db.executeQuery)", script: 'variants/data-layer-ledger.js', database: true, match: 'causation-id', transactional: true, env: { BENCH_DATA_LAYER: 'kysely' }, dlq: true, noLatency: true },
  E: { label: 'E. the library, trivial handler (ctx.emit of the input)', script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true, stepLog: true },
  // The platformatic driver (docs/drivers.md; Node.js 22.22+ or 24.6+), not in the default set: --variants D,DX,DX4,E,EX.
  AX: { label: 'AX. A on @platformatic/kafka (its own consumer group and producer), at-least-once, no database', script: 'variants/plain-copy-platformatic.mjs', database: false, match: 'message-id', ratesOf: 'A' },
  EX: { label: "EX. E on the platformatic driver (@platformatic/kafka's consumer group)", script: 'variants/library-copy.js', database: true, match: 'causation-id', transactional: true, stepLog: true, env: { KAFKA_CLIENT: 'platformatic' }, ratesOf: 'E' },
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
  if (argv.includes('--memory-backlog') && argv.includes('--no-memory-backlog')) throw new Error('--memory-backlog and --no-memory-backlog: choose one');
  // Several rounds and the memory phase from 20,000 records (not in the CI smoke run).
  const full = count >= 20000;
  const rounds = int('rounds', full ? 3 : 1);
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
    rounds,
    latencyRounds: int('latency-rounds', rounds),
    tailSteps: argv.includes('--tail-steps'),
    // consumer-app over a backlog of this many records at 12 partitions (bench/backlog-memory.js); 0: no memory phase.
    memoryBacklog: argv.includes('--no-memory-backlog') ? 0 : argv.includes('--memory-backlog') ? int('memory-backlog', 1000000) : full ? 1000000 : 0,
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
  async runOutbox(count, nth = 1) {
    const prefix = `${this.tag}.o${nth > 1 ? `-${nth}` : ''}.`;
    await this.createTopics([`${prefix}payments.requested`], this.opts.partitions);
    const databaseUrl = await this.createDatabase(`${this.tag.replace(/[^a-z0-9]/g, '_')}_o${nth > 1 ? `_${nth}` : ''}`.slice(0, 63));
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
   * A helper process of the latency phase (bench/latency-publisher.js, bench/latency-reader.js) with its JSON
   * config; its stdout lines to `onLine`, all its output to logs/<name>.log when it ends.
   */
  spawnHelper(script, config, name, onLine) {
    const child = spawn(process.execPath, [join(__dirname, script), JSON.stringify(config)], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let pending = '';
    child.stdout.on('data', (d) => {
      output = (output + d).slice(-200000);
      pending += d;
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) onLine?.(line);
    });
    child.stderr.on('data', (d) => (output = (output + d).slice(-200000)));
    child.closed = new Promise((resolve) =>
      child.on('close', (code) => {
        writeFileSync(join(this.dir, 'logs', `${name}.log`), output);
        resolve(code);
      }),
    );
    child.tail = () => output.slice(-2000);
    return child;
  }

  /**
   * The latency phase of a variant at one rate: one process of it on a fresh input topic, group, output topic and
   * database (the same set-up as its throughput run). A reader of its output (a process of its own, read_committed)
   * joins first; once the variant's group is ready, a publisher (a process of its own) publishes the first
   * `records.length` input records (of the run's input, in the file `latencyInput`; and again) at `rate` records/s for a warm-up and then --latency-seconds; then
   * the wait until every output is seen. Each writes its file in latency/ (the raw samples, gzipped after the
   * merge); with --tail-steps, the variant writes the library's step log beside them.
   */
  async runLatency(key, records, rate, suffix) {
    const { latencySeconds: seconds } = this.opts;
    const setup = await this.prepareVariant(key, { suffix });
    const { variant, name, input, output, group, database } = setup;
    const dir = join(this.dir, 'latency');
    const files = { published: join(dir, `${name}.published.tsv`), received: join(dir, `${name}.received.tsv`), steps: join(dir, `${name}.steps.ndjson`) };
    const stepLog = this.opts.tailSteps && variant.stepLog;
    // consumer-app reads STEP_LOG, the bench's library variants BENCH_STEP_LOG (both: the module's operations.stepLog).
    if (stepLog) Object.assign(setup.env, { STEP_LOG: files.steps, BENCH_STEP_LOG: files.steps });
    const seen = { distinct: 0, lastAt: 0 };
    let done;
    const reader = this.spawnHelper('latency-reader.js', { brokers: this.opts.brokers, topic: output, groupId: `${setup.prefix}reader`, match: variant.match, out: files.received }, `${name}-reader`, (line) => {
      if (line.startsWith('SEEN ')) [seen.distinct, , seen.lastAt] = line.slice(5).split(' ').map(Number);
      else if (line.startsWith('DONE ')) done = JSON.parse(line.slice(5));
      else if (line === 'READY') seen.ready = true;
    });
    let children = [];
    let publisher;
    try {
      const joinBy = Date.now() + 65000;
      while (!seen.ready) {
        if (reader.exitCode !== null) throw new Error(`${name}: the latency reader exited with ${reader.exitCode}: ${reader.tail()}`);
        if (Date.now() > joinBy) throw new Error(`${name}: the latency reader did not join in 65 s`);
        await sleep(50);
      }
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
      const check = () => {
        this.assertRunning(name, children);
        if (reader.exitCode !== null) throw new Error(`${name}: the latency reader exited with ${reader.exitCode}: ${reader.tail()}`);
      };
      let published;
      publisher = this.spawnHelper('latency-publisher.js', { brokers: this.opts.brokers, topic: input, input: this.latencyInput, records: records.length, match: variant.match, rate, seconds, warmupMs: LATENCY_WARMUP_MS, out: files.published }, `${name}-publisher`, (line) => {
        if (line.startsWith('RESULT ')) published = JSON.parse(line.slice(7));
      });
      while (publisher.exitCode === null) {
        check();
        await sleep(100);
      }
      await publisher.closed;
      if (!published) throw new Error(`${name}: the latency publisher exited with ${publisher.exitCode}: ${publisher.tail()}`);
      // Every output seen, or none for 10 s, or the cap.
      const cap = published.end + Math.max(60000, seconds * 3000);
      while (seen.distinct < published.published && latency.clock() < cap && latency.clock() - Math.max(seen.lastAt, published.end) < 10000) {
        check();
        await sleep(100);
      }
      const drainSeconds = (latency.clock() - published.end) / 1000;
      const cpuSeconds = sum(children.map((c, i) => (processStats(c.pid)?.cpu ?? cpuBefore[i]) - cpuBefore[i]));
      const xactAfter = await this.xactCommit(database);
      const offsets = await this.admin.fetchTopicOffsets(output);
      const span = offsets.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
      reader.kill('SIGTERM');
      await Promise.race([reader.closed, sleep(15000)]);
      await this.stopVariant(children); // the step log is complete once the variant has stopped
      children = [];
      const merged = latency.merge(files.published, files.received, { measureFrom: published.measureFrom, measuredSeconds: published.measuredSeconds });
      const steps = stepLog ? latency.tailSteps(files.steps, merged.samples, input) : undefined;
      for (const file of Object.values(files)) gzipFile(file);
      return {
        phase: {
          rate,
          seconds,
          warmupSeconds: LATENCY_WARMUP_MS / 1000,
          startupSeconds: (ready - spawned.started) / 1000,
          drainSeconds,
          ...merged.summary,
          // Over the whole publishing and drain, warm-up included.
          cpuSeconds,
          benchCpuSeconds: published.cpuSeconds + (done?.cpuSeconds ?? 0),
          wallSeconds: (latency.clock() - published.start) / 1000,
          pgTransactions: database ? xactAfter - xactBefore : undefined,
          // Offsets minus records on the output: one marker per transaction per output partition (once all is read).
          kafkaMarkers: variant.transactional && merged.summary.missing === 0 && done ? span - done.outputs : undefined,
          // The raw samples, relative to the run's directory.
          files: Object.fromEntries(Object.entries(files).filter(([, f]) => existsSync(`${f}.gz`)).map(([k, f]) => [k, `${relative(this.dir, f)}.gz`])),
        },
        steps,
      };
    } finally {
      await this.stopVariant(children);
      if (publisher && publisher.exitCode === null) publisher.kill('SIGKILL');
      if (reader.exitCode === null) {
        reader.kill('SIGTERM');
        await Promise.race([reader.closed, sleep(15000)]);
        if (reader.exitCode === null) reader.kill('SIGKILL');
      }
    }
  }
}

/** A raw sample file gzipped in place (file.gz), for the plots; nothing when the file was not written. */
function gzipFile(file) {
  if (!existsSync(file)) return;
  writeFileSync(`${file}.gz`, gzipSync(readFileSync(file)));
  unlinkSync(file);
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

/** The list turned by `n` places: each round of the alternation starts one variant further on. */
function rotate(list, n) {
  if (list.length === 0) return list;
  const k = n % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

/**
 * The latency phases, after every throughput round: each latency variant at the same fixed rates (a quarter, a
 * half and three quarters of D's median records/s; --latency-rate N: N only), --latency-rounds times, the order of
 * the variants turned from rate to rate and round to round; B and C once, at half their own peak. Each variant's
 * points (one per rate, the figures the medians over the rounds) go to its entry's `latencyRates`, the one at half
 * D's peak to `latency` as well.
 */
async function latencyPhases(bench, opts, results, inputOf) {
  const peakOf = (k) => results.find((r) => r.variant === k)?.recordsPerSecond;
  const keys = [...new Set(opts.variants)].filter((k) => VARIANTS[k] && !VARIANTS[k].countsCalls && !VARIANTS[k].noLatency && peakOf(k) !== undefined);
  const fixed = keys.filter((k) => !VARIANTS[k].slow);
  const slow = keys.filter((k) => VARIANTS[k].slow);
  const d = peakOf('D');
  // Without D: the rates of a driver twin's peak (AX, DX, DX4, EX), else of the variant's own.
  const baseOf = (k) => (d !== undefined ? { of: 'D', peak: d } : peakOf(VARIANTS[k].ratesOf) !== undefined ? { of: VARIANTS[k].ratesOf, peak: peakOf(VARIANTS[k].ratesOf) } : { of: 'own', peak: peakOf(k) });
  const pointsOf = (k) =>
    opts.latencyRate !== undefined
      ? [{ rate: opts.latencyRate, tag: `r${opts.latencyRate}` }]
      : LATENCY_FRACTIONS.map((fraction) => ({ fraction, of: baseOf(k).of, rate: Math.max(1, Math.round(baseOf(k).peak * fraction)), tag: String(Math.round(fraction * 100)) }));
  if (opts.latencyRate !== undefined) log(`latency: every variant at ${opts.latencyRate} records/s (--latency-rate)`);
  else if (d !== undefined) log(`latency: at ${pointsOf('D').map((p) => p.rate).join(', ')} records/s, a quarter, a half and three quarters of D's peak (${Math.round(d)} records/s, its median), for ${fixed.join(', ')}${slow.length ? `; ${slow.join(', ')} at half their own peak` : ''}`);
  else log(`latency: D did not run: each variant at a quarter, a half and three quarters of its driver twin's peak or its own`);
  const slots = new Map();
  const run = async (key, point, i, round) => {
    const id = `${key} ${i}`;
    if (!slots.has(id)) slots.set(id, { key, point, phases: [], steps: [] });
    const slot = slots.get(id);
    log(`${key}: latency at ${point.rate} records/s for ${opts.latencySeconds} s (after ${LATENCY_WARMUP_MS / 1000} s of warm-up)${opts.latencyRounds > 1 ? `, round ${round}` : ''}`);
    const { phase, steps } = await bench.runLatency(key, inputOf(key), point.rate, `-lat${point.tag}-r${round}`);
    slot.phases.push({ ...phase, round });
    if (opts.tailSteps && VARIANTS[key].stepLog) slot.steps.push(steps ?? null);
    log(`${key}: ${report.latencyLine(phase)}`);
    if (opts.tailSteps && VARIANTS[key].stepLog && !steps) log(`${key}: no step log written (library without operations.stepLog?)`);
  };
  for (let round = 1; round <= opts.latencyRounds; round++) {
    const points = opts.latencyRate !== undefined ? 1 : LATENCY_FRACTIONS.length;
    for (let i = 0; i < points; i++) for (const key of rotate(fixed, round - 1 + i)) await run(key, pointsOf(key)[i], i, round);
    if (round === 1) for (const key of slow) await run(key, opts.latencyRate !== undefined ? pointsOf(key)[0] : { fraction: 0.5, of: 'own', rate: Math.max(1, Math.round(peakOf(key) / 2)), tag: '50' }, 0, 1);
  }
  // The publishers' copy of the input is not a sample.
  unlinkSync(bench.latencyInput);
  for (const key of keys) {
    const entry = results.find((r) => r.variant === key);
    const mine = [...slots.values()].filter((s) => s.key === key);
    entry.latencyRates = mine.map((s) => ({ ...report.aggregateLatency(s.phases), fraction: s.point.fraction, of: s.point.of, tailSteps: tailStepsOf(s.steps) }));
    entry.latency = entry.latencyRates.find((p) => p.fraction === 0.5) ?? entry.latencyRates[0];
  }
}

/**
 * The step breakdown of one variant at one rate over its rounds: the slowest 1% of each round's records pooled,
 * and its sample of all; `slowest` undefined when no round wrote a step log; undefined without --tail-steps.
 */
function tailStepsOf(list) {
  if (list.length === 0) return undefined;
  const logged = list.filter(Boolean);
  if (logged.length === 0) return { phases: list.length, logged: 0 };
  const slowest = logged.flatMap((s) => s.slowest.steps);
  const all = logged.flatMap((s) => s.all.steps);
  return {
    phases: list.length,
    logged: logged.length,
    units: sum(logged.map((s) => s.units)),
    slowest: { records: sum(logged.map((s) => s.slowest.records)), found: slowest.length, steps: latency.stepStats(slowest) },
    all: { records: sum(logged.map((s) => s.all.records)), sampled: sum(logged.map((s) => s.all.sampled)), found: all.length, steps: latency.stepStats(all) },
  };
}

/** consumer-app over a backlog (bench/backlog-memory.js, when there): its peak RSS, for the target. */
async function memoryPhase(bench, opts) {
  const file = join(__dirname, 'backlog-memory.js');
  if (!existsSync(file)) {
    log('memory: no memory phase: bench/backlog-memory.js is not there');
    return undefined;
  }
  log(`memory: consumer-app over a backlog of ${opts.memoryBacklog} records at ${MEMORY_PARTITIONS} partitions`);
  let memory;
  try {
    // It makes (and drops) its own topics and database, with this server's URL.
    memory = await require(file).measureBacklogMemory({ brokers: opts.brokers, databaseUrl: DATABASE_URL, records: opts.memoryBacklog, partitions: MEMORY_PARTITIONS, log: (line) => log(`memory: ${line}`), dir: join(bench.dir, 'memory') });
  } catch (err) {
    // The other figures of the run are kept: the phase's failure is its result.
    memory = { records: opts.memoryBacklog, partitions: MEMORY_PARTITIONS, error: String(err?.message ?? err) };
  }
  log(report.memoryLine(memory));
  return memory;
}

async function main() {
  const opts = args(process.argv.slice(2));
  if (!existsSync(LOAD_CLI) || !existsSync(CONSUMER_MAIN)) throw new Error('build first: npm run build');
  const bench = new Bench(opts);
  await bench.admin.connect();
  /** Each variant's runs, by key, in the order they first ran: one per round for ROUND_VARIANTS, one for the others. */
  const runs = new Map();
  const add = (key, result) => {
    if (!runs.has(key)) runs.set(key, []);
    runs.get(key).push(result);
  };
  const sweep = [];
  const publishers = [];
  let results = [];
  let memory;
  try {
    log(`run ${bench.id}: ${opts.count} payments, ${opts.partitions} partitions, variants ${opts.variants.join(',')}${opts.rounds > 1 ? `, ${opts.rounds} rounds` : ''}${opts.sweep ? ', sweep' : ''}; results in bench/results/${bench.id}/`);
    // The input: P publishes it (timed when P is a variant), then it is read once into memory.
    const srcPrefix = `${bench.tag}.src.`;
    const src = `${srcPrefix}payments.requested`;
    await bench.createTopics([src], opts.partitions);
    log(`P: producer-app's load command publishes ${opts.count} payments`);
    const p = await bench.publishWithLoadCommand(srcPrefix, opts.count);
    const records = await bench.readAll(src, opts.count);
    if (opts.variants.includes('P')) {
      add('P', { variant: 'P', round: 1, label: "P. producer-app's load command (EventPublisher)", records: opts.count, recordsPerSecond: opts.count / p.seconds, totalSeconds: p.seconds, startupSeconds: p.startupSeconds });
      log(`P: ${Math.round(opts.count / p.seconds)} records/s`);
    }
    const inputOf = (key) => (VARIANTS[key].json ? asJson(records) : VARIANTS[key].slow ? records.slice(0, opts.slowCount) : records);

    // The rounds: the first runs every variant named, in the order named; the others those of ROUND_VARIANTS, turned.
    const roundKeys = opts.variants.filter((v) => ROUND_VARIANTS.includes(v));
    let p0Runs = 0;
    let oRuns = 0;
    for (let round = 1; round <= opts.rounds; round++) {
      const order = round === 1 ? opts.variants.filter((v) => v !== 'P') : rotate(roundKeys, round - 1);
      if (opts.rounds > 1) log(`round ${round} of ${opts.rounds}: ${order.join(', ')}`);
      for (const key of order) {
        if (key === 'P0') {
          p0Runs++;
          const topic = `${bench.tag}.p0${p0Runs > 1 ? `-${p0Runs}` : ''}.payments.requested`;
          await bench.createTopics([topic], opts.partitions);
          const p0 = await bench.copyRecords(records, topic);
          add('P0', { variant: 'P0', round, label: 'P0. plain KafkaJS idempotent producer, batches of 500', records: opts.count, recordsPerSecond: opts.count / p0.seconds, totalSeconds: p0.seconds });
          log(`P0: ${Math.round(opts.count / p0.seconds)} records/s`);
        } else if (key === 'O') {
          log(`O: the outbox relay, ${opts.count} events preloaded with Outbox.add, then commit-to-visible latency at 1000 events/s`);
          add('O', { ...(await bench.runOutbox(opts.count, ++oRuns)), round });
        } else {
          const input = inputOf(key);
          log(`${key}: ${VARIANTS[key].label}, ${input.length} records`);
          const result = { ...(await bench.runConsumer(key, input)), round };
          add(key, result);
          log(`${key}: ${Math.round(result.recordsPerSecond)} records/s, start-up ${result.startupSeconds.toFixed(1)} s, CPU ${result.cpuSeconds.toFixed(1)} s, peak RSS ${result.peakRssMb.toFixed(0)} MB`);
          if (result.handlerCalls) log(report.handlerCallsLines([result])[0]);
        }
      }
    }
    if (opts.sweep) {
      for (const key of ['D', 'E']) {
        for (const partitions of [1, 6, 12]) {
          for (const processes of [1, 2, 3]) {
            if (processes > partitions) continue;
            const result = await bench.runConsumer(key, records, { partitions, processes, suffix: `-${partitions}p${processes}x` });
            sweep.push(result);
            log(`${result.variant}: ${Math.round(result.recordsPerSecond)} records/s`);
          }
        }
      }
    }
    // Each variant's figures: the medians over its runs, with their spread.
    for (const key of ['P', 'P0', 'O']) if (runs.has(key)) publishers.push(report.aggregate(runs.get(key)));
    results = [...[...runs.keys()].filter((k) => VARIANTS[k]).map((k) => report.aggregate(runs.get(k))), ...sweep.map((r) => report.aggregate([r]))];

    if (opts.latency) {
      mkdirSync(join(bench.dir, 'latency'), { recursive: true });
      // The whole input, for the publishers' processes (a variant of `--slow-count` records publishes the first ones).
      bench.latencyInput = join(bench.dir, 'latency', 'input.ndjson');
      latency.writeInput(bench.latencyInput, records);
      await latencyPhases(bench, opts, results, inputOf);
    }
    if (opts.memoryBacklog > 0) memory = await memoryPhase(bench, opts);
    // Last: it stops the broker for a few seconds, and nothing measured comes after it.
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
  } finally {
    await bench.admin.disconnect().catch(() => undefined);
    await bench.dropDatabases();
  }
  const run = {
    id: bench.id,
    date: new Date().toISOString(),
    count: opts.count,
    partitions: opts.partitions,
    rounds: opts.rounds,
    latencyRounds: opts.latency ? opts.latencyRounds : undefined,
    node: process.version,
    kafka: process.env.KAFKA_VERSION || '4.4.0',
    postgres: (await adminQuery('SHOW server_version'))[0].server_version,
    cpus: require('os').cpus().length,
    cpuModel: require('os').cpus()[0]?.model,
  };
  const ratios = report.ratios(results, publishers);
  const targets = report.targets(results, publishers, ratios, memory);
  writeFileSync(join(bench.dir, 'results.json'), JSON.stringify({ run, publishers, results, ratios, targets, memory }, null, 2));
  writeFileSync(join(bench.dir, 'summary.md'), report.markdown(run, publishers, results, { ratios, targets, memory }));
  writeFileSync(join(bench.dir, 'throughput.svg'), report.chart(`throughput, ${opts.count} payments, ${opts.partitions} partitions${opts.rounds > 1 ? `, medians of ${opts.rounds} rounds` : ''}`, [...publishers, ...results]));
  const withLatency = results.some((r) => r.latency);
  if (withLatency) {
    writeFileSync(join(bench.dir, 'latency.svg'), report.latencyChart(`end-to-end latency (read committed) at half D's peak, ${opts.partitions} partitions`, results));
    writeFileSync(join(bench.dir, 'latency-rate.svg'), report.latencyRateChart(`latency against rate (read committed), ${opts.partitions} partitions`, results));
  }
  const lines = [...report.ratioLines(ratios), ...report.handlerCallsLines(results), ...report.formatLines(results), ...report.dataLayerLines(results), ...(memory ? [report.memoryLine(memory)] : []), ...report.tailStepLines(results)];
  const targetBlock = targets.length ? `targets (each the median over the runs; spread: min–max, ± % of the median):\n${report.targetLines(targets).map((l) => `  ${l}\n`).join('')}\n` : '';
  process.stdout.write(`\n${report.table(publishers, results)}${withLatency ? `\n\n${report.latencyTable(results)}` : ''}\n\n${lines.map((l) => `${l}\n`).join('')}${lines.length ? '\n' : ''}${targetBlock}bench/results/${bench.id}/summary.md\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bench failed: ${err.stack || err}\n`);
    process.exit(1);
  },
);
