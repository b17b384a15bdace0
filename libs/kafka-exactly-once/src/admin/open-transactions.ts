import { HangingTransactions } from '../client/hanging-transactions';
import type { LogRequests, OpenTransaction, TopicPartitions } from '../client/log-requests';
import { withDeadline } from '../engine/deadline';
import { OperatorRequestError } from '../errors/operator-request.error';
import { AUDIT_TABLE } from '../kafka-exactly-once.constants';
import type { AuditEntry, OperatorStore } from './operator-store';
import type { SqlClient } from './sql-client';
import { abortRefusal, doingOf, ownerOf, type OwnIds, type TransactionFacts, type TransactionOwner, trackedByCoordinator } from './transaction-owners';

/** One transaction open on a partition, as the console shows it. */
export interface OpenTransactionView {
  producerId: string;
  producerEpoch: number;
  /** null when no transaction coordinator named its producer id. */
  transactionalId: string | null;
  /** The state its coordinator gives (ListTransactions): `Ongoing`, `PrepareCommit`..., or `Empty`, `CompleteCommit`, `CompleteAbort`, `Dead` for one it no longer ends; null when none named it. */
  coordinatorState: string | null;
  /** Its first offset on this partition: the last stable offset stops there. */
  startOffset: string;
  /** When it began here: the timestamp of its record at `startOffset` (`sinceFrom: 'record'`), else of its producer's last write here (`'last-write'`). */
  since: string | null;
  sinceFrom: 'record' | 'last-write' | null;
  /** When its coordinator aborts it (its start and its timeout), for one it still tracks (null: unknown, or not tracked). */
  timeoutAt: string | null;
  owner: TransactionOwner;
  /** What the library does about it (its own), in an operator's words; null for another application's. */
  doing: string | null;
  /** Whether `POST /transactions/abort` would end it; `refusal` says why not. */
  abortable: boolean;
  refusal: string | null;
}

export interface TransactionPartitionView {
  topic: string;
  partition: number;
  /** `input`: the group consumes it (a handler's topic or a retry tier); `output`: its units or relay write it. */
  role: 'input' | 'output';
  /** The offset read_committed readers stop at (ListOffsets read committed); null when not read. */
  lastStableOffset: string | null;
  /** The end of the log (ListOffsets read uncommitted); null when not read. */
  highWatermark: string | null;
  /** The transactions open on it, asked (DescribeProducers) only where the last stable offset is below the high watermark. */
  open: OpenTransactionView[];
}

/** `GET /kafka-eo/transactions`. */
export interface OpenTransactionsDocument {
  generatedAt: string;
  partitions: TransactionPartitionView[];
  /** What could not be read now (a topic, a broker, a question), with why; the rest of the document stands. */
  unreadable: Record<string, string>;
}

/** What the reader needs of the application. */
export interface OpenTransactionsSources {
  requests: LogRequests;
  sql: SqlClient;
  store: OperatorStore;
  ids: OwnIds;
  /** The topics the group's units and relay write: declared outputs, dead-letter topics, the outbox's checkpoint. */
  written: readonly string[];
  abortsHanging: boolean;
  transactionTimeoutMs: number;
  /** The brokers' transaction.max.timeout.ms: no live transaction lasts longer (an abort's age test). */
  maxTransactionTimeoutMs(): Promise<number>;
}

/** Each Kafka question's deadline, and the whole document's. */
const ASK_MS = 5000;
const READ_MS = 15000;
/** At most this many open transactions get their first record fetched for `since`; the others take their last write. */
const FETCHED_STARTS = 20;

/**
 * The console's view of open transactions: per input and output partition of the group, the last stable offset
 * against the high watermark and, where they differ, the transactions holding it, whose they are and what the
 * library does about them; and the operator's abort of a hanging one (audited). Kafka's own answers: ListOffsets
 * (one request per leader and isolation), DescribeProducers (one per leader, only for partitions that lag), and
 * ListTransactions and DescribeTransactions (one per broker) to name them.
 */
export class OpenTransactions {
  private readonly hanging: HangingTransactions;

  constructor(private readonly sources: OpenTransactionsSources) {
    this.hanging = new HangingTransactions(sources.requests);
  }

