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

/** What a partition is doing, in an operator's words, and what to do when it does not move. */
export interface PartitionActivityView {
  state: 'consuming' | 'idle' | 'waiting on a retry tier' | 'backing off' | 'stalled' | 'fenced';
  /** Why it waits or stalls (its last error, or the due time it waits for). */
  reason: string | null;
  /** The operator's way out of a stall; null when nothing is to be done. */
  wayOut: string | null;
}

export interface OverviewPartition extends PartitionHealth {
  view: PartitionActivityView;
}

export interface GroupMember {
  memberId: string;
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
  unreadable: { counts?: string; outbox?: string };
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

/** How an operator reads a partition's state (docs/console.md, "Overview"). */
export function activityOf(p: PartitionHealth): PartitionActivityView {
  const error = p.lastError?.message ?? null;
  if (p.activity === 'fenced') return { state: 'fenced', reason: error, wayOut: 'another member of the group owns this partition now: nothing to do here (this member stops its work on it)' };
  if (p.stalled) {
    const waited = `records have waited ${Math.round((p.waitingMs ?? 0) / 1000)} s without a commit`;
    switch (p.lastError?.kind) {
      case 'infrastructure':
        return { state: 'stalled', reason: `${waited}: ${error}`, wayOut: 'PostgreSQL or Kafka fails (the error names which): the partition is tried again without end and moves once it answers; nothing to release or replay' };
      case 'outputs-refused':
        return { state: 'stalled', reason: `${waited}: ${error}`, wayOut: "Kafka refuses a handled record's recorded outputs for good: raise the output topic's limit, or divert them to the dead-letter topic (kafka-eo outputs divert, as the error says)" };
      case 'record':
        return { state: 'stalled', reason: `${waited}: ${error}`, wayOut: 'a record fails again and again: after isolation.maxFailures tries it is dead-lettered (or parks its key) and the partition moves on; see its dead letter then' };
      default:
        return { state: 'stalled', reason: error ? `${waited}; last error: ${error}` : waited, wayOut: "a unit of work takes longer than consumer.stallAfterMs: a handler's slow call or a lock it waits for (see the application's log); a handler past its deadline ends dead-lettered" };
    }
  }
  if (p.activity === 'delaying') return { state: 'waiting on a retry tier', reason: p.nextDueAt ? `its next record is due at ${p.nextDueAt}` : null, wayOut: null };
  if (p.activity === 'backing-off') return { state: 'backing off', reason: error, wayOut: null };
  if (p.activity === 'idle') return { state: 'idle', reason: null, wayOut: null };
  return { state: 'consuming', reason: null, wayOut: null };
}

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
    const [group, counts, outbox, health] = await Promise.all([this.group(), readOr('counts', () => this.counts()), readOr('outbox', () => this.outbox()), this.health()]);
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
          return { memberId: m.memberId, clientId: m.clientId, host: m.clientHost, assignment };
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
