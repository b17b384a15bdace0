#!/usr/bin/env node
'use strict';
/**
 * `npm run demo`: the whole product in one command, with the faults it is built for.
 *
 * Starts the local Kafka broker if none answers, checks PostgreSQL, builds, starts consumer-app and
 * producer-app, publishes a workload of payments with duplicate publishes through the EventPublisher (the load
 * command), kills consumer-app with SIGKILL mid-run and restarts it, stops Kafka for a few seconds mid-run so
 * that the publisher spools, waits until everything is delivered and applied, then checks the result
 * independently: one ledger row and one PaymentProcessed per payment, balances equal to an in-order fold of the
 * input topic, outputs of each account in input order. Exits 0 only if exactly-once and order held. Stops what
 * it started.
 *
 * At the same time, a second producer-app in outbox mode takes payments over HTTP (each committed with its
 * payment_requests row; some sent twice, some rolled back on purpose) and is killed with SIGKILL mid-run; the
 * report checks that path on its own: each committed request once in Kafka, in its account's commit order, and
 * nothing of a rolled-back one.
 *
 * One account is made to fail on purpose: a deposit over the approval limit without an approval. Its account
 * is parked (@OrderedEvent): its later payments wait, in order, while every other account flows. The demo
 * shows it parked, approves the deposit (the fix), releases the account with the kafka-eo CLI, and only then
 * checks: the parked account too must equal the in-order fold.
 *
 * Each run is on its own, whatever ran before on the same broker or server: a database created for it on the
 * PostgreSQL server of DATABASE_URL (kafka_eo_demo_<run>), topics under a prefix of its own (demo-<run>.), its
 * own consumer group and spool directories. They are dropped at the end, on success or failure, unless --keep.
 * The outbox relay's checkpoint is keyed by the database's outbox id, so a fresh database never meets an
 * earlier run's checkpoint. --database URL runs on an existing database instead (neither created nor dropped).
 *
 * Whenever it waits, it says for what (the figure now and the target) and, every 10 s, how far it is; it stops
 * at once, naming what it waited for and why, when something will not clear by itself: an app that exited, the
 * load command that failed, the outbox relay refusing (its health says `failing` with an OutboxRelayError),
 * consumer-app's consumer crashed for good.
 *
 * Options: --count N (20000) --accounts K (200) --duplicates P (0.05) --rate R (800/s) --outage-seconds S (5)
 *          --keep (leave the apps up until Ctrl-C, and keep the database, topics, group and spool)
 *          --database URL (an existing database, used as it is)
 *          --consumers 2 (a second consumer-app instance in the group, on CONSUMER2_HTTP_PORT (3004))
 *          --release-from-console (wait, up to --console-wait-seconds S (1800), for an operator to release the parked
 *          account from the operator console, whose address the demo prints; the token is in .demo-logs/admin-token)
 */
const { spawn, spawnSync } = require('child_process');
const { randomBytes, randomUUID } = require('crypto');
const fs = require('fs');
const { join } = require('path');
const http = require('http');

const ROOT = join(__dirname, '..');
const KAFKA = join(ROOT, 'scripts/kafka/kafka.sh');
const LOGS = join(ROOT, '.demo-logs');
const BROKERS = (process.env.KAFKA_BROKERS || '127.0.0.1:9092').split(',');
const CONSUMER_PORT = Number(process.env.CONSUMER_HTTP_PORT || 3001);
const PRODUCER_PORT = Number(process.env.PRODUCER_HTTP_PORT || 3000);
/** producer-app again, in outbox mode (PAYMENTS_MODE=outbox): POST /payments writes its row and event in one transaction. */
const OUTBOX_PORT = Number(process.env.OUTBOX_HTTP_PORT || 3003);
/** --consumers 2: a second consumer-app instance in the group, on this port (its console shows the same group). */
const CONSUMER2_PORT = Number(process.env.CONSUMER2_HTTP_PORT || 3004);
// A killed member's partitions move on after its session times out: 10 s keeps the demo short.
// consumer-app serves the operator console (and the admin API) with this token: made for the run, written to a
// file only its owner can read, never printed (ADMIN_TOKEN given: that one).
const ADMIN_TOKEN = process.env.ADMIN_TOKEN || randomBytes(24).toString('base64url');
const ADMIN_TOKEN_FILE = join(LOGS, 'admin-token');
const CONSOLE_URL = `http://127.0.0.1:${CONSUMER_PORT}/kafka-eo/`;
const CONSUMER_ENV = { KAFKA_SESSION_TIMEOUT_MS: process.env.KAFKA_SESSION_TIMEOUT_MS || '10000', ADMIN_TOKEN, ADMIN_CONSOLE: '/kafka-eo' };

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}
const COUNT = Number(flag('count', 20000));
const ACCOUNTS = Number(flag('accounts', 200));
const DUPLICATES = Number(flag('duplicates', 0.05));
const OUTAGE_SECONDS = Number(flag('outage-seconds', 5));
/** --consumers N (1 or 2): consumer-app instances in the group; the SIGKILL fault hits the first, the other goes on. */
const CONSUMERS = Number(flag('consumers', 1));
if (CONSUMERS !== 1 && CONSUMERS !== 2) {
  console.error(`--consumers must be 1 or 2, got ${flag('consumers')}`);
  process.exit(2);
}
// Paced so that both faults land while the load is still publishing.
const RATE = Number(flag('rate', 800));
const KEEP = process.argv.includes('--keep');
/** --release-from-console: the demo waits for an operator to release the parked account from the console's page. */
const FROM_CONSOLE = process.argv.includes('--release-from-console');
const CONSOLE_WAIT_MS = Number(flag('console-wait-seconds', 1800)) * 1000;

// What this run owns. A run id of time and randomness: two checkouts, or two runs in the same millisecond, differ.
const RUN = `${Date.now().toString(36)}-${randomBytes(2).toString('hex')}`;
/** The PostgreSQL server the run's database is created on (DATABASE_URL's database is only connected to for that). */
const SERVER_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
/** --database URL: an existing database, used as it is and never dropped (e.g. to look at one kept by --keep). */
const GIVEN_DATABASE = flag('database', undefined);
const DATABASE_NAME = GIVEN_DATABASE ? decodeURIComponent(new URL(GIVEN_DATABASE).pathname.slice(1)) : `kafka_eo_demo_${RUN.replace(/-/g, '_')}`;
const DATABASE_URL = GIVEN_DATABASE ?? databaseOnServer(SERVER_URL, DATABASE_NAME);
/** Every demo topic of the run under it (KAFKA_TOPIC_PREFIX of both apps and the load command). */
const TOPIC_PREFIX = `demo-${RUN}.`;
const TOPICS = { requested: `${TOPIC_PREFIX}payments.requested`, processed: `${TOPIC_PREFIX}payments.processed` };
/** consumer-app's group (KAFKA_GROUP_ID): a group of an earlier run has offsets of its own topics only. */
const GROUP = `consumer-app-demo-${RUN}`;
const SPOOL_ROOT = join(ROOT, '.spool', `demo-${RUN}`);

