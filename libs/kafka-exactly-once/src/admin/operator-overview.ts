import { adminOf, type ClusterAdmin, type KafkaClient, AssignerProtocol } from '../kafkajs';
import { withDeadline } from '../engine/deadline';
import type { PartitionHealth } from '../engine/partition-progress';
import type { RetryTierStatus } from '../engine/exactly-once.consumer';
import type { HealthResult } from '../health/health-result';
import { INBOX_TABLE, PARKED_KEYS_TABLE, PARKED_RECORDS_TABLE } from '../kafka-exactly-once.constants';
import type { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import type { OutboxRelayStatus } from '../outbox/outbox-relay';
import type { OutboxOperations, OutboxSummary } from '../outbox/outbox-operations';
import type { PublisherStatus } from '../publishing/publish.interfaces';
import { cappedCount, cappedCounts, type AtLeast } from './capped-count';
import type { SqlClient } from './sql-client';
import { activityOf, type PartitionActivityView } from './partition-activity';
import { groupPartitions, partitionsOf, readInstances, type GroupPartition, type InstanceView } from './group-instances';

export { activityOf, type PartitionActivityView };

export interface OverviewPartition extends PartitionHealth {
  view: PartitionActivityView;
}

export interface GroupMember {
  memberId: string;
  /** The instance of the library that reports being this member (null: none does, e.g. not this library or reports off). */
  instanceId: string | null;
  clientId: string;
  host: string;
  /** Its partitions by topic. */
  assignment: Record<string, number[]>;
}

/** The operator console's first page: `GET /kafka-eo/overview`. */
export interface OperatorOverviewDocument {
  generatedAt: string;
  group: {
    id: string;
    /** Kafka's view of the group (`Stable`, `PreparingRebalance`...); null when Kafka did not answer. */
    state: string | null;
    members: GroupMember[];
    error?: string;
  };
  /** This instance's consumer: its state and the start's last error. */
  consumer: { state: string; lastError: string | null };
  /** This instance's assigned partitions. */
  partitions: OverviewPartition[];
  /**
   * Every instance of the group that reports (module option operations.reportIntervalMs), this one first: its
   * partitions, memory, event-loop delay and version, and whether it still reports. null when not read
   * (`unreadable.instances` says why) or before the library's migrations made the table.
   */
  instances: InstanceView[] | null;
  /** Every partition the group's instances report, with the instance that has it (empty when `instances` is null). */
  groupPartitions: GroupPartition[];
  /** The whole group's figures, from the instances' reports (null when `instances` is null). */
  groupTotals: { instances: number; silent: number; lag: number; recordsPerSecond: number; stalled: number } | null;
  retryTiers: RetryTierStatus[];
  totals: { lag: number; unitsPerSecond: number; recordsPerSecond: number; stalled: number };
  /**
   * null when PostgreSQL could not be read (`unreadable.counts` says why). Each count stops at 10,000
   * (COUNT_CAP): one that reached it is 10,000 and named in `atLeast` (there are more; the page shows "10,000+").
   */
  counts: ({ parkedKeys: number; parkedRecords: number; deadLetters: number; retrying: number } & { atLeast: AtLeast<OverviewCount> }) | null;
  /** This instance's publisher (null when the module has no `publisher` option). */
  publisher: PublisherStatus | null;
  /**
   * The database's outbox (null when it has none, or when PostgreSQL could not be read: `unreadable.outbox`
   * says which); `relay`: this instance's relay, when it runs one.
   */
  outbox: (OutboxSummary & { oldestAgeMs: number; relay: OutboxRelayStatus | null }) | null;
  /** Each health indicator of the parts this application enables, as it reports. */
  health: Record<string, { status: 'up' | 'down'; message?: string; [detail: string]: unknown }>;
  /**
   * The parts that could not be read now (`counts`, `outbox`), each with why (PostgreSQL down, a query refused):
   * the rest of the document stands. Empty when every part was read.
   */
  unreadable: { counts?: string; outbox?: string; instances?: string };
}

/** The overview's counts, each capped (COUNT_CAP). */
export type OverviewCount = 'parkedKeys' | 'parkedRecords' | 'deadLetters' | 'retrying';

/** The parts of the application the overview reads, found by the admin module. */
export interface OverviewSources {
  lifecycle: KafkaExactlyOnceLifecycle;
  kafka: KafkaClient;
  sql: SqlClient;
  /** The database's outbox operations (the admin API's own). */
  outbox: OutboxOperations;
  publisher?: { status(): PublisherStatus };
  relay?: () => OutboxRelayStatus | undefined;
  /** The indicators to ask, by key. */
  indicators: Record<string, () => Promise<HealthResult> | HealthResult>;
}

const ASK_MS = 3000;

/**
 * The overview of the application's group, this instance's partitions, its publisher, the database's outbox and
 * health: what the console's first page shows and refreshes. Every part that cannot be read says why instead of
 * failing the whole document.
 */
export class OperatorOverview {
  private admin?: ClusterAdmin;
  private connecting?: Promise<ClusterAdmin>;

  constructor(private readonly sources: OverviewSources) {}

  async read(): Promise<OperatorOverviewDocument> {
    const { lifecycle } = this.sources;
    const status = lifecycle.status();
    const start = lifecycle.startStatus();
    const partitions = (status?.partitions ?? []).map((p) => ({ ...p, view: activityOf(p) }));
    // The overview is opened exactly when something is wrong: a part that cannot be read (PostgreSQL down) is
    // named, never the whole page refused.
    const unreadable: OperatorOverviewDocument['unreadable'] = {};
    const readOr = async <T>(part: keyof OperatorOverviewDocument['unreadable'], read: () => Promise<T>): Promise<T | null> => {
      try {
        return await withDeadline(read(), ASK_MS * 2, 'PostgreSQL');
      } catch (err) {
        unreadable[part] = `PostgreSQL could not be read: ${(err as Error).message}`.slice(0, 1000);
        return null;
      }
    };
    const [group, counts, outbox, health, reported] = await Promise.all([
      this.group(),
      readOr('counts', () => this.counts()),
      readOr('outbox', () => this.outbox()),
      this.health(),
      // Only where this instance reports too: with reports off the page is this instance's, as before.
      lifecycle.instanceId === undefined ? Promise.resolve(null) : readOr('instances', () => readInstances(this.sources.sql, lifecycle.groupId, lifecycle.instanceId, new Set())),
    ]);
    // Kafka's members and the instances' reports, matched by member id.
    const memberIds = new Set(group.members.map((m) => m.memberId));
    // This instance's own partitions as they are now, not as its last report said.
    const instances = reported?.map((i) => ({ ...i, inGroup: i.memberId !== null && memberIds.has(i.memberId), ...(i.self ? { partitions: partitionsOf({ assignment: status?.assignment ?? {}, partitions }).map((p) => ({ ...p, view: activityOf(p) })) } : {}) })) ?? null;
    for (const m of group.members) m.instanceId = instances?.find((i) => i.memberId === m.memberId)?.instanceId ?? null;
    const shared = instances ? groupPartitions(instances) : [];
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      generatedAt: new Date().toISOString(),
      group,
      consumer: { state: status?.state ?? start.phase, lastError: status?.lastError ?? start.lastError ?? null },
      partitions,
      retryTiers: status?.retryTiers ?? [],
      totals: {
        lag: partitions.reduce((n, p) => n + (p.lag ?? 0), 0),
        unitsPerSecond: round(partitions.reduce((n, p) => n + p.unitsPerSecond, 0)),
        recordsPerSecond: round(partitions.reduce((n, p) => n + p.recordsPerSecond, 0)),
        stalled: partitions.filter((p) => p.stalled).length,
      },
      instances,
      groupPartitions: shared,
      groupTotals: instances
        ? {
            instances: instances.filter((i) => i.status === 'reporting').length,
            silent: instances.filter((i) => i.status === 'silent').length,
            lag: shared.reduce((n, p) => n + (p.lag ?? 0), 0),
            recordsPerSecond: round(shared.reduce((n, p) => n + p.recordsPerSecond, 0)),
            stalled: shared.filter((p) => p.stalled).length,
          }
        : null,
      counts,
      publisher: this.sources.publisher?.status() ?? null,
      outbox,
      health,
      unreadable,
    };
  }

  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    this.connecting = undefined;
    await admin?.disconnect().catch(() => undefined);
  }

  private async group(): Promise<OperatorOverviewDocument['group']> {
    const id = this.sources.lifecycle.groupId;
    try {
      const admin = await withDeadline(this.connected(), ASK_MS, 'Kafka');
      const { groups } = await withDeadline(admin.describeGroups([id]), ASK_MS, 'Kafka');
      const described = groups[0];
      return {
        id,
        state: described?.state ?? null,
        members: (described?.members ?? []).map((m) => {
          let assignment: Record<string, number[]> = {};
          try {
            assignment = AssignerProtocol.MemberAssignment.decode(m.memberAssignment)?.assignment ?? {};
          } catch {
            assignment = {};
          }
          return { memberId: m.memberId, instanceId: null, clientId: m.clientId, host: m.clientHost, assignment };
        }),
      };
    } catch (err) {
      // A connection that failed is made anew at the next refresh.
      await this.close();
      return { id, state: null, members: [], error: `Kafka did not describe the group: ${(err as Error).message}` };
    }
  }

  private connected(): Promise<ClusterAdmin> {
    if (this.admin) return Promise.resolve(this.admin);
    this.connecting ??= (async () => {
      const admin = adminOf(this.sources.kafka, { retry: { retries: 0 } });
      try {
        await admin.connect();
      } catch (err) {
        // What a failed connect opened is closed: the next refresh makes a new admin.
        await admin.disconnect().catch(() => undefined);
        throw err;
      }
      this.admin = admin;
      return admin;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async counts(): Promise<OperatorOverviewDocument['counts']> {
    const group = this.sources.lifecycle.groupId;
    const [present] = await this.sources.sql.query(`SELECT to_regclass($1) IS NOT NULL AS parking`, [PARKED_KEYS_TABLE]);
    if (!present.parking) return { parkedKeys: 0, parkedRecords: 0, deadLetters: 0, retrying: 0, atLeast: {} };
    // Each counted through its index up to the cap: a refresh reads at most 10,001 entries per count, whatever the
    // tables hold.
    const [row] = await this.sources.sql.query(
      `SELECT ${cappedCount(`${PARKED_KEYS_TABLE} WHERE consumer_group = $1`)} AS parked_keys,
              ${cappedCount(`${PARKED_RECORDS_TABLE} WHERE consumer_group = $1 AND state = 'parked'`)} AS parked_records,
              ${cappedCount(`${INBOX_TABLE} WHERE consumer_group = $1 AND dlq_reason IS NOT NULL AND status IN ('dead-lettered', 'deferred')`)} AS dead_letters,
              ${cappedCount(`${INBOX_TABLE} WHERE consumer_group = $1 AND dlq_reason IS NULL AND status = 'retrying'`)} AS retrying`,
      [group],
    );
    const { values, atLeast } = cappedCounts<OverviewCount>({ parkedKeys: row.parked_keys, parkedRecords: row.parked_records, deadLetters: row.dead_letters, retrying: row.retrying });
    return { ...values, atLeast };
  }

  private async outbox(): Promise<OperatorOverviewDocument['outbox']> {
    const operations = this.sources.outbox;
    if (!(await operations.present())) return null;
    const summary = await operations.summary();
    return {
      ...summary,
      oldestAgeMs: summary.oldestWrittenAt ? Math.max(0, Date.now() - new Date(summary.oldestWrittenAt).getTime()) : 0,
      relay: this.sources.relay?.() ?? null,
    };
  }

  private async health(): Promise<OperatorOverviewDocument['health']> {
    const entries = await Promise.all(
      Object.entries(this.sources.indicators).map(async ([key, check]) => {
        try {
          const result = await withDeadline(Promise.resolve(check()), ASK_MS * 2, key);
          return [key, result[key] ?? Object.values(result)[0]] as const;
        } catch (err) {
          return [key, { status: 'down' as const, message: (err as Error).message }] as const;
        }
      }),
    );
    return Object.fromEntries(entries) as OperatorOverviewDocument['health'];
  }
}
