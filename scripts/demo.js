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
 * Options: --count N (20000) --accounts K (200) --duplicates P (0.05) --rate R (800/s) --outage-seconds S (5) --keep
 */
const { spawn, spawnSync } = require('child_process');
const { join } = require('path');
const http = require('http');

const ROOT = join(__dirname, '..');
const KAFKA = join(ROOT, 'scripts/kafka/kafka.sh');
const BROKERS = (process.env.KAFKA_BROKERS || '127.0.0.1:9092').split(',');
const DATABASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const CONSUMER_PORT = Number(process.env.CONSUMER_HTTP_PORT || 3001);
const PRODUCER_PORT = Number(process.env.PRODUCER_HTTP_PORT || 3000);
/** producer-app again, in outbox mode (PAYMENTS_MODE=outbox): POST /payments writes its row and event in one transaction. */
const OUTBOX_PORT = Number(process.env.OUTBOX_HTTP_PORT || 3003);
const GROUP = 'consumer-app';
// A killed member's partitions move on after its session times out: 10 s keeps the demo short.
const CONSUMER_ENV = { KAFKA_SESSION_TIMEOUT_MS: process.env.KAFKA_SESSION_TIMEOUT_MS || '10000' };

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}
const COUNT = Number(flag('count', 20000));
const ACCOUNTS = Number(flag('accounts', 200));
const DUPLICATES = Number(flag('duplicates', 0.05));
const OUTAGE_SECONDS = Number(flag('outage-seconds', 5));
// Paced so that both faults land while the load is still publishing.
const RATE = Number(flag('rate', 800));
const KEEP = process.argv.includes('--keep');

const started = { kafka: false, apps: new Map() };
const t0 = Date.now();
const log = (message) => process.stdout.write(`demo [${((Date.now() - t0) / 1000).toFixed(0).padStart(3)}s] ${message}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function kafkaScript(command) {
  return spawnSync('bash', [KAFKA, command], { encoding: 'utf8' });
}

function brokerAnswers() {
  return spawnSync(process.execPath, [join(ROOT, 'scripts/kafka/probe.js'), BROKERS[0], '3000']).status === 0;
}

async function ensureKafka() {
  if (brokerAnswers()) return log(`Kafka answers on ${BROKERS.join(',')}`);
  const result = spawnSync('bash', [KAFKA, 'start'], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error('the local Kafka broker could not be started (see the kafka: line above)');
  started.kafka = true;
}

async function ensurePostgres() {
  const { Client } = require('pg');
  const client = new Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new Error(`PostgreSQL is not reachable at DATABASE_URL (${err.message}): start it or set DATABASE_URL`);
  } finally {
    await client.end().catch(() => undefined);
  }
  log('PostgreSQL answers');
}

function build() {
  log('building the library and both apps (npm run build)');
  const result = spawnSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) throw new Error('npm run build failed');
}

function startApp(name, port, env = {}, label = name) {
  const child = spawn(process.execPath, [join(ROOT, `dist/apps/${name}/apps/${name}/src/main.js`)], {
    cwd: ROOT,
    env: { ...process.env, HTTP_PORT: String(port), DATABASE_URL, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // The apps' own logs go to files; the demo prints its story.
  const fs = require('fs');
  fs.mkdirSync(join(ROOT, '.demo-logs'), { recursive: true });
  const out = fs.createWriteStream(join(ROOT, '.demo-logs', `${label}.log`), { flags: 'a' });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  started.apps.set(label, child);
  return child;
}

function getJson(port, path) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, timeout: 3000 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body: body ? JSON.parse(body) : undefined }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

function postJson(port, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...headers } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function waitHealthy(name, port, timeoutMs = 90000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const child = started.apps.get(name);
    if (!child) throw new Error(`${name} was not started`);
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} during start-up (log: .demo-logs/${name}.log)`);
    const answer = await getJson(port, '/health').catch(() => null);
    if (answer && answer.status === 200 && (name !== 'consumer-app' || answer.body.details.kafka.consumer === 'running')) return answer.body;
    await sleep(500);
  }
  throw new Error(`${name} did not report healthy on http://127.0.0.1:${port}/health within ${timeoutMs / 1000}s (log: .demo-logs/${name}.log)`);
}