  async read(): Promise<OpenTransactionsDocument> {
    const unreadable: Record<string, string> = {};
    let partitions: TransactionPartitionView[] = [];
    try {
      partitions = await withDeadline(this.readAll(unreadable), READ_MS, 'Kafka');
    } catch (err) {
      this.sources.requests.reset();
      unreadable.kafka = (err as Error).message.slice(0, 1000);
    }
    return { generatedAt: new Date().toISOString(), partitions, unreadable };
  }

  /**
   * Aborts a hanging transaction of another application (what `kafka-transactions.sh abort` does) on every
   * partition of the group's topics where its producer has it open, the named partition last, and records it in
   * the audit: `running` before the markers are written, then `done` with the partitions ended, or `failed` with
   * why. Refused (409) for a transaction its coordinator still tracks or that is the library's own; 404 when it is
   * not open there (any more).
   */
  async abort(target: { topic: string; partition: number; producerId: string; startOffset: string }, reason: string, who: { actor?: string; declaredActor?: string }): Promise<AuditEntry> {
    const { topic, partition, producerId } = target;
    const roles = this.roles();
    if (!roles.has(topic)) throw new OperatorRequestError('not-found', `${topic} is not a topic of group ${this.sources.ids.groupId} (its input and output topics: ${[...roles.keys()].join(', ') || 'none'})`, 'topic');
    let open: OpenTransaction | undefined;
    let timeoutAt: string | null = null;
    try {
      const found = await withDeadline(this.hanging.openOn(topic, partition), ASK_MS * 2, 'Kafka');
      open = found.find((t) => t.producerId === producerId);
      if (open && trackedByCoordinator(open)) timeoutAt = (await this.timeouts([open]).catch(() => new Map<string, string>())).get(open.transactionalId!) ?? null;
    } catch (err) {
      this.sources.requests.reset();
      throw new OperatorRequestError('conflict', `Kafka did not say what is open on ${topic}[${partition}] (${(err as Error).message}): nothing was written; ask again`);
    }
    if (!open) throw new OperatorRequestError('not-found', `producer ${producerId} has no transaction open on ${topic}[${partition}] (it may have ended meanwhile)`);
    if (open.startOffset !== target.startOffset) {
      throw new OperatorRequestError('conflict', `the transaction of producer ${producerId} on ${topic}[${partition}] now starts at offset ${open.startOffset}, not ${target.startOffset}: it is another transaction than the one read (its producer went on); nothing was written, read again`);
    }
    const owner = ownerOf(open.transactionalId, this.sources.ids);
    const facts = await this.factsFor([{ open, owner }], timeoutAt);
    const refusal = abortRefusal(open, owner, facts);
    if (refusal) throw new OperatorRequestError('conflict', `the transaction of producer ${producerId} on ${topic}[${partition}] is not aborted: ${refusal}`);
    await this.oldEnough(open, topic, partition);
    // Asked again just before the marker: the same transaction (start offset), still forgotten by its coordinator.
    const again = await withDeadline(this.hanging.openOn(topic, partition), ASK_MS * 2, 'Kafka').catch((err: Error) => {
      this.sources.requests.reset();
      throw new OperatorRequestError('conflict', `Kafka did not say again what is open on ${topic}[${partition}] (${err.message}): nothing was written; ask again`);
    });
    const still = again.find((t) => t.producerId === producerId);
    if (!still || still.startOffset !== open.startOffset || abortRefusal(still, ownerOf(still.transactionalId, this.sources.ids), facts)) {
      throw new OperatorRequestError('conflict', `the transaction of producer ${producerId} on ${topic}[${partition}] changed while the abort was checked (${still ? `now from offset ${still.startOffset}, coordinator state ${still.state ?? 'not named'}` : 'it is no longer open'}): nothing was written`);
    }
    const what = { partition, producerId, producerEpoch: open.producerEpoch, transactionalId: open.transactionalId ?? null, coordinatorState: open.state ?? null, startOffset: open.startOffset };
    const [row] = await this.sources.sql.query(
      `INSERT INTO ${AUDIT_TABLE} (consumer_group, action, topic, reason, actor, declared_actor, state, result)
       VALUES ($1, 'abort-transaction', $2, $3, $4, $5, 'running', $6::jsonb) RETURNING id`,
      [this.sources.ids.groupId, topic, reason, who.actor ?? null, who.declaredActor ?? null, JSON.stringify(what)],
    );
    let outcome: { state: 'done' | 'failed'; result: Record<string, unknown> };
    try {
      // This partition only, as kafka-transactions.sh aborts: each partition is checked on its own (start, age, state).
      const aborted = await withDeadline(this.hanging.endEverywhere(still, false, [], { topic, partition }), ASK_MS * 4, 'Kafka');
      outcome = { state: 'done', result: { ...what, aborted } };
    } catch (err) {
      // A deadline passed: the markers may still be written (the page's next read shows the partition as it is).
      outcome = { state: 'failed', result: { ...what, error: (err as Error).message.slice(0, 2000) } };
    }
    await this.sources.sql.query(`UPDATE ${AUDIT_TABLE} SET state = $3, result = $4::jsonb, finished_at = now() WHERE consumer_group = $1 AND id = $2`, [
      this.sources.ids.groupId,
      row.id,
      outcome.state,
      JSON.stringify(outcome.result),
    ]);
    return this.sources.store.operation(String(row.id));
  }

