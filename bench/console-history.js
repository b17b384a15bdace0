#!/usr/bin/env node
'use strict';
/**
 * `node bench/console-history.js [--partitions 12] [--instances 2] [--reports 200]`: what the instances' reports and
 * the samples behind the console's charts cost PostgreSQL (docs/benchmarks.md, "The console's history"). In a fresh
 * database, with the library's build (dist/; build first):
 * - one report as an instance writes it (its row of kafka_eo_instances and a sample row per partition, one
 *   statement), `--reports` times with `--partitions` partitions: its median and p99 time, and the bytes of WAL
 *   it writes;
 * - a full day of samples at a report every 10 s for each partition (and the outbox), written as reports write
 *   them, then folded by the library's own fold: the rows and bytes the table keeps (its steady state) against what
 *   SAMPLE_SPANS states;
 * - the console's reads on that day: the history of each range (per topic, per partition) and the overview's read
 *   of the instances, each the median of five, with the blocks read under EXPLAIN (ANALYZE, BUFFERS).
 * From these: statements per second and rows written per day for `--instances` instances at the default interval.
 */
const path = require('path');
const { randomUUID } = require('crypto');

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def);
const PARTITIONS = Number(opt('--partitions', '12'));
const INSTANCES = Number(opt('--instances', '2'));
const REPORTS = Number(opt('--reports', '200'));
const serverUrl = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const lib = path.join(__dirname, '../dist/libs/kafka-exactly-once');
const load = (file) => require(path.join(lib, file));
const { DataSource } = require('typeorm');
const { runInboxMigrations } = load('inbox/inbox-migrator');
const { InstanceReporter, SAMPLE_SPANS } = load('reporting/instance-reporter');
const { PartitionSamples } = load('engine/partition-samples');
const { readHistory } = load('admin/group-history');
const { readInstances } = load('admin/group-instances');
const { dataSourceSql } = load('admin/sql-client');

const withDatabase = (url, name) => {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p99 = (xs) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(xs.length * 0.99) - 1)];
const ms = (x) => `${x.toFixed(2)} ms`;
const kib = (b) => `${(b / 1024).toFixed(0)} KiB`;

