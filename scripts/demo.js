#!/usr/bin/env node
'use strict';
/**
 * `npm run demo`: starts the local Kafka broker if nothing answers on KAFKA_BROKERS, checks PostgreSQL,
 * builds, starts consumer-app and producer-app, waits until both report healthy on GET /health, prints
 * their health, and stops everything it started (pass --keep to leave the apps running until Ctrl-C).
 */
const { spawn, spawnSync } = require('child_process');
const { join } = require('path');
const http = require('http');

const ROOT = join(__dirname, '..');
const KAFKA = join(ROOT, 'scripts/kafka/kafka.sh');
const brokers = process.env.KAFKA_BROKERS || '127.0.0.1:9092';
const keep = process.argv.includes('--keep');
const started = { kafka: false, apps: [] };

function log(message) {
  process.stdout.write(`demo: ${message}\n`);
}

function kafkaAnswers() {
  return spawnSync(process.execPath, [join(ROOT, 'scripts/kafka/probe.js'), brokers.split(',')[0], '3000']).status === 0;
}

function ensureKafka() {
  if (kafkaAnswers()) return log(`Kafka answers on ${brokers}`);
  const result = spawnSync('bash', [KAFKA, 'start'], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error('the local Kafka broker could not be started (see the kafka: line above)');
  started.kafka = true;
}

async function ensurePostgres() {
  const { Client } = require('pg');
  const url = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    log('PostgreSQL answers');
  } catch (err) {
    throw new Error(`PostgreSQL is not reachable at DATABASE_URL (${err.message}): start it or set DATABASE_URL`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function build() {
  log('building the library and both apps (npm run build)');
  const result = spawnSync('npm', ['run', '-s', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) throw new Error('npm run build failed');
}

function startApp(name, port) {
  const child = spawn(process.execPath, [join(ROOT, `dist/apps/${name}/apps/${name}/src/main.js`)], {
    cwd: ROOT,
    env: { ...process.env, HTTP_PORT: String(port) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  started.apps.push({ name, child });
  return child;
}

function getJson(port, path) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, timeout: 3000 }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
  });
}

async function waitHealthy(name, port, child, timeoutMs = 60000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} during start-up`);
    const answer = await getJson(port, '/health').catch(() => null);
    if (answer && answer.status === 200) return answer.body;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`${name} did not report healthy on http://127.0.0.1:${port}/health within ${timeoutMs / 1000}s`);
}

async function stopAll() {
  for (const { name, child } of started.apps.reverse()) {
    if (child.exitCode !== null) continue;
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    log(`stopped ${name}`);
  }
  if (started.kafka) spawnSync('bash', [KAFKA, 'stop'], { stdio: 'inherit' });
}

async function main() {
  ensureKafka();
  await ensurePostgres();
  build();
  const consumerPort = Number(process.env.CONSUMER_HTTP_PORT || 3001);
  const producerPort = Number(process.env.PRODUCER_HTTP_PORT || 3000);
  const consumer = startApp('consumer-app', consumerPort);
  const producer = startApp('producer-app', producerPort);
  log(`consumer-app health: ${await waitHealthy('consumer-app', consumerPort, consumer)}`);
  log(`producer-app health: ${await waitHealthy('producer-app', producerPort, producer)}`);
  if (keep) {
    log('running; press Ctrl-C to stop');
    await new Promise((r) => process.once('SIGINT', r));
  }
}

main()
  .then(stopAll)
  .then(() => log('done'))
  .catch(async (err) => {
    process.stderr.write(`demo: FAILED: ${err.message}\n`);
    await stopAll();
    process.exit(1);
  });