const started = { kafka: false, apps: new Map(), databaseCreated: false, topics: false, readerGroups: [] };
/** The load command's process, its output so far. */
const load = { child: undefined, out: '', err: '' };
/** Failures of work the demo runs beside its main line (the outbox load, the kill and restart of its producer-app). */
const backgroundFailures = [];
/** The last /health answer of each app, by label, with the pid it came from. */
const lastHealth = new Map();
/** Set once the demo is finishing: loops in the background stop. */
let stopping = false;
const t0 = Date.now();
const log = (message) => process.stdout.write(`demo [${((Date.now() - t0) / 1000).toFixed(0).padStart(3)}s] ${message}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const fmt = (n) => Number(n).toLocaleString('en-US');
const cut = (text, max = 240) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** An error the demo explains itself: printed without a stack. */
class DemoError extends Error {}

function databaseOnServer(serverUrl, name) {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A connection string fit to print (its password, if any, hidden). */
function shown(connectionString) {
  const url = new URL(connectionString);
  if (url.password) url.password = '***';
  return url.toString();
}

function kafkaScript(command) {
  return spawnSync('bash', [KAFKA, command], { encoding: 'utf8' });
}

function brokerAnswers() {
  return spawnSync(process.execPath, [join(ROOT, 'scripts/kafka/probe.js'), BROKERS[0], '3000']).status === 0;
}

async function ensureKafka() {
  if (brokerAnswers()) return log(`Kafka answers on ${BROKERS.join(',')}`);
  log(`no Kafka on ${BROKERS[0]}: starting the local broker (bash scripts/kafka/kafka.sh start)`);
  const result = spawnSync('bash', [KAFKA, 'start'], { stdio: 'inherit' });
  if (result.status !== 0) throw new DemoError('the local Kafka broker could not be started (see the kafka: line above)');
  started.kafka = true;
}

async function ensurePostgres() {
  const { Client } = require('pg');
  const url = GIVEN_DATABASE ?? SERVER_URL;
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new DemoError(`PostgreSQL is not reachable at ${GIVEN_DATABASE ? '--database' : 'DATABASE_URL'} ${shown(url)} (${err.message}): start it or set ${GIVEN_DATABASE ? '--database' : 'DATABASE_URL'}`);
  } finally {
    await client.end().catch(() => undefined);
  }
  log('PostgreSQL answers');
}

/** The run's own database, on the server of DATABASE_URL: nothing of an earlier run (its outbox relay's batches above all) is in it. */
async function createDatabase() {
  if (GIVEN_DATABASE) {
    log(`database ${DATABASE_NAME} (--database ${shown(GIVEN_DATABASE)}): used as it is, not dropped at the end`);
    return;
  }
  const { Client } = require('pg');
  const admin = new Client({ connectionString: SERVER_URL, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
    await admin.query(`CREATE DATABASE "${DATABASE_NAME}"`);
    started.databaseCreated = true;
  } catch (err) {
    throw new DemoError(
      `could not create the run's database ${DATABASE_NAME} on the server of DATABASE_URL ${shown(SERVER_URL)} (${err.message}): the demo needs a user that may create databases (CREATEDB), or an empty database given with --database URL`,
    );
  } finally {
    await admin.end().catch(() => undefined);
  }
  log(`database ${DATABASE_NAME} created for this run on the server of DATABASE_URL (${KEEP ? 'kept at the end: --keep' : 'dropped at the end; --keep keeps it'})`);
}

