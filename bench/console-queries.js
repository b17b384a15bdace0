#!/usr/bin/env node
'use strict';
/**
 * `node bench/console-queries.js [--rows 1000000] [--database NAME] [--keep] [--source] [--library DIR]`: what each
 * request of the operator console (the admin API, `kafka-eo`) costs PostgreSQL on a large inbox. Fills a fresh
 * database (or reuses `--database`, filled by an earlier run) with `--rows` inbox rows of one group (1 in 100
 * dead-lettered, 1 in 100 on a retry tier, keys acct-0 .. acct-4999), a parked key with 10,000 records and 99 with
 * 10 (each parked record with its inbox row, as parking writes them), 10,000 events waiting in the outbox and 1,000
 * set aside; applies the library's migrations not applied yet, timed (on a database filled by an earlier version,
 * that is the upgrade's cost); then runs each request once with every statement under EXPLAIN (ANALYZE, BUFFERS) and
 * five times plainly, and prints per request: its statements, their execution time in PostgreSQL, the blocks they
 * read, the whole tables they scanned, and the median time of the request. The overview is read as the admin
 * module reads it, with the inbox and outbox health indicators it asks. The library is loaded from dist/ (build
 * first), with `--source` from libs/kafka-exactly-once/src, or from `--library DIR` (an earlier version's sources
 * with `--source`, or its build).
 *
 * Before and after a change of the queries: run the old code with `--keep` (e.g. `git archive <commit>
 * libs/kafka-exactly-once/src | tar -x -C .old` and `--source --library .old/libs/kafka-exactly-once/src`), then the
 * new one with `--database` naming the database the first run printed (the new migrations are applied and timed on
 * its rows).
 */
const fs = require('fs');
const path = require('path');
const { randomUUID } = require('crypto');

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def);
const rows = Number(opt('--rows', '1000000'));
const serverUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

if (argv.includes('--source')) {
  const ts = require('typescript');
  require.extensions['.ts'] = (module, filename) => {
    const { outputText } = ts.transpileModule(fs.readFileSync(filename, 'utf8'), {
      fileName: filename,
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, experimentalDecorators: true, emitDecoratorMetadata: true, esModuleInterop: true },
    });
    module._compile(outputText, filename);
  };
}
const lib = opt('--library') ? path.resolve(opt('--library')) : argv.includes('--source') ? path.join(__dirname, '../libs/kafka-exactly-once/src') : path.join(__dirname, '../dist/libs/kafka-exactly-once');
const load = (file) => require(path.join(lib, file));
const { Pool } = require('pg');
const { DataSource } = require('typeorm');
const { OperatorStore } = load('admin/operator-store');
const { MessageStories } = load('admin/message-story');
const { OperatorOverview } = load('admin/operator-overview');
const { BulkOperations } = load('admin/bulk/bulk-operations');
const { pgPoolSql } = load('admin/sql-client');
const { OutboxOperations } = load('outbox/outbox-operations');
const { InboxHealthIndicator } = load('health/inbox.health-indicator');
const { OutboxHealthIndicator } = load('health/outbox.health-indicator');
const { runInboxMigrations } = load('inbox/inbox-migrator');
const { KAFKA_EXACTLY_ONCE_MIGRATIONS } = load('inbox/migrations');

const withDatabase = (url, name) => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};

