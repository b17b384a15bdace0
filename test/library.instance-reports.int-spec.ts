import { DataSource } from 'typeorm';
import { runInboxMigrations } from 'kafka-exactly-once/inbox/inbox-migrator';
import { PartitionSamples } from 'kafka-exactly-once/engine/partition-samples';
import { InstanceReporter, SAMPLE_SPANS } from 'kafka-exactly-once/reporting/instance-reporter';
import { readHistory } from 'kafka-exactly-once/admin/group-history';
import { groupPartitions, readInstances } from 'kafka-exactly-once/admin/group-instances';
import { dataSourceSql } from 'kafka-exactly-once/admin/sql-client';
import { OutboxOperations } from 'kafka-exactly-once/outbox/outbox-operations';
import type { ConsumerStatus } from 'kafka-exactly-once/engine/exactly-once.consumer';
import type { PartitionHealth } from 'kafka-exactly-once/engine/partition-progress';
import { createSuiteDatabase } from './support/database';

const partition = (topic: string, p: number, lag: number): PartitionHealth => ({
  topic,
  partition: p,
  activity: 'working',
  committedOffset: '10',
  highWatermark: String(10 + lag),
  lag,
  lastCommitAt: new Date().toISOString(),
  waitingMs: null,
  consecutiveFailures: 0,
  lastError: p === 1 ? { message: 'x'.repeat(5000), kind: 'infrastructure', at: new Date().toISOString() } : null,
  stalled: false,
  nextDueAt: null,
  unitsPerSecond: 1,
  recordsPerSecond: 2,
  commitLatencyMs: 3,
});

/**
 * The instances' reports and samples on a real PostgreSQL: what a report writes, how the buckets fold (counts kept,
 * p50 weighted by units, p99 and lag their highest), that two instances folding at once move each row once, that
 * a day of samples stays within the rows SAMPLE_SPANS states, and how the overview reads instances that report, went
 * silent or stopped.
 */