async function dropDatabase() {
  if (!started.databaseCreated) return;
  const { Client } = require('pg');
  const admin = new Client({ connectionString: SERVER_URL, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${DATABASE_NAME}" WITH (FORCE)`);
    log(`dropped database ${DATABASE_NAME}`);
  } catch (err) {
    log(`could not drop database ${DATABASE_NAME} (${err.message}): drop it with DROP DATABASE "${DATABASE_NAME}" WITH (FORCE)`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([promise, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000}s`)), ms)))]).finally(() => clearTimeout(timer));
}

/** Deletes the run's topics (demo-<run>.*) and its consumer groups; Kafka keeps them otherwise, run after run. */
async function deleteKafkaResources() {
  if (!started.topics) return;
  const { Kafka, logLevel } = require('kafkajs');
  const admin = new Kafka({ clientId: 'demo-cleanup', brokers: BROKERS, logLevel: logLevel.NOTHING, connectionTimeout: 3000, retry: { retries: 1 } }).admin();
  try {
    await withTimeout(admin.connect(), 10000, 'Kafka');
    const topics = (await withTimeout(admin.listTopics(), 10000, 'Kafka')).filter((t) => t.startsWith(TOPIC_PREFIX));
    if (topics.length > 0) await withTimeout(admin.deleteTopics({ topics, timeout: 30000 }), 40000, 'deleting topics');
    await withTimeout(admin.deleteGroups([GROUP, ...started.readerGroups]), 10000, 'deleting groups').catch(() => undefined); // left to expire if it fails
    log(`deleted the run's ${topics.length} topics (${TOPIC_PREFIX}*) and its consumer group ${GROUP}`);
  } catch (err) {
    log(`could not delete the run's topics ${TOPIC_PREFIX}* (${err.message}): delete them with kafka-topics.sh --delete --topic '${TOPIC_PREFIX.replace(/\./g, '\\.')}.*'`);
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Whether something already listens on 127.0.0.1:port. */
function portTaken(port) {
  return new Promise((resolve) => {
    const socket = require('net').connect({ host: '127.0.0.1', port });
    socket.setTimeout(2000);
    const answer = (taken) => {
      socket.destroy();
      resolve(taken);
    };
    socket.once('connect', () => answer(true));
    socket.once('error', () => answer(false));
    socket.once('timeout', () => answer(false));
  });
}

/**
 * Refuses to start when an app's port is taken: an app left running there (by a demo that was killed, say) would
 * answer the demo's requests and health checks in the place of the run's own, on another database.
 */
async function ensurePortsFree() {
  const ports = [
    ['consumer-app', 'CONSUMER_HTTP_PORT', CONSUMER_PORT],
    ...(CONSUMERS > 1 ? [['the second consumer-app', 'CONSUMER2_HTTP_PORT', CONSUMER2_PORT]] : []),
    ['producer-app', 'PRODUCER_HTTP_PORT', PRODUCER_PORT],
    ['producer-app in outbox mode', 'OUTBOX_HTTP_PORT', OUTBOX_PORT],
  ];
  const taken = [];
  for (const [app, variable, port] of ports) if (await portTaken(port)) taken.push(`${port} (${app}; ${variable})`);
  if (taken.length > 0) {
    throw new DemoError(`something already listens on 127.0.0.1 port ${taken.join(', ')}: stop it (an app of an earlier demo?) or set the variable to a free port`);
  }
}

function build() {
  log('building the library and both apps (npm run build)');
  const result = spawnSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) throw new DemoError('npm run build failed (its output is above)');
}

/** The app's log file: written afresh by the first start of the run, appended to by a restart. */
const openedLogs = new Set();
function logStream(label) {
  fs.mkdirSync(LOGS, { recursive: true });
  const stream = fs.createWriteStream(join(LOGS, `${label}.log`), { flags: openedLogs.has(label) ? 'a' : 'w' });
  openedLogs.add(label);
  return stream;
}

/** The last lines of an app's log, without colours, for an error message. */
function logTail(label, lines = 3) {
  try {
    const text = fs.readFileSync(join(LOGS, `${label}.log`), 'utf8').replace(/\x1b\[[0-9;]*m/g, '');
    return text.split('\n').filter((l) => l.trim()).slice(-lines).map((l) => cut(l.trim(), 300)).join(' | ') || '(empty)';
  } catch {
    return '(no log)';
  }
}

/**
 * The Node.js that runs `name`: this one, but an app on the platformatic driver (KAFKA_CLIENT=platformatic)
 * needs 22.22+ or 24.6+: from an older Node.js it runs on Node.js 24, fetched once (scripts/node/node-binary.js).
 */
function nodeFor(name, env) {
  const client = env.KAFKA_CLIENT ?? process.env.KAFKA_CLIENT;
  if (client !== 'platformatic') return process.execPath;
  const [major, minor] = process.versions.node.split('.').map(Number);
  const runs = major > 24 || (major === 24 && minor >= 6) || (major === 22 && minor >= 22) || major === 23;
  return runs ? process.execPath : require('./node/node-binary').nodeBinary('24');
}

function startApp(name, port, env = {}, label = name) {
  const child = spawn(nodeFor(name, env), [join(ROOT, `dist/apps/${name}/apps/${name}/src/main.js`)], {
    cwd: ROOT,
    env: { ...process.env, HTTP_PORT: String(port), DATABASE_URL, KAFKA_TOPIC_PREFIX: TOPIC_PREFIX, KAFKA_GROUP_ID: GROUP, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // The apps' own logs go to files; the demo prints its story.
  const out = logStream(label);
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  child.port = port;
  started.apps.set(label, child);
  started.topics = true;
  return child;
}

/**
 * A connection per request, closed after it: Node's default agent keeps connections alive, and producer-app keeps
 * an idle one for 65 s, which holds up its shutdown when the demo stops it.
 */
const NO_KEEP_ALIVE = { agent: false };

function getJson(port, path) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, timeout: 3000, ...NO_KEEP_ALIVE }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode, body: body ? JSON.parse(body) : undefined });
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

function postJson(port, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', ...NO_KEEP_ALIVE, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), connection: 'close', ...headers } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode, body: text ? JSON.parse(text) : undefined });
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on('error', reject);
    req.end(data);
  });
}

const exited = (child) => child.exitCode !== null || child.signalCode !== null;

/** Asks the app's /health now; remembers the answer (for problem() and the progress lines). */
async function pollHealth(label) {
  const child = started.apps.get(label);
  if (!child || exited(child)) return undefined;
  const answer = await getJson(child.port, '/health').catch(() => undefined);
  if (answer?.body) lastHealth.set(label, { pid: child.pid, status: answer.status, body: answer.body });
  return answer;
}

/** The last /health answer of the app's running instance (not of one killed before). */
function health(label) {
  const h = lastHealth.get(label);
  return h && h.pid === started.apps.get(label)?.pid ? h : undefined;
}

/** What the outbox relay says of itself (producer-app's health in outbox mode), in a few words. */
function relayState() {
  const outbox = health('producer-app-outbox')?.body?.details?.outbox;
  if (!outbox) return 'relay state not known yet';
  return `relay ${outbox.relay}, batch ${outbox.relayedBatch ?? '-'}, ${outbox.waiting ?? '?'} waiting${outbox.relay !== 'active' && outbox.lastError ? `, last error: ${cut(outbox.lastError, 160)}` : ''}`;
}

/** What consumer-app's health says when it is not plainly up, in a few words. */
function consumerState() {
  const h = health('consumer-app');
  if (!h) return 'consumer-app health not known yet';
  const kafka = h.body?.details?.kafka ?? {};
  const message = kafka.message ?? kafka.error ?? h.body?.details?.database?.message;
  return `consumer-app ${h.status === 200 ? 'up' : `down (${h.status})`}, consumer ${kafka.consumer ?? '?'}${message ? `: ${cut(String(message), 160)}` : ''}`;
}

/**
 * Something that will not clear by itself, or undefined. An app exited that the demo did not stop; the load
 * command failed; the outbox relay refuses (an OutboxRelayError: it retries every minute, but only an operator
 * can make it go on); consumer-app's consumer crashed for good; work beside the main line failed.
 */
function problem() {
  for (const [label, child] of started.apps) {
    if (child.stoppedByDemo || !exited(child)) continue;
    return `${label} exited (${child.exitCode !== null ? `exit code ${child.exitCode}` : child.signalCode}) without being stopped; the end of .demo-logs/${label}.log: ${logTail(label)}`;
  }
  const { child } = load;
  if (child && exited(child) && child.exitCode !== 0) {
    return `the load command failed (${child.exitCode !== null ? `exit code ${child.exitCode}` : child.signalCode}); the end of .demo-logs/load.log: ${cut(load.err.trim().split('\n').slice(-3).join(' | '), 600)}`;
  }
  const outbox = health('producer-app-outbox')?.body?.details?.outbox;
  if (outbox?.relay === 'failing' && /^OutboxRelayError\b/.test(outbox.lastError ?? '')) {
    return `the outbox relay refuses to relay, and will not go on by itself: ${outbox.lastError}${GIVEN_DATABASE ? ' (the database was given with --database, not made for this run)' : ''} (.demo-logs/producer-app-outbox.log)`;
  }
  const kafka = health('consumer-app')?.body?.details?.kafka;
  if (kafka?.consumer === 'crashed') return `consumer-app's consumer crashed for good: ${kafka.error ?? 'no error given'} (.demo-logs/consumer-app.log)`;
  return backgroundFailures[0];
}

/** Asks both apps' health every 2 s (while they run), so that a wait notices a refusal within seconds. */
function watchHealth() {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    Promise.all(['consumer-app', 'producer-app-outbox'].map(pollHealth)).finally(() => (busy = false));
  }, 2000);
  timer.unref();
  return () => clearInterval(timer);
}

/** Runs `promise` beside the main line: its failure stops the waits (problem()), and is never unhandled. */
function beside(what, promise) {
  promise.catch((err) => backgroundFailures.push(`${what} failed: ${err.message}`));
  return promise;
}

/**
 * Waits until `measure()` says done: says at once what it waits for (`measure()`'s figure: where it is now, and
 * the target), then every 10 s how far it is (with `hint()`, what the apps say). Stops at once when problem()
 * names something that will not clear by itself, and after `timeoutMs`; either way the error names what it
 * waited for and why it stopped.
 */
async function waitUntil(what, measure, { timeoutMs = 300000, hint } = {}) {
  const since = Date.now();
  let state = await measure();
  if (state.done) return state;
  log(`waiting for ${what}: ${state.figure}`);
  let reported = Date.now();
  for (;;) {
    const trouble = problem();
    if (trouble) throw new DemoError(`stopped waiting for ${what} (${state.figure}) after ${((Date.now() - since) / 1000).toFixed(0)}s: ${trouble}`);
    if (Date.now() - since > timeoutMs) {
      throw new DemoError(`gave up waiting for ${what} after ${timeoutMs / 1000}s (${state.figure})${hint ? `; ${hint()}` : ''}`);
    }
    await sleep(250);
    state = await measure();
    if (state.done) return state;
    if (Date.now() - reported >= 10000) {
      reported = Date.now();
      log(`  still waiting for ${what}: ${state.figure} (${((Date.now() - since) / 1000).toFixed(0)}s)${hint ? `; ${hint()}` : ''}`);
    }
  }
}

async function waitHealthy(label, timeoutMs = 90000) {
  await waitUntil(
    `${label} to report healthy on http://127.0.0.1:${started.apps.get(label).port}/health${label === 'consumer-app' ? ' with its consumer running' : ''}`,
    async () => {
      const answer = await pollHealth(label);
      if (!answer) return { done: false, figure: 'not answering yet' };
      const consumer = answer.body?.details?.kafka?.consumer;
      const done = answer.status === 200 && (label !== 'consumer-app' || consumer === 'running');
      const down = Object.entries(answer.body?.error ?? {}).map(([k, v]) => `${k}: ${v.message ?? v.error ?? 'down'}`);
      return { done, figure: `answers ${answer.status}${consumer ? `, consumer ${consumer}` : ''}${down.length ? ` (${cut(down.join('; '), 120)})` : ''}` };
    },
    { timeoutMs },
  );
}

async function stopApp(label, signal = 'SIGTERM') {
  const child = started.apps.get(label);
  if (!child) return;
  child.stoppedByDemo = true;
  if (exited(child)) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  const timer = setTimeout(() => {
    log(`${label} did not exit within 30s of ${signal}: killing it (SIGKILL)`);
    child.kill('SIGKILL');
  }, 30000);
  await gone;
  clearTimeout(timer);
}

async function ledgerRows(db, prefix) {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM ledger_entries WHERE account_id LIKE $1', [`${prefix}%`]);
  return rows[0].n;
}

/**
 * Records of the topic the group has not committed. `dataEnds` (partition -> offset after its last record), when
 * given, is the end instead of the high watermark: a partition written in Kafka transactions (the outbox relay's)
 * ends with a commit marker, which a consumer commits nothing for.
 */
async function groupLag(admin, topic, dataEnds) {
  const ends = await admin.fetchTopicOffsets(topic);
  const [committed] = await admin.fetchOffsets({ groupId: GROUP, topics: [topic] });
  let lag = 0;
  for (const end of ends) {
    const done = Number(committed.partitions.find((p) => p.partition === end.partition)?.offset ?? -1);
    const last = dataEnds ? Number(dataEnds.get(end.partition) ?? 0) : Number(end.high);
    lag += Math.max(0, last - Math.max(0, done));
  }
  return lag;
}

/** Reads a topic from the beginning (read committed) until `enough(records)` and then 2 s without new records. */
async function readAll(kafka, topic, enough, timeoutMs = 180000) {
  const groupId = `${GROUP}-reader-${started.readerGroups.length + 1}`;
  started.readerGroups.push(groupId);
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200, readUncommitted: false });
  const records = [];
  let lastGrowth = Date.now();
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        records.push({ partition, offset: BigInt(message.offset), value: message.value, headers: message.headers });
        lastGrowth = Date.now();
      },
    });
    await waitUntil(
      `${topic} to be read from the beginning (read committed, until 2 s pass without a new record)`,
      () => ({ done: enough(records) && Date.now() - lastGrowth > 2000, figure: `${fmt(records.length)} records read` }),
      { timeoutMs },
    );
  } finally {
    await consumer.disconnect();
  }
  return records.sort((a, b) => a.partition - b.partition || (a.offset < b.offset ? -1 : 1));
}