  /**
   * Refuses (409) a transaction whose producer wrote to the partition (or began it) within the brokers'
   * transaction.max.timeout.ms: no coordinator lets a live one last longer, so one quiet for that long is not the
   * producer's next transaction begun at the same epoch since its coordinator's state was read.
   */
  private async oldEnough(open: OpenTransaction, topic: string, partition: number): Promise<void> {
    const [maxMs, first] = await Promise.all([
      withDeadline(this.sources.maxTransactionTimeoutMs(), ASK_MS, 'Kafka'),
      withDeadline(this.hanging.startedAt(topic, partition, open.producerId, open.startOffset), ASK_MS, 'Kafka').catch(() => undefined),
    ]).catch((err: Error) => {
      this.sources.requests.reset();
      throw new OperatorRequestError('conflict', `Kafka did not say how old the transaction is (${err.message}): nothing was written; ask again`);
    });
    // The later of its first record and its producer's last write there (what kafka-transactions.sh find-hanging
    // measures): a transaction its producer still writes to is never old enough.
    const started = Math.max(first !== undefined && first > 0 ? first : 0, Number(open.lastTimestamp ?? 0) || 0);
    if (!(started > 0)) throw new OperatorRequestError('conflict', `Kafka does not say when the transaction of producer ${open.producerId} on ${topic}[${partition}] began: nothing was written (abort it with kafka-transactions.sh after checking it)`);
    if (Date.now() - started < maxMs) {
      throw new OperatorRequestError(
        'conflict',
        `the transaction of producer ${open.producerId} on ${topic}[${partition}] began at ${new Date(started).toISOString()}, less than the brokers' transaction.max.timeout.ms (${maxMs} ms) ago: a transaction that young may be its producer's next one, live; it may be aborted from ${new Date(started + maxMs).toISOString()}`,
      );
    }
  }

  async close(): Promise<void> {
    await this.sources.requests.disconnect().catch(() => undefined);
  }

  /** The group's topics and their roles: what it consumes is `input`, what only its producers write is `output`. */
  private roles(): Map<string, 'input' | 'output'> {
    const roles = new Map<string, 'input' | 'output'>();
    for (const topic of this.sources.ids.consumed) roles.set(topic, 'input');
    for (const topic of this.sources.written) if (!roles.has(topic)) roles.set(topic, 'output');
    return roles;
  }

