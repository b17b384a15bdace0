import { Logger } from '@nestjs/common';
import { randomBytes } from 'crypto';
import { hostname } from 'os';
import { monitorEventLoopDelay, type IntervalHistogram } from 'perf_hooks';
import type { SessionSource } from '../database/database.port';
import { queryWithin } from '../engine/clean-release';
import { withDeadline } from '../engine/deadline';
import type { ConsumerStatus } from '../engine/exactly-once.consumer';
import type { PartitionHealth } from '../engine/partition-progress';
import { SAMPLE_BUCKET_MS, type PartitionSamples, type PartitionTally } from '../engine/partition-samples';
import { INSTANCES_TABLE, SAMPLES_TABLE } from '../kafka-exactly-once.constants';
import type { MetricsSources } from '../metrics/kafka-exactly-once.metrics';
import { LIBRARY_VERSION } from './library-version';

/** What an instance writes of itself (`kafka_eo_instances.report`), read by the console of any instance. */
export interface InstanceReport {
  instanceId: string;
  host: string;
  pid: number;
  clientId: string;
  /** The library's version, and Node.js's. */
  version: string;
  node: string;
  /** Its member id in the group (null until it joined). */
  memberId: string | null;
  consumer: { state: string; lastError: string | null };
  memory: { rssBytes: number; heapUsedBytes: number };
  /** The event loop's delay over the last interval (ms). */
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /** Its partitions by topic, as the group assigned them (fetched from or not yet). */
  assignment: Record<string, number[]>;
  /** Its partitions as its own overview shows them, once fetched from (each last error cut to 500 characters). */
  partitions: PartitionHealth[];
  retryTiers: ConsumerStatus['retryTiers'];
  publisher: { breaker: string; spooled: number } | null;
}

/**
 * The buckets samples are kept in: 10 s rows for a little over an hour, folded into 1 min rows kept a little over
 * 6 h, folded into 5 min rows kept 25 h. Each chart reads rows no longer than its step (15 min and 1 h: 10 s;
 * 6 h: 1 min; 24 h: 5 min), so a bucket is never drawn across several points. At most 390 + 366 + 228 rows per
 * partition of the group (docs/console.md, "What the history costs").
 */
export const SAMPLE_SPANS = [
  { spanS: SAMPLE_BUCKET_MS / 1000, keepS: 65 * 60 },
  { spanS: 60, keepS: 6 * 3600 + 5 * 60 },
  { spanS: 300, keepS: 25 * 3600 },
] as const;

/** An instance that has not reported for this many of its intervals is shown as no longer reporting. */
export const STALE_INTERVALS = 3;
/** Rows of instances that stopped (or went silent) this long ago are deleted. */
const FORGET_INSTANCES_S = 24 * 3600;
/** Folding runs at most this often (whoever reports: each fold moves what is due, once, under row locks). */
const FOLD_EVERY_MS = 60000;
const STATEMENT_MS = 10000;
/** The start of the bucket of `seconds` that holds `at` (SQL; date_bin would need PostgreSQL 14). */
export const bucketOf = (at: string, seconds: string) => `to_timestamp(floor(extract(epoch FROM ${at}) / ${seconds}) * ${seconds})`;

/** How a bucket's row takes in another of the same bucket (a second report in it, or a fold). */
const MERGE = `records = s.records + EXCLUDED.records, units = s.units + EXCLUDED.units, dead_letters = s.dead_letters + EXCLUDED.dead_letters,
  parks = s.parks + EXCLUDED.parks, retry_moves = s.retry_moves + EXCLUDED.retry_moves, lag = GREATEST(s.lag, EXCLUDED.lag),
  unit_p50_ms = (COALESCE(s.unit_p50_ms * s.units, 0) + COALESCE(EXCLUDED.unit_p50_ms * EXCLUDED.units, 0)) / NULLIF(s.units + EXCLUDED.units, 0),
  unit_p99_ms = GREATEST(s.unit_p99_ms, EXCLUDED.unit_p99_ms), outbox_waiting = GREATEST(s.outbox_waiting, EXCLUDED.outbox_waiting),
  outbox_oldest_ms = GREATEST(s.outbox_oldest_ms, EXCLUDED.outbox_oldest_ms)`;

