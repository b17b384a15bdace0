#!/usr/bin/env node
'use strict';
/**
 * `npm run verify`: the whole pipeline under faults, checked by an independent checker.
 *
 * Each scenario runs producer-app's load command and consumer-app processes of one consumer group as real
 * processes against the local Kafka and PostgreSQL (fresh topics, database and group per scenario), injects
 * its faults while the load flows, waits until the group has caught up, then reads what happened without the
 * library under test: the input topic, the database, the dead-letter topic and the output topic (read
 * committed, by KafkaJS and by the Java client), and checks it (checker.js). Results: a table on the terminal,
 * JSON, Markdown and one SVG lag chart per scenario under verify-results/<run>/.
 *
 *   npm run verify -- [--profile quick|full] [--scenario NAME[,NAME]] [--skip NAME[,NAME]] [--seed N] [--data-layer LAYER] [--drivers LIST] [--list] [--keep]
 *
 * --skip leaves the named scenarios out of the run (CI leaves out those whose subject other suites of its run cover).
 * --keep leaves each scenario's database in place (to inspect a failure); topics are never deleted.
 * --data-layer runs every consumer-app with DATA_LAYER=LAYER (typeorm, the default; prisma, drizzle, kysely): its
 * handlers then write through that ORM, and the checker reads the same tables.
 * --drivers runs each scenario's consumer-apps on one Kafka driver of the list, in turn (the first scenario on the
 * driver the seed picks, the next on the next one): `kafkajs`, `platformatic` (the classic group protocol) and
 * `platformatic/consumer` (Kafka 4's consumer groups, KIP-848); docs/drivers.md. An entry SCENARIO=DRIVER runs that
 * scenario on that driver every time (CI pins leader-move to the platformatic driver: library.leader-move runs KafkaJS's
 * under moving leaders). Without --drivers, consumer-app reads
 * KAFKA_CLIENT and KAFKA_GROUP_PROTOCOL from the environment, as ever.
 *
 * Environment: KAFKA_BROKERS (127.0.0.1:9092), DATABASE_URL (postgres://postgres@127.0.0.1:5432/postgres; the
 * verifier creates and drops a database per scenario). Exits 0 only if every scenario passed.
 */
const { spawn, spawnSync } = require('child_process');
const { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } = require('fs');
const { join } = require('path');
const { randomUUID } = require('crypto');
const { Kafka, logLevel, Partitioners } = require('kafkajs');
const { Client } = require('pg');
const avro = require('./avro');
const { check, selfTest } = require('./checker');
const report = require('./report');

const ROOT = join(__dirname, '..', '..');

// This script's own Kafka client: one the library builds (src/kafkajs/client.ts), KafkaJS's own before the library
// is built. Its read-committed reads leave out records of aborted transactions, which KafkaJS's own filter lets
// through (src/kafkajs/aborted-transactions.ts), and its idle connections are not polled each millisecond (from
// Node 24 a TimeoutNegativeWarning). The Java client reads every output topic as well, and a record one reader
// returns and the other not is a finding.
const LIBRARY_KAFKAJS = join(ROOT, 'dist/libs/kafka-exactly-once/kafkajs/index.js');
const kafkaClient = (config) => (existsSync(LIBRARY_KAFKAJS) ? require(LIBRARY_KAFKAJS).createKafkaClient(config) : new Kafka(config));
const CONSUMER_MAIN = join(ROOT, 'dist/apps/consumer-app/apps/consumer-app/src/main.js');
const LOAD_CLI = join(ROOT, 'dist/apps/producer-app/apps/producer-app/src/cli.js');
const KAFKA_EO_CLI = join(ROOT, 'dist/libs/kafka-exactly-once/cli/kafka-eo.js');
const KAFKA_SCRIPT = join(ROOT, 'scripts/kafka/kafka.sh');
const DATABASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** The drivers --drivers takes, as consumer-app's environment. */
const DRIVERS = {
  kafkajs: { KAFKA_CLIENT: 'kafkajs', KAFKA_GROUP_PROTOCOL: 'classic' },
  platformatic: { KAFKA_CLIENT: 'platformatic', KAFKA_GROUP_PROTOCOL: 'classic' },
  'platformatic/consumer': { KAFKA_CLIENT: 'platformatic', KAFKA_GROUP_PROTOCOL: 'consumer' },
};