async function main() {
  const name = `keo_history_bench_${randomUUID().slice(0, 8)}`;
  const server = await new DataSource({ type: 'postgres', url: serverUrl }).initialize();
  await server.query(`CREATE DATABASE ${name}`);
  const dataSource = await new DataSource({ type: 'postgres', url: withDatabase(serverUrl, name) }).initialize();
  try {
    await runInboxMigrations(dataSource, { log() {}, warn() {}, error() {} });
    const group = 'bench-group';
    const topics = ['payments', 'payments.retry.1'];
    const assigned = Array.from({ length: PARTITIONS }, (_, i) => ({ topic: topics[i % 2 === 0 || PARTITIONS < 4 ? 0 : 1], partition: Math.floor(i / 2) }));
    const health = (p) => ({ ...p, activity: 'working', committedOffset: '1000', highWatermark: '1010', lag: 10, lastCommitAt: new Date().toISOString(), waitingMs: null, consecutiveFailures: 0, lastError: null, stalled: false, nextDueAt: null, unitsPerSecond: 50, recordsPerSecond: 400, commitLatencyMs: 6 });
    const samples = new PartitionSamples();
    const reporter = new InstanceReporter(dataSource, { groupId: group, clientId: 'bench', intervalMs: 10000 }, {
      status: () => ({ state: 'running', groupId: group, memberId: 'member-1', assignment: {}, partitions: assigned.map(health), retryTiers: [] }),
      startStatus: () => ({ phase: 'running' }),
      samples: () => samples,
      metrics: { outbox: () => ({ waiting: 12, oldestAgeMs: 800 }) },
    });

    // One report, as an instance writes it.
    const times = [];
    const [{ lsn: before }] = await dataSource.query(`SELECT pg_current_wal_lsn() AS lsn`);
    for (let i = 0; i < REPORTS; i++) {
      for (const p of assigned) for (let u = 0; u < 50; u++) samples.unit(p.topic, p.partition, 8, 5 + (u % 7));
      const started = process.hrtime.bigint();
      await reporter.reportOnce();
      times.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
    const [{ bytes: walBytes }] = await dataSource.query(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint AS bytes`, [before]);
    const [{ n: reportRows }] = await dataSource.query(`SELECT count(*)::int AS n FROM kafka_eo_samples`);

    // A day of samples of this group, as its reports write them, then folded by the library's fold.
    await dataSource.query(`DELETE FROM kafka_eo_samples`);
    const day = 25 * 360 + 60;
    await dataSource.query(
      `INSERT INTO kafka_eo_samples (consumer_group, topic, partition, span_s, at, records, units, dead_letters, parks, retry_moves, lag, unit_p50_ms, unit_p99_ms, outbox_waiting, outbox_oldest_ms)
       SELECT $1, t.topic, t.partition, 10, to_timestamp(floor(extract(epoch FROM now()) / 10) * 10) - n * interval '10 s',
              CASE WHEN t.partition >= 0 THEN 4000 ELSE 0 END, CASE WHEN t.partition >= 0 THEN 500 ELSE 0 END, CASE WHEN t.partition >= 0 AND n % 360 = 0 THEN 1 ELSE 0 END, 0, 0, CASE WHEN t.partition >= 0 THEN 10 END,
              CASE WHEN t.partition >= 0 THEN 5.5 END, CASE WHEN t.partition >= 0 THEN 11 END, CASE WHEN t.partition < 0 THEN 12 END, CASE WHEN t.partition < 0 THEN 800 END
       FROM generate_series(0, $2::int - 1) n, unnest($3::text[], $4::int[]) AS t(topic, partition)`,
      [group, day, [...assigned.map((p) => p.topic), ''], [...assigned.map((p) => p.partition), -1]],
    );
    const [{ n: written }] = await dataSource.query(`SELECT count(*)::int AS n FROM kafka_eo_samples`);
    const foldStarted = process.hrtime.bigint();
    await reporter.fold();
    const foldMs = Number(process.hrtime.bigint() - foldStarted) / 1e6;
    await dataSource.query(`VACUUM ANALYZE kafka_eo_samples`);
    const [{ bytes: churned }] = await dataSource.query(`SELECT pg_total_relation_size('kafka_eo_samples')::bigint AS bytes`);
    // The live rows' size: what the table holds once its space is reused (autovacuum), not its file after a day written at once.
    await dataSource.query(`VACUUM FULL ANALYZE kafka_eo_samples`);
    const [{ n: kept, bytes }] = await dataSource.query(`SELECT count(*)::int AS n, pg_total_relation_size('kafka_eo_samples')::bigint AS bytes FROM kafka_eo_samples`);
    const bound = SAMPLE_SPANS.reduce((n, s, i) => n + Math.ceil((s.keepS - (i === 0 ? 0 : SAMPLE_SPANS[i - 1].keepS)) / s.spanS) + 1, 0);

    // The console's reads on that day.
    const sql = dataSourceSql(dataSource);
    const timed = async (read) => {
      const runs = [];
      for (let i = 0; i < 5; i++) {
        const started = process.hrtime.bigint();
        await read();
        runs.push(Number(process.hrtime.bigint() - started) / 1e6);
      }
      return median(runs);
    };
    const blocksOf = async (read) => {
      const statements = [];
      const explaining = { query: async (text, params) => {
        if (/^\s*(WITH|SELECT)/i.test(text) && !/to_regclass/.test(text)) {
          const [plan] = (await dataSource.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, params))[0]['QUERY PLAN'];
          if (process.env.SHOW_PLANS) console.log(JSON.stringify(plan.Plan, ['Node Type', 'Index Name', 'Plans', 'Shared Hit Blocks', 'Actual Rows'], 1).slice(0, 1500));
          statements.push(plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks']);
        }
        return sql.query(text, params);
      } };
      await read(explaining);
      return statements.reduce((a, b) => a + b, 0);
    };
    const reads = [];
    for (const range of ['15m', '1h', '6h', '24h']) {
      reads.push([`history ${range}, per topic`, (s = sql) => readHistory(s, group, { range })]);
      reads.push([`history ${range}, one partition`, (s = sql) => readHistory(s, group, { range, topic: 'payments', partition: 0 })]);
    }
    reads.push(['instances (overview)', (s = sql) => readInstances(s, group, undefined, new Set())]);

    console.log(`instance reports and samples: ${PARTITIONS} partitions per instance (and the outbox), PostgreSQL ${(await dataSource.query('SHOW server_version'))[0].server_version}`);
    console.log(`one report (1 statement: the instance's row, ${PARTITIONS + 1} sample rows): median ${ms(median(times))}, p99 ${ms(p99(times))} over ${REPORTS}; ${Math.round(walBytes / REPORTS)} bytes of WAL each; ${reportRows} rows after ${REPORTS} reports in 10 s buckets`);
    console.log(`a day: ${written} rows written by reports (${PARTITIONS + 1} a report, 8,640 reports a day at 10 s); after the fold (${ms(foldMs)}): ${kept} rows, ${kib(Number(bytes))} with indexes (${kib(Number(churned))} before VACUUM FULL: the file of a day written at once) (${(kept / (PARTITIONS + 1)).toFixed(0)} per partition; SAMPLE_SPANS' bound ${bound})`);
    for (const [label, read] of reads) console.log(`  ${label.padEnd(30)} median ${ms(await timed(() => read()))}, ${await blocksOf(read)} blocks`);
    const perSecond = INSTANCES / 10 + (INSTANCES * 4) / 60;
    console.log(`${INSTANCES} instances at the default 10 s: ${perSecond.toFixed(2)} statements/s (a report each every 10 s, a fold of 4 statements each a minute); ${(INSTANCES * 8640).toLocaleString('en-US')} instance-row updates and ${(INSTANCES * PARTITIONS * 8640).toLocaleString('en-US')} sample rows written a day, ${kept.toLocaleString('en-US')} kept`);
  } finally {
    await dataSource.destroy();
    if (!argv.includes('--keep')) await server.query(`DROP DATABASE ${name}`);
    await server.destroy();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