describe('library: instance reports and samples', () => {
  let dataSource: DataSource;
  const reporters: InstanceReporter[] = [];
  const reporter = (group: string, status: () => ConsumerStatus | undefined, samples = new PartitionSamples()) => {
    const made = new InstanceReporter(dataSource, { groupId: group, clientId: 'reports-suite', intervalMs: 1000 }, { status, startStatus: () => ({ phase: 'running' }), samples: () => samples, metrics: { outbox: () => ({ waiting: 7, oldestAgeMs: 1234 }) } });
    reporters.push(made);
    return made;
  };
  const query = (sql: string, params: unknown[] = []) => dataSource.query(sql, params);

  beforeAll(async () => {
    dataSource = await new DataSource({ type: 'postgres', url: await createSuiteDatabase('instance_reports') }).initialize();
    await runInboxMigrations(dataSource);
  });

  afterAll(async () => {
    await dataSource?.destroy();
  });

  it("writes the instance's state and its partitions' counts, in the bucket they happened in", async () => {
    const samples = new PartitionSamples();
    const status = (): ConsumerStatus => ({ state: 'running', groupId: 'g1', memberId: 'member-1', assignment: { orders: [0, 1] }, partitions: [partition('orders', 0, 5), partition('orders', 1, 0)], retryTiers: [] });
    const r = reporter('g1', status, samples);
    for (let i = 1; i <= 100; i++) samples.unit('orders', 0, 3, i);
    samples.deadLetter('orders', 1, true);
    await r.reportOnce();
    samples.unit('orders', 0, 1, 500);
    await r.reportOnce();

    const [row] = await query(`SELECT instance_id, interval_ms, stopped_at, report FROM kafka_eo_instances WHERE consumer_group = 'g1'`);
    expect(row).toMatchObject({ instance_id: r.instanceId, interval_ms: 1000, stopped_at: null });
    expect(row.report).toMatchObject({ memberId: 'member-1', consumer: { state: 'running' }, clientId: 'reports-suite', pid: process.pid });
    expect(row.report.memory.rssBytes).toBeGreaterThan(1_000_000);
    // An error of 5,000 characters is kept to 500: a row stays small whatever a partition's last error says.
    expect(row.report.partitions[1].lastError.message).toHaveLength(500);

    const rows = await query(`SELECT topic, partition, span_s, records::int, units::int, dead_letters::int, parks::int, lag::int, outbox_waiting::int FROM kafka_eo_samples WHERE consumer_group = 'g1' ORDER BY topic, partition`);
    const total = (topic: string, p: number, column: string) => rows.filter((x: any) => x.topic === topic && x.partition === p).reduce((n: number, x: any) => n + (x[column] ?? 0), 0);
    expect(total('orders', 0, 'records')).toBe(301);
    expect(total('orders', 0, 'units')).toBe(101);
    expect(total('orders', 1, 'dead_letters')).toBe(1);
    expect(total('orders', 1, 'parks')).toBe(1);
    expect(rows.filter((x: any) => x.topic === 'orders' && x.partition === 0).map((x: any) => x.lag)).toContain(5);
    expect(rows.find((x: any) => x.topic === '' && x.partition === -1)?.outbox_waiting).toBe(7);
    expect(new Set(rows.map((x: any) => x.span_s))).toEqual(new Set([10]));

    const history = await readHistory(dataSourceSql(dataSource), 'g1', { range: '15m' });
    const orders = history.series.find((s) => s.topic === 'orders')!;
    expect(orders.points.reduce((n, p) => n + p.recordsPerSecond * history.stepSeconds, 0)).toBeCloseTo(301, 5);
    expect(orders.points.reduce((n, p) => n + p.deadLetters, 0)).toBe(1);
    expect(Math.max(...orders.points.map((p) => p.unitP99Ms ?? 0))).toBeGreaterThanOrEqual(99);
    expect(history.outbox.at(-1)).toMatchObject({ waiting: 7, oldestAgeMs: 1234 });

    await r.stop();
    const [instance] = (await readInstances(dataSourceSql(dataSource), 'g1', r.instanceId, new Set(['member-1'])))!;
    expect(instance).toMatchObject({ instanceId: r.instanceId, self: true, status: 'stopped', inGroup: true });
  });

  it("reads the database's outbox backlog itself when this process runs no relay, every 30 s at most", async () => {
    await query(
      `INSERT INTO kafka_eo_outbox (id, aggregatetype, aggregateid, type, payload, headers, created_at) VALUES
         ('e-1', 'orders', '\\x01', 'Created', '\\x00', '\\x00', now() - interval '5 seconds'), ('e-2', 'orders', '\\x02', 'Created', '\\x00', '\\x00', now())`,
    );
    const outbox = new OutboxOperations(dataSourceSql(dataSource));
    const r = new InstanceReporter(dataSource, { groupId: 'g5', clientId: 'reports-suite', intervalMs: 1000 }, { status: () => undefined, startStatus: () => ({ phase: 'starting' }), samples: () => undefined, metrics: {}, outboxBacklog: () => outbox.backlog() });
    reporters.push(r);
    await r.reportOnce();
    await r.reportOnce(); // within 30 s of the first: not read again
    const rows = await query(`SELECT outbox_waiting::int AS waiting, outbox_oldest_ms::int AS oldest FROM kafka_eo_samples WHERE consumer_group = 'g5' AND partition = -1`);
    expect(rows).toHaveLength(1);
    expect(rows[0].waiting).toBe(2);
    expect(rows[0].oldest).toBeGreaterThanOrEqual(5000);
    await query(`DELETE FROM kafka_eo_outbox`);
  });

  it('folds aged buckets into longer ones, keeping the counts, and deletes what is past a day', async () => {
    // Six 10 s rows two hours ago (one minute), two 1 min rows seven hours ago (one 5 min bucket), a 5 min row 26 h ago, a row now.
    await query(
      `INSERT INTO kafka_eo_samples (consumer_group, topic, partition, span_s, at, records, units, dead_letters, parks, retry_moves, lag, unit_p50_ms, unit_p99_ms)
       SELECT 'g2', 'orders', 0, 10, to_timestamp(floor(extract(epoch FROM now() - interval '2 hours') / 60) * 60) + n * interval '10 s', 10 * n, n, 1, 0, 2, 100 * n, n * 10, n * 100
       FROM generate_series(0, 5) n`,
    );
    await query(
      `INSERT INTO kafka_eo_samples (consumer_group, topic, partition, span_s, at, records, units, dead_letters, parks, retry_moves, lag, unit_p50_ms, unit_p99_ms)
       SELECT 'g2', 'orders', 0, 60, to_timestamp(floor(extract(epoch FROM now() - interval '7 hours') / 300) * 300) + n * interval '1 min', 50, 5, 0, 1, 0, 7 + n, 4 + n, 40 + n
       FROM generate_series(0, 1) n`,
    );
    await query(`INSERT INTO kafka_eo_samples (consumer_group, topic, partition, span_s, at, records, units) VALUES ('g2', 'orders', 0, 300, now() - interval '26 hours', 999, 9), ('g2', 'orders', 0, 10, now(), 3, 1)`);
    // Two instances fold at once: each row moves once.
    await Promise.all([reporter('g2', () => undefined).fold(), reporter('g2', () => undefined).fold()]);

    const rows = await query(`SELECT span_s, records::int, units::int, dead_letters::int, parks::int, retry_moves::int, lag::int, unit_p50_ms, unit_p99_ms FROM kafka_eo_samples WHERE consumer_group = 'g2' ORDER BY at`);
    expect(rows).toEqual([
      // 7 h ago: the two 1 min rows, one 5 min row.
      { span_s: 300, records: 100, units: 10, dead_letters: 0, parks: 2, retry_moves: 0, lag: 8, unit_p50_ms: 4.5, unit_p99_ms: 41 },
      // 2 h ago: the six 10 s rows, one 1 min row; p50 weighted by units (sum n * 10n / sum n = 10 * 55 / 15).
      { span_s: 60, records: 150, units: 15, dead_letters: 6, parks: 0, retry_moves: 12, lag: 500, unit_p50_ms: expect.closeTo(36.67, 1), unit_p99_ms: 500 },
      { span_s: 10, records: 3, units: 1, dead_letters: 0, parks: 0, retry_moves: 0, lag: null, unit_p50_ms: null, unit_p99_ms: null },
    ]);
  });

  it('keeps a day of 10 s samples within the rows it states per partition, the day counted whole', async () => {
    // A day and two hours of a report every 10 s for one partition, 1 record each.
    await query(
      `INSERT INTO kafka_eo_samples (consumer_group, topic, partition, span_s, at, records, units)
       SELECT 'g3', 'orders', 0, 10, to_timestamp(floor(extract(epoch FROM now()) / 10) * 10) - n * interval '10 s', 1, 1 FROM generate_series(0, 26 * 360 - 1) n`,
    );
    await reporter('g3', () => undefined).fold();
    const [{ rows, kept, oldest }] = await query(`SELECT count(*)::int AS rows, sum(records)::int AS kept, extract(epoch FROM now() - min(at)) / 3600 AS oldest FROM kafka_eo_samples WHERE consumer_group = 'g3'`);
    const bound = SAMPLE_SPANS.reduce((n, s, i) => n + Math.ceil((s.keepS - (i === 0 ? 0 : SAMPLE_SPANS[i - 1].keepS)) / s.spanS) + 1, 0);
    expect(rows).toBeLessThanOrEqual(bound);
    expect(bound).toBeLessThan(1000);
    // What is younger than 25 h is all there (to the 5 min bucket at the edge).
    expect(kept).toBeGreaterThanOrEqual(25 * 360 - 30);
    expect(Number(oldest)).toBeLessThan(25.1);
    const day = await readHistory(dataSourceSql(dataSource), 'g3', { range: '24h' });
    expect(day.series[0].points.length).toBeLessThanOrEqual(24 * 6 + 1);
    expect(day.series[0].points.reduce((n, p) => n + p.recordsPerSecond * day.stepSeconds, 0)).toBeGreaterThanOrEqual(24 * 360 - 60);
  });

  it('tells a member that went silent from one that reports, and shows each partition once, by the one that reports', async () => {
    const a = reporter('g4', () => ({ state: 'running', groupId: 'g4', memberId: 'm-a', assignment: {}, partitions: [partition('orders', 0, 1), partition('orders', 1, 2)], retryTiers: [] }));
    const b = reporter('g4', () => ({ state: 'running', groupId: 'g4', memberId: 'm-b', assignment: {}, partitions: [partition('orders', 1, 9), partition('orders', 2, 3)], retryTiers: [] }));
    await a.reportOnce();
    await b.reportOnce();
    // b last reported a minute ago: it went silent (killed); a took its partition 1 since.
    await query(`UPDATE kafka_eo_instances SET reported_at = now() - interval '1 minute' WHERE instance_id = $1`, [b.instanceId]);
    const instances = (await readInstances(dataSourceSql(dataSource), 'g4', a.instanceId, new Set(['m-a'])))!;
    expect(instances.map((i) => [i.instanceId, i.status, i.self, i.inGroup])).toEqual([
      [a.instanceId, 'reporting', true, true],
      [b.instanceId, 'silent', false, false],
    ]);
    expect(groupPartitions(instances).map((p) => [p.partition, p.instanceId, p.instanceStatus, p.lag])).toEqual([
      [0, a.instanceId, 'reporting', 1],
      [1, a.instanceId, 'reporting', 2],
      [2, b.instanceId, 'silent', 3],
    ]);
  });
});