/** consumer-app's data layers (its DATA_LAYER): what its handlers write through. */
const DATA_LAYERS = ['typeorm', 'prisma', 'drizzle', 'kysely'];

const PROFILES = {
  quick: { count: 2400, accounts: 40, rate: 300, faults: 2, duplicates: 0.05 },
  full: { count: 100000, accounts: 500, rate: 1500, faults: 20, duplicates: 0.05 },
};

function args(argv) {
  const flag = (name, fallback) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
  };
  const profile = flag('profile', 'quick');
  if (!PROFILES[profile]) throw new Error(`--profile must be quick or full, got "${profile}"`);
  const seed = Number(flag('seed', String(Math.floor(Math.random() * 2 ** 31))));
  if (!Number.isInteger(seed)) throw new Error('--seed must be an integer');
  const scenarios = flag('scenario', '').split(',').filter(Boolean);
  const skip = flag('skip', '').split(',').filter(Boolean);
  const dataLayer = flag('data-layer', 'typeorm');
  if (!DATA_LAYERS.includes(dataLayer)) throw new Error(`--data-layer must be one of ${DATA_LAYERS.join(', ')}, got "${dataLayer}"`);
  // SCENARIO=DRIVER entries pin a scenario to a driver; the others take turns.
  const listed = flag('drivers', '').split(',').filter(Boolean);
  const drivers = listed.filter((d) => !d.includes('='));
  const pinned = Object.fromEntries(listed.filter((d) => d.includes('=')).map((d) => d.split('=')));
  const badDriver = [...drivers, ...Object.values(pinned)].find((d) => !DRIVERS[d]);
  if (badDriver) throw new Error(`--drivers takes ${Object.keys(DRIVERS).join(', ')} (or SCENARIO=DRIVER), got "${badDriver}"`);
  return { profile, seed, scenarios, skip, dataLayer, drivers, pinned, listedDrivers: listed, keep: argv.includes('--keep'), list: argv.includes('--list'), brokers: (process.env.KAFKA_BROKERS || '127.0.0.1:9092').split(',') };
}