/** Runs the kafka-eo CLI as an operator would; returns its output (throws on a non-zero exit). */
function kafkaEo(args) {
  const result = spawnSync(process.execPath, [join(ROOT, 'dist/libs/kafka-exactly-once/cli/kafka-eo.js'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, DATABASE_URL, KAFKA_BROKERS: BROKERS.join(','), KAFKA_EO_GROUP: GROUP },
  });
  if (result.status !== 0) throw new DemoError(`kafka-eo ${args.join(' ')} exited ${result.status}: ${result.stderr}${result.stdout}`);
  return result.stdout;
}

/** Where the load command is, from its progress lines on stderr. */
function loadFigure() {
  const lines = load.err.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const progress = /(\d+)\/(\d+) published, (\d+) spooled, breaker (\S+)/.exec(lines[i]);
    if (progress) return `${fmt(progress[1])} of ${fmt(progress[2])} published, ${fmt(progress[3])} spooled, breaker ${progress[4]}`;
    const draining = /waiting for (\d+) spooled events to reach Kafka/.exec(lines[i]);
    if (draining) return `all published, ${fmt(draining[1])} spooled events still to reach Kafka`;
  }
  return `0 of ${fmt(COUNT)} published`;
}

/**
 * The outbox path: payments POSTed to producer-app in outbox mode, each account's next request sent only once
 * the previous one was answered (so each account's commit order is known), a share resent as duplicates (same
 * paymentId: 200 `duplicate`) and a share rolled back on purpose after their row and event were written (409).
 * A request without an answer (producer-app killed under it) is sent again with the same paymentId until it is
 * answered: 201 if its first try did not commit, 200 `duplicate` if it did. Resolves with what was committed.
 */
async function outboxLoad({ port, prefix, count, accounts, rate, duplicates, rollBacks, onProgress }) {
  let random = 7;
  const next = () => ((random = (random * 1103515245 + 12345) % 2147483648) / 2147483648);
  const queues = Array.from({ length: accounts }, () => []);
  for (let i = 0; i < count; i++) {
    const amountCents = (Math.floor(next() * 15000) - 5000).toString();
    queues[i % accounts].push({ payment: { paymentId: randomUUID(), accountId: `${prefix}${i % accounts}`, amountCents }, rollBack: next() < rollBacks, duplicate: next() < duplicates });
  }
  const result = { committed: new Map(), rolledBack: new Set(), duplicatesAnswered: 0, retried: 0, requests: 0, answered: 0 };
  const interval = 1000 / rate;
  let sent = 0;
  const startedAt = Date.now();
  const post = async (item) => {
    for (;;) {
      if (stopping) throw new Error('the demo is stopping');
      // Paced over all accounts: the n-th request of the run waits for its slot.
      const slot = startedAt + sent++ * interval;
      if (slot > Date.now()) await sleep(slot - Date.now());
      result.requests++;
      const answer = await postJson(port, '/payments', item.payment, item.rollBack ? { 'x-demo-roll-back': '1' } : {}).catch(() => null);
      if (answer && [200, 201, 409].includes(answer.status)) return answer;
      result.retried++;
      await sleep(200);
    }
  };
  await Promise.all(
    queues.map(async (queue) => {
      for (const item of queue) {
        const answer = await post(item);
        if (answer.status === 409) result.rolledBack.add(item.payment.paymentId);
        else {
          if (answer.status === 200) result.duplicatesAnswered++;
          if (!result.committed.has(item.payment.paymentId)) result.committed.set(item.payment.paymentId, item.payment.accountId);
          if (item.duplicate && !item.rollBack) {
            const again = await post({ ...item, duplicate: false });
            if (again.status !== 200) throw new Error(`a duplicate request of ${item.payment.paymentId} answered ${again.status} ${JSON.stringify(again.body)}, not 200 duplicate`);
            result.duplicatesAnswered++;
          }
        }
        result.answered++;
        onProgress?.(result);
      }
    }),
  );
  return result;
}