  private async readAll(unreadable: Record<string, string>): Promise<TransactionPartitionView[]> {
    const { requests } = this.sources;
    const views: TransactionPartitionView[] = [];
    // Partitions by leader, from the metadata.
    const byLeader = new Map<number, TransactionPartitionView[]>();
    for (const [topic, role] of this.roles()) {
      try {
        const leaders = await withDeadline(requests.partitionsOf(topic), ASK_MS, 'Kafka');
        for (const { partition, leader } of leaders.sort((a, b) => a.partition - b.partition)) {
          const view: TransactionPartitionView = { topic, partition, role, lastStableOffset: null, highWatermark: null, open: [] };
          views.push(view);
          if (leader < 0) unreadable[`${topic}[${partition}]`] = 'no leader';
          else (byLeader.get(leader) ?? byLeader.set(leader, []).get(leader)!).push(view);
        }
      } catch (err) {
        requests.reset();
        unreadable[topic] = (err as Error).message.slice(0, 500);
      }
    }
    // One ListOffsets per leader and isolation; DescribeProducers where the last stable offset lags.
    const lagging = new Map<number, TransactionPartitionView[]>();
    await Promise.all(
      [...byLeader].map(async ([leader, led]) => {
        const find = (topic: string, partition: number) => led.find((v) => v.topic === topic && v.partition === partition);
        try {
          const asked = grouped(led);
          const [stable, high] = await Promise.all([
            withDeadline(requests.latestOffsets(leader, asked, 'committed'), ASK_MS, 'Kafka'),
            withDeadline(requests.latestOffsets(leader, asked, 'uncommitted'), ASK_MS, 'Kafka'),
          ]);
          for (const [answers, field] of [[stable, 'lastStableOffset'], [high, 'highWatermark']] as const) {
            for (const o of answers) {
              const view = find(o.topic, o.partition);
              if (o.errorCode !== 0) unreadable[`${o.topic}[${o.partition}]`] = `ListOffsets answered error code ${o.errorCode}`;
              else if (view) view[field] = o.offset.toString();
            }
          }
        } catch (err) {
          requests.reset();
          unreadable[`broker ${leader}`] = `ListOffsets: ${(err as Error).message}`.slice(0, 500);
          return;
        }
        const behind = led.filter((v) => v.lastStableOffset !== null && v.highWatermark !== null && BigInt(v.lastStableOffset) < BigInt(v.highWatermark));
        if (behind.length) lagging.set(leader, behind);
      }),
    );
    const found: Array<{ view: TransactionPartitionView; open: OpenTransaction }> = [];
    await Promise.all(
      [...lagging].map(async ([leader, behind]) => {
        try {
          const described = await withDeadline(requests.describeProducers(leader, grouped(behind)), ASK_MS, 'Kafka');
          for (const p of described) {
            const view = behind.find((v) => v.topic === p.topic && v.partition === p.partition);
            if (!view) continue;
            if (p.errorCode !== 0) unreadable[`${p.topic}[${p.partition}]`] = `DescribeProducers answered error code ${p.errorCode}`;
            else for (const open of p.producers) found.push({ view, open });
          }
        } catch (err) {
          requests.reset();
          unreadable[`broker ${leader}`] = `DescribeProducers: ${(err as Error).message}`.slice(0, 500);
        }
      }),
    );
    if (found.length === 0) return views;
    await this.name(found.map((f) => f.open), unreadable);
    const timeouts = await this.timeouts(found.map((f) => f.open).filter(trackedByCoordinator)).catch((err) => {
      unreadable.describeTransactions = (err as Error).message.slice(0, 500);
      return new Map<string, string>();
    });
    const owners = found.map((f) => ownerOf(f.open.transactionalId, this.sources.ids));
    const facts = await this.factsFor(found.map((f, i) => ({ open: f.open, owner: owners[i] })), null, unreadable);
    await Promise.all(
      found.map(async ({ view, open }, i) => {
        const owner = owners[i];
        const these = { ...facts, timeoutAt: open.transactionalId ? (timeouts.get(open.transactionalId) ?? null) : null };
        const since = await this.since(view, open, i < FETCHED_STARTS);
        const refusal = abortRefusal(open, owner, these);
        view.open.push({
          producerId: open.producerId,
          producerEpoch: open.producerEpoch,
          transactionalId: open.transactionalId ?? null,
          coordinatorState: open.state ?? null,
          startOffset: open.startOffset,
          since: since.at,
          sinceFrom: since.from,
          timeoutAt: trackedByCoordinator(open) ? these.timeoutAt : null,
          owner,
          doing: doingOf(open, owner, these),
          abortable: refusal === null,
          refusal,
        });
      }),
    );
    for (const view of views) view.open.sort((a, b) => Number(BigInt(a.startOffset) - BigInt(b.startOffset)));
    return views;
  }