/** A small seeded PRNG (mulberry32): the same seed, the same faults at the same points of the load. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A child process of the verifier: output to a log file and kept in memory for waitForLog. */
class Proc {
  constructor(name, file, argv, env, logFile) {
    this.name = name;
    this.output = '';
    this.child = spawn(process.execPath, [file, ...argv], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const log = createWriteStream(logFile, { flags: 'a' });
    const take = (chunk) => {
      log.write(chunk);
      this.output += chunk;
      if (this.output.length > 4_000_000) this.output = this.output.slice(-2_000_000);
    };
    this.child.stdout.on('data', take);
    this.child.stderr.on('data', take);
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal })));
    this.exited.then(() => log.end());
  }

  get running() {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async waitForLog(pattern, timeoutMs = 90000) {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.output)) {
      if (!this.running) throw new Error(`${this.name} exited before logging ${pattern}:\n${this.output.slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not log ${pattern} within ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  signal(signal) {
    if (this.running) this.child.kill(signal);
  }

  async kill() {
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }

  async stop(timeoutMs = 30000) {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const done = await Promise.race([this.exited, sleep(timeoutMs).then(() => null)]);
    if (!done) await this.kill();
  }
}

/** What every scenario gets: its own topics, database and group, processes, the fault log and the lag samples. */
class Stage {
  constructor(run, scenario, driver) {
    this.run = run;
    this.scenario = scenario;
    /** The Kafka driver of this scenario's consumer-apps (--drivers), or undefined: the environment's. */
    this.driver = driver;
    this.random = prng(run.seed + [...scenario.name].reduce((a, c) => a + c.charCodeAt(0), 0));
    const tag = `${run.id}-${scenario.name}`.toLowerCase().replace(/[^a-z0-9-]/g, '-');
    this.prefix = `verify.${tag}.`;
    this.group = `verify.${tag}`;
    this.accountPrefix = `acc-${scenario.name}-`;
    this.database = `verify_${tag.replace(/-/g, '_')}`.slice(0, 63);
    this.databaseUrl = withDatabase(DATABASE_URL, this.database);
    this.dir = join(run.dir, scenario.name);
    mkdirSync(join(this.dir, 'logs'), { recursive: true });
    this.spoolDir = join(this.dir, 'spool');
    this.ackLog = join(this.dir, 'acknowledged.log');
    this.brokers = scenario.brokers ?? run.brokers;
    this.kafka = kafkaClient({ clientId: 'verify', brokers: this.brokers, logLevel: logLevel.NOTHING });
    this.consumers = [];
    this.loads = [];
    this.cleanup = [];
    this.faults = [];
    this.samples = [];
    this.planted = new Map();
    this.released = new Set();
    this.expectedParkedKeys = [];
    this.started = Date.now();
    this.instance = 0;
  }

  topic(name) {
    return `${this.prefix}${name}`;
  }

  async setup() {
    const admin = new Client({ connectionString: DATABASE_URL });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${this.database}`);
    } finally {
      await admin.end();
    }
    this.db = new Client({ connectionString: this.databaseUrl });
    await this.db.connect();
    this.admin = this.kafka.admin();
    await this.admin.connect();
  }

  async teardown() {
    for (const p of [...this.loads, ...this.consumers]) await p.kill();
    clearInterval(this.sampler);
    for (const step of this.cleanup.reverse()) await Promise.resolve().then(step).catch((err) => log(`  cleanup: ${err.message}`));
    await this.db?.end().catch(() => undefined);
    await this.admin?.disconnect().catch(() => undefined);
    if (this.run.keep) return log(`  kept database ${this.database} (--keep)`);
    const admin = new Client({ connectionString: DATABASE_URL });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE IF EXISTS ${this.database} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  }

  fault(label) {
    this.faults.push({ t: Date.now() - this.started, label });
    log(`  ${this.scenario.name}: ${label}`);
  }

  async startConsumer(env = {}, waitForAssignment = true) {
    this.instance += 1;
    const proc = new Proc(`consumer-app#${this.instance}`, CONSUMER_MAIN, [], {
      DATABASE_URL: this.databaseUrl,
      KAFKA_BROKERS: this.brokers.join(','),
      KAFKA_TOPIC_PREFIX: this.prefix,
      KAFKA_GROUP_ID: this.group,
      HTTP_PORT: '0',
      KAFKA_SESSION_TIMEOUT_MS: '6000',
      ...this.scenario.consumerEnv,
      // The run's data layer (--data-layer): consumer-app's handlers write through it.
      DATA_LAYER: this.run.dataLayer,
      // The scenario's Kafka driver (--drivers).
      ...(this.driver ? DRIVERS[this.driver] : {}),
      ...env,
    }, join(this.dir, 'logs', `consumer-app-${this.instance}.log`));
    this.consumers.push(proc);
    await proc.waitForLog(/listening on http:\/\/127\.0\.0\.1:\d+/);
    if (waitForAssignment) await proc.waitForLog(/group .*: assigned /);
    return proc;
  }

  /** Waits until a topic of this stage exists with a leader for every partition (a consumer creates them at boot). */
  async topicReady(name, timeoutMs = 60000) {
    const topic = this.topic(name);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const metadata = await this.admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
      if (metadata?.topics[0]?.partitions.length > 0 && metadata.topics[0].partitions.every((p) => p.leader >= 0)) return;
      if (Date.now() > deadline) throw new Error(`topic ${topic} has no leaders after ${timeoutMs} ms`);
      await sleep(200);
    }
  }

  liveConsumers() {
    return this.consumers.filter((c) => c.running);
  }

  startLoad(count, extra = []) {
    const proc = new Proc(`load#${this.loads.length + 1}`, LOAD_CLI, [
      'payments', '--count', String(count), '--accounts', String(this.run.config.accounts), '--duplicates', String(this.run.config.duplicates),
      '--account-prefix', this.accountPrefix, '--rate', String(this.run.config.rate), '--seed', String(Math.floor(this.random() * 2 ** 31)), '--ack-log', this.ackLog, ...extra,
    ], { KAFKA_BROKERS: this.brokers.join(','), KAFKA_TOPIC_PREFIX: this.prefix, SPOOL_DIR: this.spoolDir, PUBLISH_TIMEOUT_MS: '2000', ...this.scenario.loadEnv }, join(this.dir, 'logs', `load-${this.loads.length + 1}.log`));
    this.loads.push(proc);
    return proc;
  }

  /** Milliseconds until `count` more payments are published at the profile's rate, scaled by `share`. */
  loadTime(share = 1) {
    return (this.run.config.count / this.run.config.rate) * 1000 * share;
  }

  /**
   * Records of the input topic the group has not committed. A scenario whose input is written in Kafka
   * transactions (the outbox relay's) sets `dataEnds` (partition -> offset after its last committed record):
   * such a partition ends with a marker, or an aborted batch, which a consumer commits nothing for.
   */
  async lag() {
    return (await this.lagByPartition()).reduce((sum, p) => sum + p.lag, 0);
  }

  /** The input's lag partition by partition: the group's committed offset and the end it must reach. */
  async lagByPartition() {
    const topic = this.topic('payments.requested');
    const [ends, [committed]] = await Promise.all([this.admin.fetchTopicOffsets(topic), this.admin.fetchOffsets({ groupId: this.group, topics: [topic] })]);
    return ends.map((end) => {
      const done = Number(committed.partitions.find((p) => p.partition === end.partition)?.offset ?? -1);
      const last = this.dataEnds ? (this.dataEnds.get(end.partition) ?? 0) : Number(end.high);
      return { partition: end.partition, committed: done, end: last, lag: Math.max(0, last - Math.max(Number(end.low), done)) };
    });
  }

  /**
   * What a scenario that did not catch up leaves for its reader (CI shows only the output): the partitions
   * behind, and each consumer's last warnings and errors.
   */
  async stuckReport() {
    const behind = await this.lagByPartition().then(
      (ps) => ps.filter((p) => p.lag > 0).map((p) => `[${p.partition}] committed ${p.committed}, end ${p.end}`).join(', '),
      (err) => `lag unreadable (${err.message})`,
    );
    const lines = this.consumers.map((c) => {
      const notable = c.output
        .replace(/\x1b\[[0-9;]*m/g, '')
        .split('\n')
        .filter((l) => /\b(WARN|ERROR)\b/.test(l) && !/kafkajs:Connection|rebalancing/.test(l))
        .slice(-6)
        .map((l) => `    ${l.slice(0, 600)}`);
      return `  ${c.name} (${c.running ? 'running' : 'exited'}), its last warnings and errors:\n${notable.join('\n') || '    none'}`;
    });
    return `partitions behind: ${behind || 'none'}\n${lines.join('\n')}`;
  }

  startSampling() {
    this.sampler = setInterval(() => {
      this.lag().then((lag) => this.samples.push({ t: Date.now() - this.started, lag }), () => undefined);
    }, 500);
  }

  /** Waits for every load to finish and the group to commit everything; returns ms from the last fault. */
  async caughtUp(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (const load of this.loads) {
      const { code, signal } = await load.exited;
      if (code !== 0 && !load.killedOnPurpose) throw new Error(`${load.name} exited with ${code ?? signal}: ${load.output.slice(-1500)}`);
    }
    let zeroSince;
    for (;;) {
      const lag = await this.lag().catch(() => -1);
      if (lag === 0) {
        zeroSince ??= Date.now();
        if (Date.now() - zeroSince >= 1500) break;
      } else zeroSince = undefined;
      if (Date.now() > deadline) throw new Error(`the group did not catch up within ${timeoutMs / 1000} s (lag ${lag})\n${await this.stuckReport()}`);
      await sleep(300);
    }
    const lastFault = this.faults.length ? this.started + this.faults[this.faults.length - 1].t : this.started;
    return Math.max(0, zeroSince - lastFault);
  }

  /** A random moment in the next `ms`. */
  async someTime(ms) {
    await sleep(Math.floor(ms * (0.3 + 0.7 * this.random())));
  }
}