/** The db client and the admin of main(), closed by finish(). */
const clients = [];
let stopWatchingHealth;

async function main() {
  await ensurePortsFree();
  await ensureKafka();
  await ensurePostgres();
  build();
  await createDatabase();
  const { Kafka, logLevel } = require('kafkajs');
  const { Client } = require('pg');
  const lib = require(join(ROOT, 'dist/libs/kafka-exactly-once'));
  const { decodeSingleObject } = require(join(ROOT, 'dist/libs/kafka-exactly-once/testing'));
  const kafka = new Kafka({ clientId: 'demo', brokers: BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  clients.push(() => admin.disconnect());
  const db = new Client({ connectionString: DATABASE_URL });
  await db.connect();
  clients.push(() => db.end());
  const canStopBroker = kafkaScript('status').status === 0;
  stopWatchingHealth = watchHealth();

  const run = RUN;
  const prefix = `acc-${run}-`;
  log(`run ${run}: ${COUNT} payments over ${ACCOUNTS} accounts (${prefix}0..${ACCOUNTS - 1}), ${DUPLICATES * 100}% duplicate publishes`);
  log(`run ${run} has its own topics ${TOPIC_PREFIX}*, consumer group ${GROUP}, database ${DATABASE_NAME} and spool .spool/demo-${run}; app logs in .demo-logs/`);

  fs.mkdirSync(LOGS, { recursive: true });
  fs.writeFileSync(ADMIN_TOKEN_FILE, `${ADMIN_TOKEN}\n`, { mode: 0o600 });
  fs.chmodSync(ADMIN_TOKEN_FILE, 0o600);
  startApp('consumer-app', CONSUMER_PORT, CONSUMER_ENV);
  await waitHealthy('consumer-app');
  log(`consumer-app is consuming (http://127.0.0.1:${CONSUMER_PORT}/health); operator console ${CONSOLE_URL} (sign in with the token in .demo-logs/admin-token)`);
  if (CONSUMERS > 1) {
    // A second instance in the same group: the partitions are shared, and either console shows both instances.
    startApp('consumer-app', CONSUMER2_PORT, CONSUMER_ENV, 'consumer-app-2');
    await waitHealthy('consumer-app-2');
    log(`a second consumer-app instance is up (http://127.0.0.1:${CONSUMER2_PORT}/health): the group's partitions are shared; the SIGKILL below hits the first`);
  }
  startApp('producer-app', PRODUCER_PORT, { SPOOL_DIR: join(SPOOL_ROOT, 'producer-app') });
  await waitHealthy('producer-app');
  log(`producer-app is up (http://127.0.0.1:${PRODUCER_PORT})`);
  // The relay's checkpoint topic of this run too (under its prefix, so removed with its topics): no run's relay waits on another's.
  const outboxEnv = { PAYMENTS_MODE: 'outbox', SPOOL_DIR: join(SPOOL_ROOT, 'producer-app-outbox'), OUTBOX_CHECKPOINT_TOPIC: `${TOPIC_PREFIX}kafka-eo.outbox-checkpoints` };
  startApp('producer-app', OUTBOX_PORT, outboxEnv, 'producer-app-outbox');
  await waitHealthy('producer-app-outbox');
  // The relay reads its checkpoint before it relays: a refusal (a database that Kafka no longer agrees with) shows here, at once.
  await waitUntil(
    'the outbox relay of producer-app (outbox mode) to be active',
    async () => {
      await pollHealth('producer-app-outbox');
      return { done: health('producer-app-outbox')?.body?.details?.outbox?.relay === 'active', figure: relayState() };
    },
    { timeoutMs: 120000 },
  );
  log(`producer-app in outbox mode is up (http://127.0.0.1:${OUTBOX_PORT}), its relay active: POST /payments commits its row and its event together`);
  const signup = await postJson(PRODUCER_PORT, '/users/signups', { userId: Number.parseInt(run.split('-')[0].slice(-6), 36) % 2000000000, userEmail: `demo-${run}@example.com` });
  const invalid = await postJson(PRODUCER_PORT, '/payments', { paymentId: 'not-a-uuid', accountId: `${prefix}0`, amountCents: 'ten' });
  log(`POST /users/signups -> ${signup.status} ${JSON.stringify(signup.body)}; an invalid POST /payments -> ${invalid.status} ${invalid.body.message}`);

  // The workload, through the library's EventPublisher (its own spool), as the load command runs it.
  load.child = spawn(
    nodeFor('producer-app', {}),
    [join(ROOT, 'dist/apps/producer-app/apps/producer-app/src/cli.js'), 'payments', '--count', String(COUNT), '--accounts', String(ACCOUNTS), '--duplicates', String(DUPLICATES), '--account-prefix', prefix, '--rate', String(RATE)],
    { cwd: ROOT, env: { ...process.env, KAFKA_TOPIC_PREFIX: TOPIC_PREFIX, SPOOL_DIR: join(SPOOL_ROOT, 'load'), PUBLISH_TIMEOUT_MS: '2000' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const loadLog = logStream('load');
  load.child.stdout.on('data', (c) => {
    load.out += c;
    loadLog.write(c);
  });
  load.child.stderr.on('data', (c) => {
    load.err += c;
    loadLog.write(c);
  });
  const loadFinished = () => load.child.exitCode !== null || load.child.signalCode !== null;
  log('load command publishing payments (npm run produce -- payments ...)');

  // At the same time, a fifth as many payments over HTTP through the outbox, on accounts of their own: some
  // duplicates, some rolled back on purpose, and producer-app killed with SIGKILL under them (fault 3).
  const OUTBOX_COUNT = Math.max(100, Math.round(COUNT / 5));
  const outboxPrefix = `${prefix}obx-`;
  let outboxProgress = { committed: new Map(), answered: 0 };
  let outboxSettled = false;
  const outboxRun = beside(
    'the outbox load (POST /payments in outbox mode)',
    outboxLoad({ port: OUTBOX_PORT, prefix: outboxPrefix, count: OUTBOX_COUNT, accounts: Math.max(10, Math.round(ACCOUNTS / 4)), rate: Math.max(50, RATE / 5), duplicates: DUPLICATES, rollBacks: 0.03, onProgress: (r) => (outboxProgress = r) }).finally(
      () => (outboxSettled = true),
    ),
  );
  log(`POST /payments in outbox mode: ${OUTBOX_COUNT} payments on accounts ${outboxPrefix}*, ${DUPLICATES * 100}% sent twice, 3% rolled back on purpose`);
  const outboxKill = beside(
    'the SIGKILL and restart of producer-app (outbox mode)',
    (async () => {
      const target = Math.ceil(OUTBOX_COUNT * 0.4);
      await waitUntil(`${fmt(target)} outbox payments committed before producer-app (outbox mode) is killed`, () => ({ done: outboxProgress.committed.size >= target, figure: `${fmt(outboxProgress.committed.size)} of ${fmt(target)}` }));
      const committedAtKill = outboxProgress.committed.size;
      await stopApp('producer-app-outbox', 'SIGKILL');
      log(`producer-app (outbox mode) killed with SIGKILL after ${committedAtKill} payments committed; restarting it (unanswered requests are sent again)`);
      startApp('producer-app', OUTBOX_PORT, outboxEnv, 'producer-app-outbox');
      await waitHealthy('producer-app-outbox');
      return committedAtKill;
    })(),
  );

  // The deliberately failing account: a deposit over the approval limit, not approved, then withdrawals that
  // only that deposit covers. Handled out of order they would be rejected; parked, they wait for it.
  const special = `${prefix}needs-approval`;
  const specialPayments = [1000n, 2000000n, -900000n, 50n, -900000n].map((amountCents) => ({ paymentId: randomUUID(), accountId: special, amountCents: amountCents.toString() }));
  for (const payment of specialPayments) {
    const answer = await postJson(PRODUCER_PORT, '/payments', payment);
    if (answer.status !== 202) throw new DemoError(`POST /payments for ${special} -> ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  log(`account ${special}: a $20,000.00 deposit without an approval, then two $9,000.00 withdrawals only it covers`);

  const ledgerWait = (target, why) =>
    waitUntil(
      `${fmt(target)} ledger rows ${why} (or the load command to finish)`,
      async () => {
        const rows = await ledgerRows(db, prefix);
        return { done: rows >= target || load.child.exitCode === 0, figure: `${fmt(rows)} of ${fmt(target)}; load: ${loadFigure()}` };
      },
      { hint: consumerState },
    );

  // Fault 1: Kafka goes away for a few seconds while the load command publishes: the publisher spools to disk,
  // consumer-app's transactions fail and are recovered.
  let outage = 'skipped: the broker was not started by scripts/kafka, so the demo does not stop it';
  let kafkaBackAt;
  await ledgerWait(Math.min(1500, COUNT / 10), 'before Kafka is killed');
  if (!canStopBroker) {
    log(`Kafka outage ${outage}`);
  } else if (loadFinished()) {
    outage = 'skipped: the load finished before it could start';
  } else {
    // SIGKILL, as a crash: Kafka 4.4's controlled shutdown can record a transaction as committed without writing
    // its markers, leaving it hanging until an operator aborts it (docs/operations.md §8).
    kafkaScript('kill');
    log(`Kafka killed (SIGKILL) for ${OUTAGE_SECONDS}s while the load command publishes (the publisher spools to disk)`);
    await sleep(OUTAGE_SECONDS * 1000);
    log('starting Kafka again (bash scripts/kafka/kafka.sh start: waits until the broker answers)');
    const restart = kafkaScript('start');
    if (restart.status !== 0) throw new DemoError(`Kafka did not come back: ${restart.stdout}${restart.stderr}`);
    outage = `${OUTAGE_SECONDS}s`;
    kafkaBackAt = Date.now();
    log('Kafka is back');
  }

  // Fault 2: once consumer-app is applying payments again, kill it with SIGKILL and restart it.
  const before = await ledgerRows(db, prefix);
  await ledgerWait(Math.min(COUNT / 2, before + 1000), 'before consumer-app is killed');
  const appliedAtKill = await ledgerRows(db, prefix);
  await stopApp('consumer-app', 'SIGKILL');
  log(`consumer-app killed with SIGKILL after ${appliedAtKill} payments applied; restarting it`);
  startApp('consumer-app', CONSUMER_PORT, CONSUMER_ENV);
  await waitHealthy('consumer-app');
  log('consumer-app restarted and consuming');

  await waitUntil('the load command to finish (every payment published and in Kafka)', () => ({ done: loadFinished(), figure: loadFigure() }), { timeoutMs: 15 * 60 * 1000 });
  if (load.child.exitCode !== 0) throw new DemoError(`the load command failed (exit ${load.child.exitCode ?? load.child.signalCode}):\n${load.err.slice(-2000)}`);
  const summaryLine = load.out.split('\n').find((l) => l.startsWith('SUMMARY '));
  if (!summaryLine) throw new DemoError(`the load command printed no SUMMARY line (.demo-logs/load.log): ${cut(load.out, 600)}`);
  const summary = JSON.parse(summaryLine.slice('SUMMARY '.length));
  log(load.out.split('\n').find((l) => l.startsWith('published ')) ?? 'load command finished');
  await waitUntil(
    `every outbox payment answered over HTTP`,
    () => ({ done: outboxSettled, figure: `${fmt(outboxProgress.answered)} of ${fmt(OUTBOX_COUNT)} answered (${fmt(outboxProgress.committed.size)} committed)` }),
    { hint: relayState },
  );
  const outbox = await outboxRun;
  const outboxKilledAt = await outboxKill;
  log(`outbox path: ${outbox.committed.size} committed, ${outbox.rolledBack.size} rolled back, ${outbox.duplicatesAnswered} answered as duplicates, ${outbox.retried} requests sent again after no answer`);
  await waitUntil(
    'the outbox relay to send every committed event (kafka_eo_outbox empty)',
    async () => {
      const left = (await db.query('SELECT count(*)::int AS n FROM kafka_eo_outbox')).rows[0].n;
      return { done: left === 0, figure: `${fmt(left)} rows left, 0 wanted; ${relayState()}` };
    },
  );
  log('the outbox relay has sent every committed event');

  const topic = TOPICS.requested;
  // Nothing writes to the topic any more: where each partition's last record ends is fixed.
  const dataEnds = new Map();
  for (const r of await readAll(kafka, topic, (rs) => rs.length > 0)) dataEnds.set(r.partition, Math.max(dataEnds.get(r.partition) ?? 0, Number(r.offset) + 1));
  const catchUp = () =>
    waitUntil(
      `consumer-app to catch up on ${topic}`,
      async () => {
        const lag = await groupLag(admin, topic, dataEnds);
        return { done: lag === 0, figure: `lag ${fmt(lag)} records, 0 wanted` };
      },
      { hint: consumerState },
    );
  await catchUp();

  // The operator's part: see the parked account, fix the cause, release it.
  const parked = JSON.parse(kafkaEo(['parked', 'list', '--topic', topic, '--key', special, '--json'])).items;
  if (parked.length !== 1) throw new DemoError(`expected ${special} to be parked, kafka-eo parked list says: ${JSON.stringify(parked)}`);
  const parkedLine = `${special} (${parked[0].reason}: ${parked[0].error.message.slice(0, 60)}…), ${parked[0].parkedRecords} payments waiting`;
  log(`parked: ${parkedLine}`);
  process.stdout.write(kafkaEo(['parked', 'show', topic, special]).replace(/^(?=.)/gm, '    '));
  await db.query(`INSERT INTO payment_approvals (payment_id, approved_by) VALUES ($1, 'demo')`, [specialPayments[1].paymentId]);
  let release;
  if (FROM_CONSOLE) {
    const page = `${CONSOLE_URL}#/parked?topic=${encodeURIComponent(topic)}&key=${encodeURIComponent(special)}`;
    log(`approved the deposit (INSERT INTO payment_approvals); release ${special} from the console: ${page} (token in .demo-logs/admin-token); waiting up to ${CONSOLE_WAIT_MS / 60000} minutes`);
    const audit = () => JSON.parse(kafkaEo(['audit', 'list', '--action', 'release', '--topic', topic, '--key', special, '--json'])).items.find((e) => e.state === 'done' || e.state === 'failed');
    await waitUntil('the parked account released from the console', async () => {
      release = audit();
      return { done: release !== undefined, figure: release ? `release ${release.state}` : 'not released yet' };
    }, { timeoutMs: CONSOLE_WAIT_MS });
    if (release.state !== 'done') throw new DemoError(`the release from the console failed: ${JSON.stringify(release.result)}`);
  } else {
    log(`approved the deposit (INSERT INTO payment_approvals); releasing: npx kafka-eo parked release ${topic} ${special} (or from the console: ${CONSOLE_URL}, --release-from-console)`);
    release = JSON.parse(kafkaEo(['parked', 'release', topic, special, '--actor', 'demo', '--json']));
  }
  log(`release ${release.state}${release.actor ? ` by ${release.actor}` : ''}: ${release.result.replayed} payments replayed in order`);
  await catchUp();

  // Independent check: the input topic, decoded and folded in partition order.
  const registry = lib.SchemaRegistry.fromDirectory(join(ROOT, 'schemas'));
  const requested = registry.current('com.example.PaymentRequested');
  const processed = registry.current('com.example.PaymentProcessed');
  const header = (r, name) => (r.headers[name] === undefined ? undefined : r.headers[name].toString());
  const inputs = (await readAll(kafka, topic, (rs) => rs.length > 0))
    .map((r) => ({ messageId: header(r, 'message-id'), event: decodeSingleObject(registry, requested, r.value) }))
    .filter((r) => r.event.accountId.startsWith(prefix));
  const seen = new Set();
  const unique = [];
  for (const input of inputs) {
    if (seen.has(input.messageId)) continue;
    seen.add(input.messageId);
    unique.push(input.event);
  }
  const expected = new Map();
  const balances = new Map();
  const orderByAccount = new Map();
  for (const p of unique) {
    const balance = balances.get(p.accountId) ?? 0n;
    const accepted = balance + p.amountCents >= 0n;
    const after = accepted ? balance + p.amountCents : balance;
    balances.set(p.accountId, after);
    expected.set(p.paymentId, { status: accepted ? 'ACCEPTED' : 'REJECTED_INSUFFICIENT_FUNDS', after });
    orderByAccount.set(p.accountId, [...(orderByAccount.get(p.accountId) ?? []), p.paymentId]);
  }

  const ledger = (await db.query('SELECT payment_id, status, balance_after_cents::text AS after FROM ledger_entries WHERE account_id LIKE $1', [`${prefix}%`])).rows;
  const accounts = (await db.query('SELECT account_id, balance_cents::text AS balance FROM accounts WHERE account_id LIKE $1', [`${prefix}%`])).rows;
  const wrongOutcomes = ledger.filter((row) => {
    const want = expected.get(row.payment_id);
    return !want || want.status !== row.status || want.after !== BigInt(row.after);
  }).length;
  const wrongBalances = [...balances].filter(([id, balance]) => accounts.find((a) => a.account_id === id)?.balance !== balance.toString()).length;

  const outputs = (await readAll(kafka, TOPICS.processed, (rs) => rs.length > 0))
    .map((r) => decodeSingleObject(registry, processed, r.value))
    .filter((e) => e.accountId.startsWith(prefix));
  const perPayment = new Map();
  for (const o of outputs) perPayment.set(o.paymentId, (perPayment.get(o.paymentId) ?? 0) + 1);
  const duplicatedOutputs = [...perPayment.values()].filter((n) => n > 1).length;
  const missingOutputs = unique.filter((p) => !perPayment.has(p.paymentId)).length;
  const outputOrder = new Map();
  for (const o of outputs) outputOrder.set(o.accountId, [...(outputOrder.get(o.accountId) ?? []), o.paymentId]);
  let orderViolations = 0;
  for (const [account, ids] of orderByAccount) {
    const got = (outputOrder.get(account) ?? []).filter((id, i, all) => all.indexOf(id) === i);
    ids.forEach((id, i) => {
      if (got[i] !== id) orderViolations++;
    });
  }
  const accepted = ledger.filter((r) => r.status === 'ACCEPTED').length;

  // The outbox path, on its own: each committed request once on the input topic, in its account's commit order,
  // with one ledger row and one output; nothing anywhere of a request rolled back.
  const outboxInputs = inputs.filter((r) => r.event.accountId.startsWith(outboxPrefix));
  const outboxIds = outboxInputs.map((r) => r.event.paymentId);
  const outboxOnTopic = new Set(outboxIds);
  const outboxDuplicates = outboxIds.length - outboxOnTopic.size;
  const outboxMissing = [...outbox.committed.keys()].filter((id) => !outboxOnTopic.has(id)).length;
  const ledgerIds = new Set(ledger.map((r) => r.payment_id));
  const rolledBackSeen = [...outbox.rolledBack].filter((id) => outboxOnTopic.has(id) || ledgerIds.has(id) || perPayment.has(id)).length;
  const outboxLedgerMissing = [...outbox.committed.keys()].filter((id) => !ledgerIds.has(id) || perPayment.get(id) !== 1).length;
  let outboxOrderViolations = 0;
  const committedByAccount = new Map();
  for (const [id, account] of outbox.committed) committedByAccount.set(account, [...(committedByAccount.get(account) ?? []), id]);
  for (const [account, ids] of committedByAccount) {
    const got = outboxInputs.filter((r) => r.event.accountId === account).map((r) => r.event.paymentId);
    ids.forEach((id, i) => {
      if (got[i] !== id) outboxOrderViolations++;
    });
  }

  const specialBalance = accounts.find((a) => a.account_id === special)?.balance;
  const ok =
    unique.length === COUNT + specialPayments.length + outbox.committed.size &&
    outboxDuplicates === 0 &&
    outboxMissing === 0 &&
    rolledBackSeen === 0 &&
    outboxLedgerMissing === 0 &&
    outboxOrderViolations === 0 &&
    release.state === 'done' &&
    ledger.length === unique.length &&
    wrongOutcomes === 0 &&
    wrongBalances === 0 &&
    outputs.length === unique.length &&
    duplicatedOutputs === 0 &&
    missingOutputs === 0 &&
    orderViolations === 0;
  const lines = [
    '',
    '==================== kafka-exactly-once demo report ====================',
    `published            ${summary.events} payments + ${summary.duplicatePublishes} duplicate publishes (${inputs.length} records on ${topic})`,
    `spooled              ${summary.spooled} during the Kafka outage (${outage}) or queued behind their account's spooled events, all delivered`,
    `spool catch-up       ${spoolCatchUp(summary, kafkaBackAt)}`,
    `outbox path          ${outbox.committed.size} payments committed with their row over HTTP (producer-app SIGKILLed after ${outboxKilledAt}, ${outbox.retried} unanswered requests sent again), ${outbox.duplicatesAnswered} duplicate requests answered 200, ${outbox.rolledBack.size} rolled back on purpose`,
    `outbox into Kafka    ${outboxOnTopic.size} on ${topic}: ${outboxDuplicates} duplicated, ${outboxMissing} missing, ${rolledBackSeen} of rolled-back requests seen anywhere, ${outboxLedgerMissing} without exactly one ledger row and output, ${outboxOrderViolations} out of commit order`,
    `consumer crashes     1 SIGKILL after ${appliedAtKill} payments applied`,
    `parked account       ${parkedLine}; released ${FROM_CONSOLE ? `from the console by ${release.actor ?? '-'}${release.declaredActor ? ` (${release.declaredActor})` : ''}` : 'by kafka-eo'} after the approval (balance ${specialBalance} cents, fold ${balances.get(special)})`,
    `duplicates absorbed  ${inputs.length - unique.length} (same message id, applied once)`,
    `ledger rows          ${ledger.length} for ${unique.length} distinct payments (${accepted} accepted, ${ledger.length - accepted} rejected)`,
    `outputs              ${outputs.length} PaymentProcessed (read committed), ${duplicatedOutputs} duplicated, ${missingOutputs} missing`,
    `balances             ${balances.size - wrongBalances}/${balances.size} accounts equal the in-order fold; ${wrongOutcomes} wrong outcomes`,
    `order violations     ${orderViolations}`,
    ...(CONSUMERS > 1 ? [`consumer instances   ${CONSUMERS} in group ${GROUP} (the console of either shows both)`] : []),
    `operator console     ${CONSOLE_URL} (sign in with the token in .demo-logs/admin-token; ${KEEP ? 'up while --keep holds the apps' : 'it stops with the apps: --keep keeps it up'})`,
    `result               ${ok ? 'EXACTLY ONCE, IN ORDER' : 'FAILED'}`,
    '=========================================================================',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (KEEP) {
    log(`apps still running (--keep); ${kept()}; press Ctrl-C to stop the apps (the rest is kept)`);
    await new Promise((r) => (onKeepInterrupt = r));
  }
  return ok;
}

/** What --keep kept, and where to look. */
function kept() {
  const what = [];
  if (started.databaseCreated || GIVEN_DATABASE) what.push(`database ${DATABASE_NAME} (${shown(DATABASE_URL)})`);
  if (started.topics) what.push(`topics ${TOPIC_PREFIX}*, consumer group ${GROUP}, spool .spool/demo-${RUN}`);
  return what.length ? `kept: ${what.join(', ')}` : 'nothing of the run to keep yet';
}


/** How fast the publisher went back to live sends after the outage, from the load command's summary. */
function spoolCatchUp(summary, kafkaBackAt) {
  if (kafkaBackAt === undefined) return 'no outage';
  const after = (at) => (at === undefined ? '-' : `${((at - kafkaBackAt) / 1000).toFixed(1)} s`);
  const empty = `the spool (at most ${summary.spoolPeak} records) empty ${after(summary.spoolEmptyAt)} after Kafka's return`;
  if (summary.finishedAt <= kafkaBackAt) return `the load's last publish was answered ${((kafkaBackAt - summary.finishedAt) / 1000).toFixed(1)} s before Kafka was back (spooled meanwhile); ${empty}`;
  const live = summary.lastSpooledAt === undefined || summary.lastSpooledAt <= kafkaBackAt ? 'at once' : `${after(summary.lastSpooledAt)} after Kafka's return`;
  return `every publish live again ${live} (the last one spooled then); ${empty}`;
}

/** Set while --keep holds the apps up after the report: Ctrl-C ends that wait. */
let onKeepInterrupt;
let finishing;

/**
 * Stops what the demo started and removes what the run made (its database, topics, group and spool), unless
 * --keep; then exits with `code`. Runs once, whoever calls first (the end of main, its failure, a signal).
 */
function finish(code) {
  finishing ??= (async () => {
    stopping = true;
    stopWatchingHealth?.();
    const running = [...started.apps].filter(([, child]) => !exited(child)).map(([label]) => label);
    if (running.length > 0) log(`stopping ${running.join(', ')} (SIGTERM)`);
    for (const label of [...started.apps.keys()].reverse()) await stopApp(label);
    if (load.child && !exited(load.child)) {
      const gone = new Promise((r) => load.child.once('exit', r));
      load.child.kill('SIGTERM');
      await Promise.race([gone, sleep(10000)]);
    }
    for (const close of clients.splice(0).reverse()) await Promise.resolve().then(close).catch(() => undefined);
    if (KEEP) {
      log(kept());
    } else {
      await deleteKafkaResources();
      await dropDatabase();
      fs.rmSync(SPOOL_ROOT, { recursive: true, force: true });
    }
    if (started.kafka) spawnSync('bash', [KAFKA, 'stop'], { stdio: 'inherit' });
  })()
    .catch((err) => process.stderr.write(`demo: cleaning up failed: ${err.stack || err.message}\n`))
    .then(() => process.exit(code));
  return finishing;
}

// A promise of the demo's own that failed with no one awaiting it: say so and clean up, rather than exit at once
// and leave the run's database behind.
process.on('unhandledRejection', (err) => {
  if (finishing) return;
  process.stderr.write(`demo: FAILED: ${err instanceof DemoError ? err.message : (err && err.stack) || err}\n`);
  void finish(1);
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (onKeepInterrupt) return onKeepInterrupt();
    if (finishing) return;
    log(`${signal}: stopping the demo${KEEP ? '' : ' and removing what the run made'}`);
    void finish(130);
  });
}

main()
  .then((ok) => finish(ok ? 0 : 1))
  .catch((err) => {
    if (!finishing) process.stderr.write(`demo: FAILED: ${err instanceof DemoError ? err.message : err.stack || err.message}\n`);
    return finish(1);
  });