  /** Names each open transaction (transactional id, coordinator state) with ListTransactions on every broker. */
  private async name(open: OpenTransaction[], unreadable: Record<string, string>): Promise<void> {
    try {
      const { coordinators, unanswered } = await this.hanging.name(open, (question) => withDeadline(question, ASK_MS, 'Kafka'));
      for (const [id, broker] of coordinators) this.coordinators.set(id, broker);
      for (const [broker, why] of unanswered) unreadable[`broker ${broker}`] = `ListTransactions: ${why}`.slice(0, 500);
    } catch (err) {
      unreadable.listTransactions = `the cluster's brokers were not listed: ${(err as Error).message}`.slice(0, 500);
    }
  }

  /** The coordinator of each transactional id named last (the broker whose ListTransactions named it). */
  private readonly coordinators = new Map<string, number>();

  /** When each coordinator aborts its transaction (start + timeout, ISO), with DescribeTransactions (one per coordinator). */
  private async timeouts(open: OpenTransaction[]): Promise<Map<string, string>> {
    const at = new Map<string, string>();
    if (open.length && open.some((t) => !this.coordinators.has(t.transactionalId!))) await this.name(open.map((t) => ({ ...t })), {});
    const byCoordinator = new Map<number, string[]>();
    for (const t of open) {
      const coordinator = this.coordinators.get(t.transactionalId!);
      if (coordinator !== undefined) byCoordinator.set(coordinator, [...new Set([...(byCoordinator.get(coordinator) ?? []), t.transactionalId!])]);
    }
    await Promise.all(
      [...byCoordinator].map(async ([broker, ids]) => {
        const described = await withDeadline(this.sources.requests.describeTransactions(broker, ids), ASK_MS, 'Kafka');
        for (const d of described) {
          const start = Number(d.startTimeMs);
          if (d.errorCode === 0 && start > 0 && d.timeoutMs > 0) at.set(d.transactionalId, new Date(start + d.timeoutMs).toISOString());
        }
      }),
    );
    return at;
  }

  /** The facts the owners' texts need: for a unit's hanging transaction, whether it holds the group's offsets. */
  private async factsFor(found: Array<{ open: OpenTransaction; owner: TransactionOwner }>, timeoutAt: string | null, unreadable?: Record<string, string>): Promise<TransactionFacts> {
    const facts: TransactionFacts = { abortsHanging: this.sources.abortsHanging, transactionTimeoutMs: this.sources.transactionTimeoutMs, timeoutAt };
    const units = found.filter((f) => f.owner.kind === 'unit' && f.open.transactionalId && !trackedByCoordinator(f.open));
    if (units.length === 0 || !this.sources.abortsHanging) return facts;
    try {
      const holding = await withDeadline(this.hanging.holdingOffsetsOf(this.sources.ids.groupId), ASK_MS * 2, 'Kafka');
      const holders = new Set(holding.open.map((t) => t.producerId));
      // One answer for all: a unit's producer whose transaction is not on the offsets' partition is the exception.
      facts.holdsGroupOffsets = units.every((u) => holders.has(u.open.producerId));
    } catch (err) {
      if (unreadable) unreadable.groupOffsets = `the group's offsets' partition was not described: ${(err as Error).message}`.slice(0, 500);
    }
    return facts;
  }

  /** When the transaction began here: its first record's timestamp when fetched, else its producer's last write. */
  private async since(view: TransactionPartitionView, open: OpenTransaction, fetch: boolean): Promise<{ at: string | null; from: 'record' | 'last-write' | null }> {
    if (fetch) {
      try {
        const at = await withDeadline(this.hanging.startedAt(view.topic, view.partition, open.producerId, open.startOffset), ASK_MS, 'Kafka');
        if (at !== undefined && at > 0) return { at: new Date(at).toISOString(), from: 'record' };
      } catch {
        // The last write's time below stands in.
      }
    }
    const last = Number(open.lastTimestamp ?? -1);
    return last > 0 ? { at: new Date(last).toISOString(), from: 'last-write' } : { at: null, from: null };
  }
}

/** Partitions as the requests take them, by topic. */
function grouped(views: TransactionPartitionView[]): TopicPartitions[] {
  const topics = new Map<string, number[]>();
  for (const v of views) topics.set(v.topic, [...(topics.get(v.topic) ?? []), v.partition]);
  return [...topics].map(([topic, partitions]) => ({ topic, partitions }));
}