function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

function kafkaScript(...argv) {
  const result = spawnSync('bash', [KAFKA_SCRIPT, ...argv], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`kafka.sh ${argv.join(' ')} failed: ${result.stdout}${result.stderr}`);
  return result.stdout;
}

/** Reads a topic from the beginning (read committed) until `enough` and `idleMs` without a new record. */
async function readTopic(kafka, topic, { enough = () => true, idleMs = 3000, timeoutMs = 180000 } = {}) {
  const consumer = kafka.consumer({ groupId: `verify-reader-${randomUUID()}`, readUncommitted: false, maxWaitTimeInMs: 250 });
  const records = [];
  let last = Date.now();
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      records.push({ partition, ...message });
      last = Date.now();
    },
  });
  const deadline = Date.now() + timeoutMs;
  while (!(enough(records) && Date.now() - last >= idleMs) && Date.now() < deadline) await sleep(200);
  await consumer.disconnect();
  return records;
}

const header = (headers, name) => {
  const v = headers?.[name];
  const first = Array.isArray(v) ? v[0] : v;
  return first === undefined || first === null ? null : Buffer.isBuffer(first) ? first.toString('utf8') : String(first);
};

/** Everything the checker needs, read without the library under test. */
async function collect(stage) {
  const schemas = avro.loadSchemas(join(ROOT, 'schemas'));
  const requested = schemas.get('com.example.PaymentRequested');
  const processed = schemas.get('com.example.PaymentProcessed');
  const inputTopic = stage.topic('payments.requested');
  const ends = await stage.admin.fetchTopicOffsets(inputTopic);
  // Offsets count markers too: for an input written in Kafka transactions (the outbox scenario), what it committed.
  const total = stage.outbox ? stage.outbox.committed.size : ends.reduce((n, e) => n + Number(e.high) - Number(e.low), 0);
  // A value in a Schema Registry's framing (byte 0, an id) is read by the registry's own client (the scenario's
  // stage.registry), as another service would; a single-object one by the verifier's own codec.
  // A scenario whose consumers read JSON (EVENT_FORMAT=json) has JSON on both sides, read by JSON.parse.
  const json = stage.scenario.consumerEnv?.EVENT_FORMAT === 'json';
  // Its inputs in a registry's framing (JSON Schema, Protobuf) are read by the scenario's own decoder of them.
  const decode = async (schema, value) =>
    json ? (value && value[0] === 0 && stage.framedDecoder ? stage.framedDecoder(value) : jsonEvent(value)) : stage.registry && value && value[0] === 0 ? stage.registry.decode(value) : avro.decode(schema, value);
  const inputs = await Promise.all(
    (await readTopic(stage.kafka, inputTopic, { enough: (rs) => rs.length >= total, idleMs: 500 })).map(async (r) => {
      const payment = await decode(requested, r.value)
        .then((p) => p && { ...p, amountCents: BigInt(p.amountCents) })
        .catch(() => null);
      return { partition: r.partition, offset: r.offset, messageId: header(r.headers, 'message-id'), payment };
    }),
  );
  const distinct = new Set(inputs.map((i) => i.payment?.paymentId).filter(Boolean)).size;
  const toOutput = async (r) => {
    const event = await decode(processed, r.value).catch(() => null);
    return event && { partition: r.partition, offset: String(r.offset), paymentId: event.paymentId, accountId: event.accountId, status: event.status, balanceAfter: BigInt(event.balanceAfterCents) };
  };
  const outputTopic = stage.topic('payments.processed');
  const kafkajs = (await Promise.all((await readTopic(stage.kafka, outputTopic, { enough: (rs) => rs.length >= distinct - stage.planted.size })).map(toOutput))).filter(Boolean);
  let java = null;
  try {
    const { readCommitted } = require('./java-reader');
    java = (await Promise.all((await readCommitted({ brokers: stage.brokers, topics: [outputTopic] })).map((r) => toOutput({ ...r, offset: r.offset })))).filter(Boolean);
  } catch (err) {
    if (err.code !== 'MODULE_NOT_FOUND') throw err;
  }
  const deadLetters = (await readTopic(stage.kafka, `${inputTopic}.dlq`, { idleMs: 2000, timeoutMs: 30000 })).map((r) => ({ messageId: header(r.headers, 'message-id'), reason: header(r.headers, 'dlq-reason') }));
  const ledger = (await stage.db.query('SELECT payment_id, account_id, status, balance_after_cents::text AS after FROM ledger_entries')).rows.map((r) => ({
    paymentId: r.payment_id,
    accountId: r.account_id,
    status: r.status,
    balanceAfter: BigInt(r.after),
  }));
  const accounts = (await stage.db.query('SELECT account_id, balance_cents::text AS balance FROM accounts')).rows.map((r) => ({ accountId: r.account_id, balance: BigInt(r.balance) }));
  const parkedKeys = (await stage.db.query('SELECT ordering_key FROM kafka_eo_parked_keys WHERE consumer_group = $1', [stage.group])).rows.map((r) => r.ordering_key);
  const acknowledged = existsSync(stage.ackLog)
    ? readFileSync(stage.ackLog, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')[0])
    : [];
  return {
    inputs,
    planted: stage.planted,
    released: stage.released,
    ledger,
    accounts,
    outputs: { kafkajs, java: java ?? kafkajs },
    javaRead: java !== null,
    deadLetters,
    parkedKeys,
    expectedParkedKeys: stage.expectedParkedKeys,
    acknowledged,
  };
}

/** A JSON object value, or null (not JSON, not an object, no value). */
function jsonEvent(value) {
  if (!value) return null;
  try {
    const event = JSON.parse(value.toString('utf8'));
    return event !== null && typeof event === 'object' && !Array.isArray(event) ? event : null;
  } catch {
    return null;
  }
}

/** Sends records as they are (the verifier's own producer: hostile records, a special account, sign-ups). */
async function sendRaw(stage, messages, topic = 'payments.requested') {
  const producer = stage.kafka.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    await producer.send({ topic: stage.topic(topic), acks: -1, messages });
  } finally {
    await producer.disconnect();
  }
}

