import { OperatorRequestError } from '../errors/operator-request.error';
import { SAMPLES_TABLE } from '../kafka-exactly-once.constants';
import { bucketOf, SAMPLE_SPANS } from '../reporting/instance-reporter';
import type { SqlClient } from './sql-client';

/** The ranges the console draws, each with its step (every row read is no longer than the step: SAMPLE_SPANS). */
export const HISTORY_RANGES = {
  '15m': { seconds: 15 * 60, stepS: 10 },
  '1h': { seconds: 3600, stepS: 20 },
  '6h': { seconds: 6 * 3600, stepS: 120 },
  '24h': { seconds: 24 * 3600, stepS: 600 },
} as const;
export type HistoryRange = keyof typeof HISTORY_RANGES;

export interface HistoryQuery {
  range: HistoryRange;
  topic?: string;
  partition?: number;
}

/** One step of a series. A step no instance reported in is absent (a gap in the chart), not zero. */
export interface HistoryPoint {
  /** The step's start (ISO 8601). */
  at: string;
  recordsPerSecond: number;
  /** Units of work committed per second (each one PostgreSQL and one Kafka commit). */
  commitsPerSecond: number;
  /** The highest lag reported in the step (a topic's: the sum of its partitions'); null when none was known. */
  lag: number | null;
  /** The units' durations (claim to Kafka commit): p50 averaged over the units, p99 the step's highest. */
  unitP50Ms: number | null;
  unitP99Ms: number | null;
  deadLetters: number;
  parks: number;
  retryMoves: number;
}

export interface HistoryDocument {
  range: HistoryRange;
  stepSeconds: number;
  from: string;
  to: string;
  /** Per topic (all its partitions), or per partition of `topic` when `partition` is given. Retry tiers are topics of their own. */
  series: Array<{ topic: string; partition: number | null; points: HistoryPoint[] }>;
  /** The outbox, as the relay of an instance counted it: waiting events and the oldest one's age. */
  outbox: Array<{ at: string; waiting: number; oldestAgeMs: number }>;
  /** The group's retry tiers (topics of their own in `series`), with the topic each retries. */
  retryTiers: Array<{ topic: string; retriesOf: string }>;
  /** Why there is no history at all (the table is not there: the library's migrations did not run); absent otherwise. */
  unavailable?: string;
}