/**
 * The sample rows of one report: each partition's lag now (in the bucket of `now`), each tally in the bucket its
 * events happened in (one row where both meet), the outbox as topic '' partition -1.
 */
export function sampleRows(partitions: readonly PartitionHealth[], tallies: readonly PartitionTally[], outbox: { waiting: number; oldestAgeMs: number } | undefined, now: number) {
  const current = Math.floor(now / SAMPLE_BUCKET_MS) * SAMPLE_BUCKET_MS;
  const rows = new Map<string, { topic: string; partition: number; at: number; tally?: PartitionTally; lag: number | null; outbox?: { waiting: number; oldestAgeMs: number } }>();
  for (const p of partitions) rows.set(`${p.topic}\u0000${p.partition}\u0000${current}`, { topic: p.topic, partition: p.partition, at: current, lag: p.lag });
  for (const t of tallies) {
    const key = `${t.topic}\u0000${t.partition}\u0000${t.at}`;
    const row = rows.get(key);
    if (row) row.tally = t;
    else rows.set(key, { topic: t.topic, partition: t.partition, at: t.at, tally: t, lag: null });
  }
  if (outbox) rows.set(`\u0000-1\u0000${current}`, { topic: '', partition: -1, at: current, lag: null, outbox });
  return [...rows.values()];
}

export interface ReporterSources {
  status(): ConsumerStatus | undefined;
  /** The start's phase and last error, while the consumer is not running. */
  startStatus(): { phase: string; lastError?: string | null };
  samples(): PartitionSamples | undefined;
  metrics: MetricsSources;
  /**
   * The database's outbox backlog, read when this process runs no relay (whose own count comes from `metrics`);
   * undefined without an outbox. Asked at most every OUTBOX_READ_MS.
   */
  outboxBacklog?(): Promise<{ waiting: number; oldestAgeMs: number } | undefined>;
}

/** How often a report reads the outbox's backlog itself (a process without a relay): two capped counts and a row. */
const OUTBOX_READ_MS = 30000;

/**
 * Writes this instance's state (one row of `kafka_eo_instances`, replaced at each report) and its partitions'
 * counts (rows of `kafka_eo_samples`) every `intervalMs`, in one statement; once a minute, folds the samples that
 * aged into coarser buckets and deletes what is past 25 h. The console of any instance reads them: every member of
 * the group, and its last day in charts. Reporting never holds the consumer: a failure is logged (once per
 * outage) and the next report tries again; the counts of a report that failed are lost to the charts, nothing else.
 */