function log(line) {
  process.stdout.write(`verify [${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

const PRODUCER_MAIN = join(ROOT, 'dist/apps/producer-app/apps/producer-app/src/main.js');
const scenarios = require('./scenarios')({ sleep, kafkaScript, sendRaw, avro, ROOT, KAFKA_EO_CLI, log, Proc, PRODUCER_MAIN, readTopic, header });

async function runScenario(run, scenario, driver) {
  const stage = new Stage(run, scenario, driver);
  const result = { scenario: scenario.name, description: scenario.description, faults: stage.faults };
  const started = Date.now();
  try {
    await scenario.setup?.(stage);
    await stage.setup();
    stage.startSampling();
    await scenario.run(stage, run.config);
    result.caughtUpMs = await stage.caughtUp(scenario.catchUpMs ?? 300000);
    if (scenario.after) await scenario.after(stage, run.config);
    await sleep(500);
    clearInterval(stage.sampler);
    for (const c of stage.liveConsumers()) await c.stop();
    const history = await collect(stage);
    result.check = check(history);
    result.javaRead = history.javaRead;
    if (scenario.check) {
      // A scenario's own history and check, besides the payments' (the transient-failures scenario's emails).
      const own = await scenario.check(stage);
      result.check = { ...result.check, [scenario.name]: own, problems: [...result.check.problems, ...own.problems] };
      result.check.pass = result.check.problems.length === 0;
      for (const h of own.hostile ?? []) log(`  hostile ${h.kind.padEnd(15)} expected ${h.expected.padEnd(17)} dead letter ${h.found}`);
    }
  } catch (err) {
    result.error = err.message;
  } finally {
    clearInterval(stage.sampler);
    const chart = `${scenario.name}.svg`;
    writeFileSync(join(run.dir, chart), report.lagChart(scenario.name, stage.samples, stage.faults));
    result.chart = chart;
    result.seconds = Math.round((Date.now() - started) / 1000);
    await stage.teardown().catch((err) => log(`  teardown of ${scenario.name}: ${err.message}`));
  }
  return result;
}

async function main() {
  const options = args(process.argv.slice(2));
  if (options.list) {
    for (const s of scenarios) process.stdout.write(`${s.name.padEnd(28)} ${s.description}\n`);
    return 0;
  }
  const self = selfTest();
  const blind = Object.entries(self).filter(([, ok]) => !ok).map(([name]) => name);
  if (blind.length) throw new Error(`the checker's self-test failed (${blind.join(', ')}): it would not see these anomalies`);
  log(`checker self-test: ${Object.keys(self).filter((k) => k.endsWith(' reported')).length} planted anomalies each reported, clean histories pass`);
  for (const file of [CONSUMER_MAIN, LOAD_CLI, KAFKA_EO_CLI]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: run npm run build first`);
  }
  const chosen = (options.scenarios.length ? scenarios.filter((s) => options.scenarios.includes(s.name)) : scenarios.filter((s) => !s.optIn)).filter((s) => !options.skip.includes(s.name));
  const unknown = [...options.scenarios, ...options.skip].filter((n) => !scenarios.some((s) => s.name === n));
  if (unknown.length) throw new Error(`unknown scenario(s) ${unknown.join(', ')}; --list shows them`);
  const id = `${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}-${options.seed}`;
  const dir = join(ROOT, 'verify-results', id);
  mkdirSync(dir, { recursive: true });
  const versions = (() => {
    try {
      return readFileSync(join(ROOT, '.kafka', 'broker.version'), 'utf8').trim();
    } catch {
      return 'unknown';
    }
  })();
  const pg = new Client({ connectionString: DATABASE_URL });
  await pg.connect();
  const postgres = (await pg.query('SHOW server_version')).rows[0].server_version;
  await pg.end();
  const repeat = `npm run verify -- --profile ${options.profile} --seed ${options.seed}${options.scenarios.length ? ` --scenario ${options.scenarios.join(',')}` : ''}${options.dataLayer !== 'typeorm' ? ` --data-layer ${options.dataLayer}` : ''}${options.skip.length ? ` --skip ${options.skip.join(',')}` : ''}${options.listedDrivers.length ? ` --drivers ${options.listedDrivers.join(',')}` : ''}`;
  const run = { id, dir, keep: options.keep, seed: options.seed, profile: options.profile, dataLayer: options.dataLayer, config: PROFILES[options.profile], brokers: options.brokers, date: new Date().toISOString(), kafka: versions, postgres, repeat };
  log(`run ${id}: profile ${options.profile}, seed ${options.seed}, data layer ${options.dataLayer}, ${chosen.length} scenario(s); results in verify-results/${id}/`);
  const results = [];
  for (const [index, scenario] of chosen.entries()) {
    const driver = options.pinned[scenario.name] ?? (options.drivers.length ? options.drivers[(index + options.seed) % options.drivers.length] : undefined);
    log(`scenario ${scenario.name}: ${scenario.description}${driver ? ` (driver ${driver})` : ''}`);
    const result = await runScenario(run, scenario, driver);
    if (driver) result.driver = driver;
    results.push(result);
    log(`scenario ${scenario.name}: ${result.error ? `ERROR ${result.error}` : result.check.pass ? 'pass' : `FAIL: ${result.check.problems.join('; ')}`} (${result.seconds} s)`);
  }
  const summary = report.table(results);
  process.stdout.write(`\n${summary}\n\n`);
  const json = JSON.stringify({ run, results }, (k, v) => (typeof v === 'bigint' ? v.toString() : v), 2);
  writeFileSync(join(dir, 'results.json'), json);
  writeFileSync(join(dir, 'summary.md'), report.markdown(run, results));
  const ok = results.every((r) => !r.error && r.check.pass);
  log(`${ok ? 'PASSED' : 'FAILED'}: verify-results/${id}/summary.md`);
  if (!ok) process.stdout.write(`repeat this run: ${repeat}\n`);
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`verify: ${err.stack || err.message}\n`);
    process.exit(2);
  },
);
