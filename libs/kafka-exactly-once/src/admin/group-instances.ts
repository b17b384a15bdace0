import type { PartitionHealth } from '../engine/partition-progress';
import { INSTANCES_TABLE } from '../kafka-exactly-once.constants';
import { STALE_INTERVALS, type InstanceReport } from '../reporting/instance-reporter';
import { activityOf, type PartitionActivityView } from './partition-activity';
import type { SqlClient } from './sql-client';

/** An instance of the group as the console shows it, from its last report. */
export interface InstanceView extends Omit<InstanceReport, 'partitions'> {
  /** The instance that answers this request. */
  self: boolean;
  startedAt: string;
  reportedAt: string;
  intervalMs: number;
  /**
   * `reporting`; `silent` when it has not reported for STALE_INTERVALS of its intervals (killed, hung, cut off from
   * PostgreSQL): what it last said is shown as it was then; `stopped` when it shut down cleanly.
   */
  status: 'reporting' | 'silent' | 'stopped';
  stoppedAt: string | null;
  /** How long ago it last reported (ms), by PostgreSQL's clock. */
  reportAgeMs: number;
  /** Its member id is one of Kafka's members of the group now. */
  inGroup: boolean;
  partitions: Array<PartitionHealth & { view: PartitionActivityView }>;
}

/** A partition of the group with the instance that reports it (the one reporting now, if several say they have it). */
export interface GroupPartition extends PartitionHealth {
  view: PartitionActivityView;
  instanceId: string;
  /** The status of that instance: a partition last reported by a silent instance is not being watched by anyone. */
  instanceStatus: InstanceView['status'];
}

/** Instances that stopped longer ago than this are left out of the overview (their rows go after a day). */
const SHOW_STOPPED_S = 3600;
/** The most instances one overview shows (a group's members, and the ones that went silent lately). */
export const MAX_INSTANCES = 200;

/** The group's instances, from their reports; null when the table does not exist yet (migrations not run). */
export async function readInstances(sql: SqlClient, groupId: string, selfId: string | undefined, memberIds: ReadonlySet<string>): Promise<InstanceView[] | null> {
  const [present] = await sql.query(`SELECT to_regclass($1) IS NOT NULL AS present`, [INSTANCES_TABLE]);
  if (!present.present) return null;
  const rows = await sql.query(
    `SELECT instance_id, started_at, reported_at, interval_ms, stopped_at, report,
            (extract(epoch FROM now() - reported_at) * 1000)::float8 AS age_ms
     FROM ${INSTANCES_TABLE}
     WHERE consumer_group = $1 AND (stopped_at IS NULL OR stopped_at > now() - make_interval(secs => $2))
     ORDER BY reported_at DESC LIMIT $3`,
    [groupId, SHOW_STOPPED_S, MAX_INSTANCES],
  );
  const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : String(v));
  return rows
    .map((row): InstanceView => {
      const report = (typeof row.report === 'string' ? JSON.parse(row.report) : row.report) as InstanceReport;
      const ageMs = Math.max(0, Math.round(Number(row.age_ms)));
      const status = row.stopped_at ? 'stopped' : ageMs > STALE_INTERVALS * Number(row.interval_ms) ? 'silent' : 'reporting';
      return {
        ...report,
        instanceId: row.instance_id,
        self: row.instance_id === selfId,
        startedAt: iso(row.started_at),
        reportedAt: iso(row.reported_at),
        intervalMs: Number(row.interval_ms),
        status,
        stoppedAt: row.stopped_at ? iso(row.stopped_at) : null,
        reportAgeMs: ageMs,
        inGroup: report.memberId !== null && memberIds.has(report.memberId),
        partitions: partitionsOf({ assignment: report.assignment, partitions: report.partitions ?? [] }).map((p) => ({ ...p, view: activityOf(p) })),
      };
    })
    .sort((a, b) => (a.self !== b.self ? (a.self ? -1 : 1) : a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0));
}

/** A partition assigned to an instance that has not fetched from it yet: known to be its, nothing more. */
function notFetched(topic: string, partition: number): PartitionHealth {
  return { topic, partition, activity: 'idle', committedOffset: null, highWatermark: null, lag: null, lastCommitAt: null, waitingMs: null, consecutiveFailures: 0, lastError: null, stalled: false, nextDueAt: null, unitsPerSecond: 0, recordsPerSecond: 0, commitLatencyMs: null };
}

/** An instance's partitions: those it fetched from, and those assigned to it it has not fetched from yet. */
export function partitionsOf(report: Pick<InstanceReport, 'assignment' | 'partitions'>): PartitionHealth[] {
  const fetched = new Set(report.partitions.map((p) => `${p.topic}\u0000${p.partition}`));
  const assigned = Object.entries(report.assignment ?? {}).flatMap(([topic, partitions]) => partitions.filter((p) => !fetched.has(`${topic}\u0000${p}`)).map((p) => notFetched(topic, p)));
  return [...report.partitions, ...assigned];
}

/**
 * Every partition the group's instances report, each once: the report of an instance that reports now before one
 * gone silent or stopped (its partitions moved on a rebalance), the latest report among equals.
 */
export function groupPartitions(instances: readonly InstanceView[]): GroupPartition[] {
  const rank = { reporting: 0, silent: 1, stopped: 2 } as const;
  const chosen = new Map<string, GroupPartition & { rank: number; age: number }>();
  for (const instance of instances) {
    for (const p of instance.partitions) {
      const key = `${p.topic}\u0000${p.partition}`;
      const current = chosen.get(key);
      const candidate = { ...p, instanceId: instance.instanceId, instanceStatus: instance.status, rank: rank[instance.status], age: instance.reportAgeMs };
      if (!current || candidate.rank < current.rank || (candidate.rank === current.rank && candidate.age < current.age)) chosen.set(key, candidate);
    }
  }
  return [...chosen.values()]
    .map(({ rank: _rank, age: _age, ...p }) => p)
    .sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition));
}