/** The migrations before the operator tools' indexes (what an earlier version left), then the rows. */
async function fill(dataSource) {
  const runner = dataSource.createQueryRunner();
  await runner.query(`CREATE TABLE IF NOT EXISTS kafka_eo_migrations (name text PRIMARY KEY, run_at timestamptz NOT NULL DEFAULT now())`);
  for (const Migration of KAFKA_EXACTLY_ONCE_MIGRATIONS) {
    const migration = new Migration();
    if (Number(/([0-9]{13})$/.exec(migration.name)[1]) >= 1764400900000) continue;
    await migration.up(runner);
    await runner.query(`INSERT INTO kafka_eo_migrations (name) VALUES ($1)`, [migration.name]);
  }
  await runner.release();
  const started = Date.now();
  const letter = (topic) => `jsonb_build_array(jsonb_build_object('topic', '${topic}', 'key', encode(convert_to('acct-' || (n % 5000), 'UTF8'), 'base64'), 'value', encode(convert_to(repeat('v', 120), 'UTF8'), 'base64'), 'h', '[]'::jsonb))`;
  for (let from = 1; from <= rows; from += 100000) {
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, claimed_at, processed_at, dlq_reason, dlq_error)
       SELECT 'g', 'payments', sha256(convert_to('m-' || n, 'UTF8')), 'm-' || n, 'payments', n % 12, n / 12,
              CASE n % 100 WHEN 0 THEN 'dead-lettered' WHEN 1 THEN 'retrying' ELSE 'processed' END, 1,
              CASE n % 100 WHEN 0 THEN ${letter('payments.dlq')} WHEN 1 THEN ${letter('payments.retry.1')} ELSE '[{"unit": "1"}]'::jsonb END,
              now() - interval '1 day' + n * interval '50 ms', now() - interval '1 day' + n * interval '50 ms',
              CASE WHEN n % 100 = 0 THEN 'handler-failed' END, CASE WHEN n % 100 = 0 THEN '{"name": "Error", "message": "refused"}'::jsonb END
       FROM generate_series($1::int, $2::int) n`,
      [from, Math.min(rows, from + 99999)],
    );
  }
  // 100 parked keys: acct-parked-0 with 10,000 records waiting, the others with 10; each record's inbox row as the
  // unit that parked it wrote it (a dead letter of the key, status parked, processed when it was parked).
  await dataSource.query(
    `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, claimed_at, processed_at, dlq_reason)
     SELECT 'g', 'payments', sha256(convert_to('pr-' || k || '-' || n, 'UTF8')), 'pr-' || k || '-' || n, 'payments', 100, 10000000 + k * 100000 + n, 'parked', 1,
            jsonb_build_array(jsonb_build_object('topic', 'payments.dlq', 'key', encode(convert_to('acct-parked-' || k, 'UTF8'), 'base64'), 'value', NULL, 'h', '[]'::jsonb)),
            now() - interval '2 hours' + n * interval '10 ms', now() - interval '2 hours' + n * interval '10 ms', 'key-parked'
     FROM generate_series(0, 99) k, generate_series(1, 10000) n WHERE k = 0 OR n <= 10`,
  );
  await dataSource.query(
    `INSERT INTO kafka_eo_parked_keys (consumer_group, topic, key_digest, ordering_key, reason, partition, "offset", message_id, parked_at)
     SELECT 'g', 'payments', sha256(convert_to('acct-parked-' || k, 'UTF8')), 'acct-parked-' || k, 'handler-failed', 0, k, 'p-' || k, now() - k * interval '1 s' FROM generate_series(0, 99) k`,
  );
  await dataSource.query(
    `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, record_key, value, reason, parked_at)
     SELECT 'g', 'payments', sha256(convert_to('acct-parked-' || k, 'UTF8')), 100, 10000000 + k * 100000 + n, 'payments', sha256(convert_to('pr-' || k || '-' || n, 'UTF8')), 'pr-' || k || '-' || n,
            convert_to('acct-parked-' || k, 'UTF8'), convert_to(repeat('v', 120), 'UTF8'), 'key-parked', now() - interval '2 hours' + n * interval '10 ms'
     FROM generate_series(0, 99) k, generate_series(1, 10000) n WHERE k = 0 OR n <= 10`,
  );
  await dataSource.query(
    `INSERT INTO kafka_eo_outbox (id, aggregatetype, aggregateid, type, payload, headers)
     SELECT 'ob-' || n, 'payments', convert_to('acct-' || (n % 5000), 'UTF8'), 'test.Payment', convert_to(repeat('v', 120), 'UTF8'), '\\x00'::bytea FROM generate_series(1, 10000) n`,
  );
  await dataSource.query(
    `INSERT INTO kafka_eo_outbox_set_aside (position, id, aggregatetype, aggregateid, type, payload, headers, created_at, reason)
     SELECT 100000000 + n, 'sa-' || n, 'payments', convert_to('acct-' || (n % 5000), 'UTF8'), 'test.Payment', '\\x00'::bytea, '\\x00'::bytea, now(), 'too large' FROM generate_series(1, 1000) n`,
  );
  return Date.now() - started;
}

function explaining(pool) {
  const base = pgPoolSql(pool);
  const statements = [];
  const walk = (node, found) => {
    if (node['Node Type'] === 'Seq Scan' && /^kafka_eo_(inbox|outbox|outbox_set_aside|parked_records)$/.test(node['Relation Name'])) found.add(node['Relation Name']);
    for (const child of node.Plans || []) walk(child, found);
    return found;
  };
  const sql = {
    query: async (text, params) => {
      if (/^\s*(SELECT|WITH)\b/i.test(text)) {
        const { rows: [row] } = await pool.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, params);
        const [plan] = row['QUERY PLAN'];
        statements.push({ ms: plan['Planning Time'] + plan['Execution Time'], blocks: plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks'], scans: [...walk(plan.Plan, new Set())] });
      }
      return base.query(text, params);
    },
    transaction: (work) => base.transaction(work),
  };
  return { sql, statements };
}

(async () => {
  const admin = new Pool({ connectionString: serverUrl, max: 1 });
  let name = opt('--database');
  const fresh = !name;
  if (fresh) {
    name = `keo_bench_console_${randomUUID().slice(0, 8)}`;
    await admin.query(`CREATE DATABASE ${name}`);
  }
  const url = withDatabase(serverUrl, name);
  const dataSource = await new DataSource({ type: 'postgres', url }).initialize();
  const pool = new Pool({ connectionString: url, max: 4 });
  try {
    if (fresh) console.log(`database ${name}: ${rows.toLocaleString('en-US')} inbox rows written in ${((await fill(dataSource)) / 1000).toFixed(1)} s`);
    const before = new Set((await dataSource.query(`SELECT name FROM kafka_eo_migrations`)).map((r) => r.name));
    let started = Date.now();
    await runInboxMigrations(dataSource, { log: () => undefined });
    const applied = (await dataSource.query(`SELECT name FROM kafka_eo_migrations`)).map((r) => r.name).filter((n) => !before.has(n));
    console.log(`migrations applied: ${applied.join(', ') || 'none'} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    started = Date.now();
    await dataSource.query(`VACUUM ANALYZE`);
    console.log(`VACUUM ANALYZE in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const [{ size }] = await dataSource.query(`SELECT pg_size_pretty(pg_total_relation_size('kafka_eo_inbox')) AS size`);
    console.log(`kafka_eo_inbox with its indexes: ${size}\n`);

    const firstLetters = await new OperatorStore(pgPoolSql(pool), 'g').listDeadLetters({});
    const bigKey = await new MessageStories(pgPoolSql(pool), new OperatorStore(pgPoolSql(pool), 'g')).story({ key: 'acct-parked-0' });
    const requests = [
      ['overview (counts, outbox, health)', async (sql) => {
        // The health indicators ask through a query runner of their own: here, on the measured statements.
        const runners = { createQueryRunner: () => ({ query: (text, params) => sql.query(text, params || []), release: async () => undefined }) };
        // An instance that reports: the overview reads the group's instances too.
        const lifecycle = { groupId: 'g', instanceId: 'bench-instance', getDatabase: () => runners, getDataSource: () => runners, status: () => undefined, startStatus: () => ({ phase: 'starting' }) };
        const inbox = new InboxHealthIndicator(lifecycle);
        const outbox = new OutboxHealthIndicator({ outbox: { unhealthyAgeMs: 60000 } }, lifecycle, { relayStatus: () => undefined });
        const overview = new OperatorOverview({
          lifecycle,
          kafka: { admin: () => ({ connect: () => Promise.reject(new Error('not asked')), disconnect: async () => undefined }) },
          sql,
          outbox: new OutboxOperations(sql),
          indicators: { inbox: () => inbox.isHealthy('inbox', { timeoutMs: 60000 }), outbox: () => outbox.isHealthy('outbox', { timeoutMs: 60000 }) },
        });
        await overview.read();
        await overview.close();
      }],
      ['story by message id', (sql) => new MessageStories(sql, new OperatorStore(sql, 'g')).story({ messageId: 'm-500000' })],
      ['story by key', (sql) => new MessageStories(sql, new OperatorStore(sql, 'g')).story({ key: 'acct-700' })],
      ['story by key (10,000 parked records)', (sql) => new MessageStories(sql, new OperatorStore(sql, 'g')).story({ key: 'acct-parked-0' })],
      ['its next page', (sql) => new MessageStories(sql, new OperatorStore(sql, 'g')).story({ key: 'acct-parked-0', after: bigKey.next })],
      ['story by coordinates', (sql) => new MessageStories(sql, new OperatorStore(sql, 'g')).story({ topic: 'payments', partition: 4, offset: '41666' })],
      ['dead letters, first page', (sql) => new OperatorStore(sql, 'g').listDeadLetters({})],
      ['dead letters, next page', (sql) => new OperatorStore(sql, 'g').listDeadLetters({ after: firstLetters.next })],
      ['dead letters of a key', (sql) => new OperatorStore(sql, 'g').listDeadLetters({ key: 'acct-700' })],
      ['dead letters of a key (10,000)', (sql) => new OperatorStore(sql, 'g').listDeadLetters({ key: 'acct-parked-0' })],
      ['a dead letter', (sql) => new OperatorStore(sql, 'g').showDeadLetter(firstLetters.items[0].id)],
      ['retry tiers', (sql) => new OperatorStore(sql, 'g').listRetrying({})],
      ['parked keys', (sql) => new OperatorStore(sql, 'g').listParkedKeys({})],
      ['a parked key (10,000 records)', (sql) => new OperatorStore(sql, 'g').showParkedKey('payments', 'acct-parked-0')],
      ["dead letters of a chart's step (10 s)", (sql) => new OperatorStore(sql, 'g').listDeadLetters({ from: new Date(Date.now() - 43200000).toISOString(), to: new Date(Date.now() - 43190000).toISOString() })],
      ['bulk dry run: dead letters of a topic', (sql) => new BulkOperations(sql, 'g').dryRun('dead-letters', 'replay', { topic: 'payments' })],
      ['bulk dry run: dead letters by error text', (sql) => new BulkOperations(sql, 'g').dryRun('dead-letters', 'replay', { error: 'refused' })],
      ['bulk dry run: parked keys of a topic', (sql) => new BulkOperations(sql, 'g').dryRun('parked-keys', 'release', { topic: 'payments' })],
    ];
    const table = [];
    for (const [label, request] of requests) {
      const { sql, statements } = explaining(pool);
      await request(sql);
      const times = [];
      for (let i = 0; i < 5; i++) {
        const at = process.hrtime.bigint();
        await request(pgPoolSql(pool));
        times.push(Number(process.hrtime.bigint() - at) / 1e6);
      }
      times.sort((a, b) => a - b);
      table.push({
        request: label,
        statements: statements.length,
        'in PostgreSQL (ms)': statements.reduce((n, s) => n + s.ms, 0).toFixed(1),
        blocks: statements.reduce((n, s) => n + s.blocks, 0),
        'whole tables read': [...new Set(statements.flatMap((s) => s.scans))].join(' ') || '-',
        'request, median (ms)': times[2].toFixed(1),
      });
    }
    console.table(table);
  } finally {
    await pool.end();
    await dataSource.destroy();
    if (!argv.includes('--keep') && fresh) await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    else console.log(`kept database ${name}`);
    await admin.end();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