async function stopApp(name, signal = 'SIGTERM') {
  const child = started.apps.get(name);
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await Promise.race([exited, sleep(30000).then(() => child.kill('SIGKILL'))]);
  await exited;
}

async function stopAll() {
  for (const name of [...started.apps.keys()].reverse()) await stopApp(name);
  if (started.kafka) spawnSync('bash', [KAFKA, 'stop'], { stdio: 'inherit' });
}

async function waitFor(condition, timeoutMs = 300000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting after ${timeoutMs / 1000}s`);
    await sleep(200);
  }
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
  const { randomUUID } = require('crypto');
  const consumer = kafka.consumer({ groupId: `demo-reader-${randomUUID()}`, maxWaitTimeInMs: 200, readUncommitted: false });
  const records = [];
  let lastGrowth = Date.now();
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      records.push({ partition, offset: BigInt(message.offset), value: message.value, headers: message.headers });
      lastGrowth = Date.now();
    },
  });
  const deadline = Date.now() + timeoutMs;
  while (!(enough(records) && Date.now() - lastGrowth > 2000)) {
    if (Date.now() > deadline) break;
    await sleep(250);
  }
  await consumer.disconnect();
  return records.sort((a, b) => a.partition - b.partition || (a.offset < b.offset ? -1 : 1));
}

/** Runs the kafka-eo CLI as an operator would; returns its output (throws on a non-zero exit). */
function kafkaEo(args) {
  const result = spawnSync(process.execPath, [join(ROOT, 'dist/libs/kafka-exactly-once/cli/kafka-eo.js'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, DATABASE_URL, KAFKA_BROKERS: BROKERS.join(','), KAFKA_EO_GROUP: GROUP },
  });
  if (result.status !== 0) throw new Error(`kafka-eo ${args.join(' ')} exited ${result.status}: ${result.stderr}${result.stdout}`);
  return result.stdout;
}

/**
 * The outbox path: payments POSTed to producer-app in outbox mode, each account's next request sent only once
 * the previous one was answered (so each account's commit order is known), a share resent as duplicates (same
 * paymentId: 200 `duplicate`) and a share rolled back on purpose after their row and event were written (409).
 * A request without an answer (producer-app killed under it) is sent again with the same paymentId until it is
 * answered: 201 if its first try did not commit, 200 `duplicate` if it did. Resolves with what was committed.
 */
async function outboxLoad({ port, prefix, count, accounts, rate, duplicates, rollBacks, onProgress }) {
  const { randomUUID } = require('crypto');
  let random = 7;
  const next = () => ((random = (random * 1103515245 + 12345) % 2147483648) / 2147483648);
  const queues = Array.from({ length: accounts }, () => []);
  for (let i = 0; i < count; i++) {
    const amountCents = (Math.floor(next() * 15000) - 5000).toString();
    queues[i % accounts].push({ payment: { paymentId: randomUUID(), accountId: `${prefix}${i % accounts}`, amountCents }, rollBack: next() < rollBacks, duplicate: next() < duplicates });
  }
  const result = { committed: new Map(), rolledBack: new Set(), duplicatesAnswered: 0, retried: 0, requests: 0 };
  const interval = 1000 / rate;
  let sent = 0;
  const startedAt = Date.now();
  const post = async (item) => {
    for (;;) {
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
    queues.map(async (queue, account) => {
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
        onProgress?.(result);
      }
      void account;
    }),
  );
  return result;
}

async function main() {
  await ensureKafka();
  await ensurePostgres();
  build();
  const { Kafka, logLevel } = require('kafkajs');
  const { Client } = require('pg');
  const lib = require(join(ROOT, 'dist/libs/kafka-exactly-once'));
  const { decodeSingleObject } = require(join(ROOT, 'dist/libs/kafka-exactly-once/testing'));
  const kafka = new Kafka({ clientId: 'demo', brokers: BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const db = new Client({ connectionString: DATABASE_URL });
  await db.connect();
  const canStopBroker = kafkaScript('status').status === 0;

  const run = Date.now().toString(36);
  const prefix = `acc-${run}-`;
  log(`run ${run}: ${COUNT} payments over ${ACCOUNTS} accounts (${prefix}0..${ACCOUNTS - 1}), ${DUPLICATES * 100}% duplicate publishes`);

  startApp('consumer-app', CONSUMER_PORT, CONSUMER_ENV);
  await waitHealthy('consumer-app', CONSUMER_PORT);
  log(`consumer-app is consuming (http://127.0.0.1:${CONSUMER_PORT}/health)`);
  startApp('producer-app', PRODUCER_PORT, { SPOOL_DIR: join(ROOT, '.spool', 'producer-app') });
  await waitHealthy('producer-app', PRODUCER_PORT);
  log(`producer-app is up (http://127.0.0.1:${PRODUCER_PORT})`);
  startApp('producer-app', OUTBOX_PORT, { PAYMENTS_MODE: 'outbox', SPOOL_DIR: join(ROOT, '.spool', 'producer-app-outbox') }, 'producer-app-outbox');
  await waitHealthy('producer-app-outbox', OUTBOX_PORT);
  log(`producer-app in outbox mode is up (http://127.0.0.1:${OUTBOX_PORT}): POST /payments commits its row and its event together`);
  const signup = await postJson(PRODUCER_PORT, '/users/signups', { userId: Number.parseInt(run.slice(-6), 36) % 2000000000, userEmail: `demo-${run}@example.com` });
  const invalid = await postJson(PRODUCER_PORT, '/payments', { paymentId: 'not-a-uuid', accountId: `${prefix}0`, amountCents: 'ten' });
  log(`POST /users/signups -> ${signup.status} ${JSON.stringify(signup.body)}; an invalid POST /payments -> ${invalid.status} ${invalid.body.message}`);

  // The workload, through the library's EventPublisher (its own spool), as the load command runs it.
  const load = spawn(
    process.execPath,
    [join(ROOT, 'dist/apps/producer-app/apps/producer-app/src/cli.js'), 'payments', '--count', String(COUNT), '--accounts', String(ACCOUNTS), '--duplicates', String(DUPLICATES), '--account-prefix', prefix, '--rate', String(RATE)],
    { cwd: ROOT, env: { ...process.env, SPOOL_DIR: join(ROOT, '.spool', `demo-load-${run}`), PUBLISH_TIMEOUT_MS: '2000' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let loadOut = '';
  let loadErr = '';
  const loadLog = require('fs').createWriteStream(join(ROOT, '.demo-logs', 'load.log'), { flags: 'w' });
  load.stdout.on('data', (c) => {
    loadOut += c;
    loadLog.write(c);
  });
  load.stderr.on('data', (c) => {
    loadErr += c;
    loadLog.write(c);
  });
  const loadDone = new Promise((resolve) => load.once('exit', resolve));
  log('load command publishing payments (npm run produce -- payments ...)');

  // At the same time, a fifth as many payments over HTTP through the outbox, on accounts of their own: some
  // duplicates, some rolled back on purpose, and producer-app killed with SIGKILL under them (fault 3).
  const OUTBOX_COUNT = Math.max(100, Math.round(COUNT / 5));
  const outboxPrefix = `${prefix}obx-`;
  let outboxProgress = { committed: new Map() };
  const outboxRun = outboxLoad({ port: OUTBOX_PORT, prefix: outboxPrefix, count: OUTBOX_COUNT, accounts: Math.max(10, Math.round(ACCOUNTS / 4)), rate: Math.max(50, RATE / 5), duplicates: DUPLICATES, rollBacks: 0.03, onProgress: (r) => (outboxProgress = r) });
  log(`POST /payments in outbox mode: ${OUTBOX_COUNT} payments on accounts ${outboxPrefix}*, ${DUPLICATES * 100}% sent twice, 3% rolled back on purpose`);
  const outboxKill = (async () => {
    await waitFor(() => outboxProgress.committed.size >= OUTBOX_COUNT * 0.4);
    const committedAtKill = outboxProgress.committed.size;
    await stopApp('producer-app-outbox', 'SIGKILL');
    log(`producer-app (outbox mode) killed with SIGKILL after ${committedAtKill} payments committed; restarting it (unanswered requests are sent again)`);
    startApp('producer-app', OUTBOX_PORT, { PAYMENTS_MODE: 'outbox', SPOOL_DIR: join(ROOT, '.spool', 'producer-app-outbox') }, 'producer-app-outbox');
    await waitHealthy('producer-app-outbox', OUTBOX_PORT);
    return committedAtKill;
  })();

  // The deliberately failing account: a deposit over the approval limit, not approved, then withdrawals that
  // only that deposit covers. Handled out of order they would be rejected; parked, they wait for it.
  const { randomUUID } = require('crypto');
  const special = `${prefix}needs-approval`;
  const specialPayments = [1000n, 2000000n, -900000n, 50n, -900000n].map((amountCents) => ({ paymentId: randomUUID(), accountId: special, amountCents: amountCents.toString() }));
  for (const payment of specialPayments) {
    const answer = await postJson(PRODUCER_PORT, '/payments', payment);
    if (answer.status !== 202) throw new Error(`POST /payments for ${special} -> ${answer.status} ${JSON.stringify(answer.body)}`);
  }
  log(`account ${special}: a $20,000.00 deposit without an approval, then two $9,000.00 withdrawals only it covers`);

  // Fault 1: Kafka goes away for a few seconds while the load command publishes: the publisher spools to disk,
  // consumer-app's transactions fail and are recovered.
  let outage = 'skipped: the broker was not started by scripts/kafka, so the demo does not stop it';
  let kafkaBackAt;
  await waitFor(async () => (await ledgerRows(db, prefix)) >= Math.min(1500, COUNT / 10) || load.exitCode !== null);
  if (!canStopBroker) {
    log(`Kafka outage ${outage}`);
  } else if (load.exitCode !== null) {
    outage = 'skipped: the load finished before it could start';
  } else {
    // SIGKILL, as a crash: Kafka 4.4's controlled shutdown can record a transaction as committed without writing
    // its markers, leaving it hanging until an operator aborts it (docs/operations.md §8).
    kafkaScript('kill');
    log(`Kafka killed (SIGKILL) for ${OUTAGE_SECONDS}s while the load command publishes (the publisher spools to disk)`);
    await sleep(OUTAGE_SECONDS * 1000);
    const restart = kafkaScript('start');
    if (restart.status !== 0) throw new Error(`Kafka did not come back: ${restart.stdout}${restart.stderr}`);
    outage = `${OUTAGE_SECONDS}s`;
    kafkaBackAt = Date.now();
    log('Kafka is back');
  }

  // Fault 2: once consumer-app is applying payments again, kill it with SIGKILL and restart it.
  const before = await ledgerRows(db, prefix);
  await waitFor(async () => (await ledgerRows(db, prefix)) >= Math.min(COUNT / 2, before + 1000) || load.exitCode !== null);
  const appliedAtKill = await ledgerRows(db, prefix);
  await stopApp('consumer-app', 'SIGKILL');
  log(`consumer-app killed with SIGKILL after ${appliedAtKill} payments applied; restarting it`);
  startApp('consumer-app', CONSUMER_PORT, CONSUMER_ENV);
  await waitHealthy('consumer-app', CONSUMER_PORT);
  log('consumer-app restarted and consuming');

  const code = await loadDone;
  if (code !== 0) throw new Error(`the load command failed (exit ${code}):\n${loadErr.slice(-2000)}`);
  const summaryLine = loadOut.split('\n').find((l) => l.startsWith('SUMMARY '));
  const summary = JSON.parse(summaryLine.slice('SUMMARY '.length));
  log(loadOut.split('\n').find((l) => l.startsWith('published ')) ?? 'load command finished');
  const outbox = await outboxRun;
  const outboxKilledAt = await outboxKill;
  log(`outbox path: ${outbox.committed.size} committed, ${outbox.rolledBack.size} rolled back, ${outbox.duplicatesAnswered} answered as duplicates, ${outbox.retried} requests sent again after no answer`);
  await waitFor(async () => (await db.query('SELECT count(*)::int AS n FROM kafka_eo_outbox')).rows[0].n === 0);
  log('the outbox relay has sent every committed event');

  log('waiting for consumer-app to catch up');
  const topic = 'payments.requested';
  // Nothing writes to the topic any more: where each partition's last record ends is fixed.
  const dataEnds = new Map();
  for (const r of await readAll(kafka, topic, (rs) => rs.length > 0)) dataEnds.set(r.partition, Math.max(dataEnds.get(r.partition) ?? 0, Number(r.offset) + 1));
  const catchUp = async () => {
    const catchUpDeadline = Date.now() + 5 * 60 * 1000;
    while ((await groupLag(admin, topic, dataEnds)) > 0) {
      if (Date.now() > catchUpDeadline) throw new Error('consumer-app did not catch up within 5 minutes (log: .demo-logs/consumer-app.log)');
      await sleep(500);
    }
  };
  await catchUp();

  // The operator's part: see the parked account, fix the cause, release it.
  const parked = JSON.parse(kafkaEo(['parked', 'list', '--topic', topic, '--key', special, '--json'])).items;
  if (parked.length !== 1) throw new Error(`expected ${special} to be parked, kafka-eo parked list says: ${JSON.stringify(parked)}`);
  const parkedLine = `${special} (${parked[0].reason}: ${parked[0].error.message.slice(0, 60)}…), ${parked[0].parkedRecords} payments waiting`;
  log(`parked: ${parkedLine}`);
  process.stdout.write(kafkaEo(['parked', 'show', topic, special]).replace(/^/gm, '    '));
  await db.query(`INSERT INTO payment_approvals (payment_id, approved_by) VALUES ($1, 'demo')`, [specialPayments[1].paymentId]);
  log(`approved the deposit (INSERT INTO payment_approvals); releasing: npx kafka-eo parked release ${topic} ${special}`);
  const release = JSON.parse(kafkaEo(['parked', 'release', topic, special, '--actor', 'demo', '--json']));
  log(`release ${release.state}: ${release.result.replayed} payments replayed in order`);
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

  const outputs = (await readAll(kafka, 'payments.processed', (rs) => rs.length > 0))
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
    `parked account       ${parkedLine}; released by kafka-eo after the approval (balance ${specialBalance} cents, fold ${balances.get(special)})`,
    `duplicates absorbed  ${inputs.length - unique.length} (same message id, applied once)`,
    `ledger rows          ${ledger.length} for ${unique.length} distinct payments (${accepted} accepted, ${ledger.length - accepted} rejected)`,
    `outputs              ${outputs.length} PaymentProcessed (read committed), ${duplicatedOutputs} duplicated, ${missingOutputs} missing`,
    `balances             ${balances.size - wrongBalances}/${balances.size} accounts equal the in-order fold; ${wrongOutcomes} wrong outcomes`,
    `order violations     ${orderViolations}`,
    `result               ${ok ? 'EXACTLY ONCE, IN ORDER' : 'FAILED'}`,
    '=========================================================================',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  await db.end();
  await admin.disconnect();
  if (KEEP) {
    log('apps still running (--keep); press Ctrl-C to stop');
    await new Promise((r) => process.once('SIGINT', r));
  }
  return ok;
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

main()
  .then(async (ok) => {
    await stopAll();
    process.exit(ok ? 0 : 1);
  })
  .catch(async (err) => {
    process.stderr.write(`demo: FAILED: ${err.stack || err.message}\n`);
    await stopAll();
    process.exit(1);
  });