export class InstanceReporter {
  readonly instanceId = `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private readonly logger = new Logger('KafkaExactlyOnceReports');
  private readonly startedAt = new Date();
  private readonly loopDelay: IntervalHistogram = monitorEventLoopDelay({ resolution: 20 });
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private lastFold = 0;
  private failing = false;
  private stopped = false;
  private outboxReadAt = 0;

  constructor(
    private readonly dataSource: SessionSource,
    private readonly config: { groupId: string; clientId: string; intervalMs: number },
    private readonly sources: ReporterSources,
  ) {}

  start(): void {
    if (this.config.intervalMs <= 0 || this.timer || this.stopped) return;
    this.loopDelay.enable();
    this.timer = setInterval(() => void this.reportOnce(), this.config.intervalMs);
    this.timer.unref();
    void this.reportOnce();
  }

  /** Stops reporting; the last report says the instance stopped (the console shows it so, not as gone silent). */
  async stop(): Promise<void> {
    if (this.config.intervalMs <= 0 || this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.loopDelay.disable();
    // A shutdown waits for this at most STATEMENT_MS in all (a report or a fold in flight, then the last word).
    const last = (async () => {
      await this.running;
      await this.sql(`UPDATE ${INSTANCES_TABLE} SET stopped_at = now() WHERE consumer_group = $1 AND instance_id = $2`, [this.config.groupId, this.instanceId]);
    })();
    await withDeadline(last, STATEMENT_MS, 'PostgreSQL').catch((err: Error) => this.logger.warn(`the instance's last report (stopped) was not written: ${err.message}`));
  }

  /** One report (and a fold when one is due); never rejects. */
  reportOnce(): Promise<void> {
    this.running ??= this.report()
      .then(async () => {
        if (Date.now() - this.lastFold < FOLD_EVERY_MS) return;
        this.lastFold = Date.now();
        await this.fold();
      })
      .then(
        () => {
          if (this.failing) this.logger.log('instance reports are written again');
          this.failing = false;
        },
        (err: Error) => {
          if (!this.failing) this.logger.warn(`this instance's report for the console was not written (${err.message}); tried again every ${this.config.intervalMs} ms, the consumer is not affected`);
          this.failing = true;
        },
      )
      .finally(() => (this.running = undefined));
    return this.running;
  }

  /** What this instance reports now. */
  document(): InstanceReport {
    const status = this.sources.status();
    const start = this.sources.startStatus();
    const ms = (ns: number) => Math.round((Number.isFinite(ns) ? ns : 0) / 1e4) / 100;
    const publisher = this.sources.metrics.publisher?.();
    return {
      instanceId: this.instanceId,
      host: hostname(),
      pid: process.pid,
      clientId: this.config.clientId,
      version: LIBRARY_VERSION,
      node: process.version,
      memberId: status?.memberId ?? null,
      consumer: { state: status?.state ?? start.phase, lastError: (status?.lastError ?? start.lastError ?? null)?.slice(0, 1000) ?? null },
      memory: { rssBytes: process.memoryUsage.rss(), heapUsedBytes: process.memoryUsage().heapUsed },
      eventLoopDelayMs: { p50: ms(this.loopDelay.percentile(50)), p99: ms(this.loopDelay.percentile(99)), max: ms(this.loopDelay.max) },
      assignment: status?.assignment ?? {},
      partitions: (status?.partitions ?? []).map((p) => ({ ...p, lastError: p.lastError ? { ...p.lastError, message: p.lastError.message.slice(0, 500) } : null })),
      retryTiers: status?.retryTiers ?? [],
      publisher: publisher ? { breaker: publisher.breaker, spooled: publisher.spool.records } : null,
    };
  }

  private async report(): Promise<void> {
    const report = this.document();
    this.loopDelay.reset();
    const rows = sampleRows(report.partitions, this.sources.samples()?.take() ?? [], await this.outbox(), Date.now());
    const column = <T>(read: (row: (typeof rows)[number]) => T) => rows.map(read);
    await this.sql(
      `WITH instance AS (
         INSERT INTO ${INSTANCES_TABLE} AS i (consumer_group, instance_id, started_at, reported_at, interval_ms, stopped_at, report)
         VALUES ($1, $2, $3, now(), $4, NULL, $5::jsonb)
         ON CONFLICT (consumer_group, instance_id) DO UPDATE SET reported_at = now(), interval_ms = EXCLUDED.interval_ms, stopped_at = NULL, report = EXCLUDED.report
       )
       INSERT INTO ${SAMPLES_TABLE} AS s (consumer_group, topic, partition, span_s, at, records, units, dead_letters, parks, retry_moves, lag, unit_p50_ms, unit_p99_ms, outbox_waiting, outbox_oldest_ms)
       SELECT $1, r.topic, r.partition, 10, to_timestamp(r.at_ms / 1000.0), r.records, r.units, r.dead_letters, r.parks, r.retry_moves, r.lag, r.p50, r.p99, r.outbox_waiting, r.outbox_oldest_ms
       FROM unnest($6::text[], $7::int[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::real[], $15::real[], $16::bigint[], $17::bigint[], $18::bigint[])
         AS r(topic, partition, records, units, dead_letters, parks, retry_moves, lag, p50, p99, outbox_waiting, outbox_oldest_ms, at_ms)
       ON CONFLICT (consumer_group, span_s, at, topic, partition) DO UPDATE SET ${MERGE}`,
      [
        this.config.groupId,
        this.instanceId,
        this.startedAt.toISOString(),
        this.config.intervalMs,
        JSON.stringify(report),
        column((r) => r.topic),
        column((r) => r.partition),
        column((r) => r.tally?.records ?? 0),
        column((r) => r.tally?.units ?? 0),
        column((r) => r.tally?.deadLetters ?? 0),
        column((r) => r.tally?.parks ?? 0),
        column((r) => r.tally?.retryMoves ?? 0),
        column((r) => r.lag),
        column((r) => r.tally?.unitP50Ms ?? null),
        column((r) => r.tally?.unitP99Ms ?? null),
        column((r) => r.outbox?.waiting ?? null),
        column((r) => (r.outbox ? Math.round(r.outbox.oldestAgeMs) : null)),
        column((r) => r.at),
      ],
    );
  }

  /** The outbox's backlog: this process's relay's count, else the database's own every OUTBOX_READ_MS (none between). */
  private async outbox(): Promise<{ waiting: number; oldestAgeMs: number } | undefined> {
    const relayed = this.sources.metrics.outbox?.();
    if (relayed || !this.sources.outboxBacklog || Date.now() - this.outboxReadAt < OUTBOX_READ_MS) return relayed;
    this.outboxReadAt = Date.now();
    return withDeadline(this.sources.outboxBacklog(), STATEMENT_MS, 'PostgreSQL');
  }

  /**
   * Folds the group's rows that aged out of their bucket size into the next (each moved once: the DELETE's row
   * locks keep two instances folding at once from moving a row twice), and deletes what is past the last.
   */
  async fold(): Promise<void> {
    const group = this.config.groupId;
    for (let i = 0; i < SAMPLE_SPANS.length - 1; i++) {
      const [from, to] = [SAMPLE_SPANS[i], SAMPLE_SPANS[i + 1]];
      await this.sql(
        `WITH moved AS (
           DELETE FROM ${SAMPLES_TABLE} WHERE consumer_group = $1 AND span_s = $2 AND at < now() - make_interval(secs => $3) RETURNING *
         )
         INSERT INTO ${SAMPLES_TABLE} AS s (consumer_group, topic, partition, span_s, at, records, units, dead_letters, parks, retry_moves, lag, unit_p50_ms, unit_p99_ms, outbox_waiting, outbox_oldest_ms)
         SELECT consumer_group, topic, partition, $4, ${bucketOf('at', '$4::int')} AS bucket, sum(records), sum(units), sum(dead_letters), sum(parks), sum(retry_moves),
                max(lag), sum(unit_p50_ms * units) / NULLIF(sum(units), 0), max(unit_p99_ms), max(outbox_waiting), max(outbox_oldest_ms)
         FROM moved GROUP BY consumer_group, topic, partition, bucket
         ON CONFLICT (consumer_group, span_s, at, topic, partition) DO UPDATE SET ${MERGE}`,
        [group, from.spanS, from.keepS, to.spanS],
      );
    }
    const last = SAMPLE_SPANS[SAMPLE_SPANS.length - 1];
    await this.sql(`DELETE FROM ${SAMPLES_TABLE} WHERE consumer_group = $1 AND span_s = $2 AND at < now() - make_interval(secs => $3)`, [group, last.spanS, last.keepS]);
    await this.sql(`DELETE FROM ${INSTANCES_TABLE} WHERE consumer_group = $1 AND reported_at < now() - make_interval(secs => $2)`, [group, FORGET_INSTANCES_S]);
  }

  private sql(query: string, params: unknown[]): Promise<unknown> {
    return queryWithin(this.dataSource, query, params, STATEMENT_MS);
  }
}