/** A history request from a query string (`GET /kafka-eo/history?range=1h&topic=&partition=`). */
export function historyQuery(text: Record<string, string | undefined>): HistoryQuery {
  const range = (text.range ?? '1h') as HistoryRange;
  if (!Object.prototype.hasOwnProperty.call(HISTORY_RANGES, range)) throw new OperatorRequestError('invalid', `range must be one of ${Object.keys(HISTORY_RANGES).join(', ')}, got "${String(text.range).slice(0, 40)}"`, 'range');
  if (text.topic !== undefined && (text.topic.length === 0 || text.topic.length > 249)) throw new OperatorRequestError('invalid', 'topic must be a topic name (1 to 249 characters)', 'topic');
  let partition: number | undefined;
  if (text.partition !== undefined) {
    if (text.topic === undefined) throw new OperatorRequestError('invalid', 'partition needs its topic', 'partition');
    partition = /^[0-9]{1,9}$/.test(text.partition) ? Number(text.partition) : NaN;
    if (Number.isNaN(partition)) throw new OperatorRequestError('invalid', `partition must be a partition number, got "${text.partition.slice(0, 40)}"`, 'partition');
  }
  return { range, topic: text.topic, partition };
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

/**
 * The group's samples over a range, per topic or per partition, a step at a time: rates are counts over the step,
 * lags the highest reported (per partition, then summed over a topic's partitions). Reads the group's rows of the
 * range by its (consumer_group, at) index: at most the rows SAMPLE_SPANS keeps per partition, whatever the inbox.
 */
export async function readHistory(sql: SqlClient, groupId: string, query: HistoryQuery, retryTiers: HistoryDocument['retryTiers'] = []): Promise<HistoryDocument> {
  const { seconds, stepS } = HISTORY_RANGES[query.range];
  const [present] = await sql.query(`SELECT to_regclass($1) IS NOT NULL AS present, now() AS now`, [SAMPLES_TABLE]);
  if (!present.present) {
    const now = present.now instanceof Date ? present.now : new Date();
    return { range: query.range, stepSeconds: stepS, from: new Date(now.getTime() - seconds * 1000).toISOString(), to: now.toISOString(), series: [], outbox: [], retryTiers, unavailable: `${SAMPLES_TABLE} does not exist: the library's migration InstanceReports1764401300000 has not run` };
  }
  const params: unknown[] = [groupId, seconds, stepS];
  let filter = `topic <> ''`;
  if (query.topic !== undefined) {
    params.push(query.topic);
    filter = `topic = $${params.length}`;
    if (query.partition !== undefined) {
      params.push(query.partition);
      filter += ` AND partition = $${params.length}`;
    }
  }
  const perPartition = query.partition !== undefined || query.topic !== undefined;
  const step = bucketOf('at', '$3::int');
  const [rows, outbox] = await Promise.all([
    sql.query(
      `WITH per_partition AS (
         SELECT topic, partition, ${step} AS bucket, sum(records) AS records, sum(units) AS units, sum(dead_letters) AS dead_letters, sum(parks) AS parks,
                sum(retry_moves) AS retry_moves, max(lag) AS lag, sum(unit_p50_ms * units) / NULLIF(sum(units), 0) AS p50, max(unit_p99_ms) AS p99
         FROM ${SAMPLES_TABLE}
         WHERE consumer_group = $1 AND at >= now() - make_interval(secs => $2) AND ${filter}
         GROUP BY topic, partition, bucket
       )
       SELECT topic, ${perPartition ? 'partition' : 'NULL::int AS partition'}, bucket, sum(records) AS records, sum(units) AS units, sum(dead_letters) AS dead_letters, sum(parks) AS parks,
              sum(retry_moves) AS retry_moves, sum(lag) AS lag, sum(p50 * units) / NULLIF(sum(units), 0) AS p50, max(p99) AS p99
       FROM per_partition GROUP BY topic, ${perPartition ? 'partition, ' : ''}bucket ORDER BY topic, ${perPartition ? 'partition, ' : ''}bucket`,
      params,
    ),
    sql.query(
      `SELECT ${step} AS bucket, max(outbox_waiting) AS waiting, max(outbox_oldest_ms) AS oldest
       FROM ${SAMPLES_TABLE} WHERE consumer_group = $1 AND at >= now() - make_interval(secs => $2) AND topic = '' AND partition = -1
       GROUP BY bucket ORDER BY bucket`,
      [groupId, seconds, stepS],
    ),
  ]);
  const series = new Map<string, HistoryDocument['series'][number]>();
  for (const r of rows) {
    const key = `${r.topic}\u0000${r.partition ?? ''}`;
    let s = series.get(key);
    if (!s) series.set(key, (s = { topic: r.topic, partition: r.partition === null ? null : Number(r.partition), points: [] }));
    const rate = (n: unknown) => Math.round((Number(n) / stepS) * 100) / 100;
    const ms = (v: unknown) => (v === null || v === undefined ? null : Math.round(Number(v) * 10) / 10);
    s.points.push({ at: iso(r.bucket), recordsPerSecond: rate(r.records), commitsPerSecond: rate(r.units), lag: num(r.lag), unitP50Ms: ms(r.p50), unitP99Ms: ms(r.p99), deadLetters: Number(r.dead_letters), parks: Number(r.parks), retryMoves: Number(r.retry_moves) });
  }
  const to = present.now instanceof Date ? present.now : new Date(String(present.now));
  return {
    range: query.range,
    stepSeconds: stepS,
    from: new Date(to.getTime() - seconds * 1000).toISOString(),
    to: to.toISOString(),
    series: [...series.values()],
    outbox: outbox.map((r) => ({ at: iso(r.bucket), waiting: Number(r.waiting ?? 0), oldestAgeMs: Number(r.oldest ?? 0) })),
    retryTiers,
  };
}

/** The longest bucket a range's step may read (a check of HISTORY_RANGES against SAMPLE_SPANS, for the spec). */
export function longestSpanRead(range: HistoryRange): number {
  const { seconds } = HISTORY_RANGES[range];
  return (SAMPLE_SPANS.find((span) => span.keepS >= seconds) ?? SAMPLE_SPANS[SAMPLE_SPANS.length - 1]).spanS;
}
