import { adminOf, type KafkaClient, logRequestsOf, type Message } from '../kafkajs';
import { COMMITTED_LOOKBACK_MS, type CommittedRecords, forgottenByCoordinator, HangingTransactions, type OpenTransaction } from '../client/hanging-transactions';
import { type LoggedRecord, type PartitionLog, PartitionLogs } from '../client/partition-logs';
import { withDeadline } from '../engine/deadline';
import type { FaultInjector } from '../engine/fault-injector';
import { HangingAbortPolicy } from '../engine/hanging-abort-policy';
import { createTopicsAndWait } from '../kafka-topics';
import { sleep } from '../engine/sleep';
import { describeHolders } from '../errors/hanging-transaction.error';
import { OutboxRelayError } from '../errors/outbox-relay.error';
/** How long the read waits on an open transaction before it names it in a warning (once per read). */
const HOLDER_WARNING_AFTER_MS = 5000;
/**
 * How long the read of what the relay's own producer committed may take, before an abort of its hanging
 * transaction: time of its own, not what is left of the checkpoint read's (the relay sends nothing meanwhile).
 */
const COMMITTED_READ_MS = 120000;
/** The relay's place in HangingAbortPolicy (one checkpoint partition, one producer). */
const RELAY = 'relay';

/** The relay's own producer, whose hanging transaction on the checkpoint partition the read may end. */
export interface OwnProducer {
  transactionalId: string;
  /** How long a transaction of it must have held the partition, seen by this relay, before it is ended. */
  abortAfterMs: number;
  /** The relay's checkpoint key. */
  key: string;
  /** The last batch the database counts as relayed (its rows deleted once its transaction was answered committed). */
  knownRelayed: bigint;
  /** The topics its transactions may write besides the checkpoint topic. */
  topics: () => Promise<string[]>;
  /**
   * Before an abort: takes out of the outbox, as relayed, the events given out that Kafka already holds committed
   * from the producer (counts of record digests); returns how many. Throws when it cannot (nothing is aborted then).
   */
  delivered: (committed: CommittedRecords) => Promise<number>;
  /** False once the relay is stopping: a read in progress stops, and nothing is aborted. */
  running: () => boolean;
  /** Told why the relay leaves its own hanging transaction open for now (health shows it). */
  waiting: (why: string) => void;
}

/** A hanging transaction of the relay's own producer due to be ended, found by the checkpoint read. */
interface DueHanging {
  log: PartitionLog;
  due: OpenTransaction[];
}

/** What a checkpoint record says: the last relay batch whose events are in Kafka (committed with it). */
export interface Checkpoint {
  batch: bigint;
}

/**
 * The relay's checkpoints: one record per relay batch, written in the batch's own Kafka transaction to a
 * compacted topic of the library's, keyed by the relay's name and the database's outbox id. The last one a read-committed reader sees is the
 * last batch in Kafka, whatever the relay crashed on: the batch and its checkpoint commit (or abort) together.
 * Read after the relay's InitProducerId, which fences an earlier relay and settles its open transaction, it is
 * the truth until the next InitProducerId of that transactional id.
 */
export class OutboxCheckpoints {
  private readonly logs: PartitionLogs;
  private readonly holders: HangingTransactions;
  /** When this relay first saw each open transaction (producer id and first offset) on the checkpoint partition. */
  private readonly heldSince = new Map<string, number>();
  /** When a hanging transaction of the relay's own producer is aborted after reads of what that producer committed. */
  private readonly aborts = new HangingAbortPolicy();
  /** Such a transaction left open for now (its last read was not whole), and why, for the checkpoint read's error. */
  private waiting?: { id: string; why: string };

  constructor(
    private readonly kafka: KafkaClient,
    private readonly topic: string,
    /** Told which transaction holds the checkpoint partition's last stable offset, once a read has waited on it. */
    private readonly warn: (message: string) => void = () => undefined,
    private readonly faults?: FaultInjector,
    /** Told, at error level, that a hanging transaction is aborted anyway after reads that were not whole. */
    private readonly alarm: (message: string) => void = warn,
  ) {
    this.logs = new PartitionLogs(logRequestsOf(kafka));
    this.holders = new HangingTransactions(logRequestsOf(kafka));
  }

  async disconnect(): Promise<void> {
    await Promise.all([this.logs.disconnect(), this.holders.disconnect()]);
  }

  /** The record that marks `batch` of the outbox `key` relayed, sent in that batch's transaction. */
  record(key: string, batch: bigint, events: number): { topic: string; messages: Message[] } {
    return { topic: this.topic, messages: [{ key, value: JSON.stringify({ batch: batch.toString(), events, relayedAt: new Date().toISOString() }) }] };
  }

  /** Creates the topic (one partition, compacted) if it is missing; refuses clearly if it may not. */
  async ensureTopic(timeoutMs: number): Promise<void> {
    const admin = adminOf(this.kafka, { retry: { retries: 2 } });
    try {
      await withDeadline(admin.connect(), timeoutMs, 'Kafka');
      const existing = await withDeadline(admin.listTopics(), timeoutMs, 'Kafka');
      if (existing.includes(this.topic)) {
        // A topic made beforehand must keep each key's last record for good: with `delete` in its cleanup.policy
        // (`delete`, or `compact,delete`), retention deletes the newest checkpoint of an outbox idle for longer than
        // retention.ms, and the relay then stops for good (checkpoint-behind).
        const { resources } = await withDeadline(admin.describeConfigs({ includeSynonyms: false, resources: [{ type: 2 /* TOPIC */, name: this.topic, configNames: ['cleanup.policy'] }] }), timeoutMs, 'Kafka');
        const policy = resources[0]?.configEntries.find((e) => e.configName === 'cleanup.policy')?.configValue;
        // A policy the cluster does not tell (no DescribeConfigs permission) is not held against the topic.
        if (policy !== undefined && !isCompactOnly(policy)) {
          throw new OutboxRelayError(
            'checkpoint-topic',
            `the outbox relay's checkpoint topic ${this.topic} has cleanup.policy=${policy}: retention would delete the checkpoint of an outbox idle for longer than the topic's retention.ms, and the relay would then stop for good. Set cleanup.policy=compact (compact only) on it`,
          );
        }
        return;
      }
      try {
        await withDeadline(
          createTopicsAndWait(admin, [{ topic: this.topic, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }, { name: 'segment.ms', value: '3600000' }] }], timeoutMs),
          timeoutMs,
          'Kafka',
        );
      } catch (err) {
        const type = (err as { type?: string }).type ?? (err as { errors?: Array<{ type?: string }> }).errors?.[0]?.type;
        if (type === 'TOPIC_ALREADY_EXISTS') return;
        if (type === 'TOPIC_AUTHORIZATION_FAILED' || type === 'CLUSTER_AUTHORIZATION_FAILED' || type === 'POLICY_VIOLATION') {
          throw new OutboxRelayError(
            'checkpoint-topic',
            `the outbox relay's checkpoint topic ${this.topic} does not exist and this application may not create it (${type}): create it with one partition and cleanup.policy=compact (docs/outbox.md)`,
          );
        }
        throw err;
      }
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  /**
   * The last checkpoint of this relay in Kafka (batch 0 when there is none), read committed. Looks back from
   * the partition's last stable offset in growing windows, so that a long history is not read whole.
   */
  async last(key: string, timeoutMs: number, producer?: OwnProducer): Promise<Checkpoint> {
    for (;;) {
      // The read's own deadline comes first, so that a wait on an open transaction fails with its holder named.
      const own = timeoutMs - Math.min(5000, Math.floor(timeoutMs / 5));
      const read = await withDeadline(this.read(key, Date.now() + own, producer), timeoutMs, `reading the outbox checkpoint from ${this.topic}`).catch((err) => {
        this.logs.reset();
        throw err;
      });
      if ('batch' in read) return read;
      // A hanging transaction of its own producer is due to be ended: outside the checkpoint read's deadline (what
      // its producer committed is read first, in time of its own), then the checkpoint is read again.
      await this.endOwnHanging(read, producer!);
    }
  }

  private async read(key: string, deadline: number, producer?: OwnProducer): Promise<Checkpoint | DueHanging> {
    // The topic was made or checked at the relay's start (ensureTopic); one the cluster no longer knows is thrown.
    const log = await this.logs.ofKey(this.topic, key);
    const { partition } = log;
    // Read up to the high watermark, once the last stable offset has reached it: the LSO stops at the first open
    // transaction of any producer of the partition, and a checkpoint committed after it would be hidden (an
    // older one read instead, and its batch sent again). This relay's own transactions were settled by its
    // InitProducerId; another's end within its transaction timeout. A transaction begun later starts at or after
    // the high watermark read here, so it hides nothing below it.
    const end = await log.offset('latest', 'uncommitted');
    const waitingSince = Date.now();
    let warned = false;
    let checked = waitingSince;
    for (let stable = await log.offset('latest', 'committed'); stable < end; stable = await log.offset('latest', 'committed')) {
      if (producer && Date.now() - checked >= 1000) {
        checked = Date.now();
        const due = await this.dueOwnHanging(log, producer);
        if (due.length > 0) return { log, due };
      }
      const overdue = Date.now() > deadline;
      if (overdue || (!warned && Date.now() - waitingSince >= HOLDER_WARNING_AFTER_MS)) {
        const held = `${this.topic}[${partition}] holds an open transaction (last stable offset ${stable}, high watermark ${end}), ${await this.holder(partition)}`;
        if (overdue && this.waiting) throw new Error(`${held}: ${this.waiting.why}`);
        if (overdue) throw new Error(`${held}: a transaction ends within its transaction timeout, and a hanging one never does (docs/outbox.md, "Operations"); the relay tries again`);
        this.warn(`${held}; waiting for it to end`);
        warned = true;
      }
      await sleep(200);
    }
    const start = await log.offset('earliest', 'committed');
    let span = 64n;
    for (let to = end; to > start; span *= 8n) {
      const from = to - span > start ? to - span : start;
      const found = await this.lastIn(log, key, from, to);
      if (found) return found;
      to = from;
    }
    return { batch: 0n };
  }

  /**
   * The hanging transactions of the relay's own producer on the checkpoint partition due to be ended: this relay
   * has seen each hold the partition for `abortAfterMs`, its coordinator no longer ends it, and (after a read of
   * what its producer committed that was not whole) `abortAfterMs` have passed since that read.
   */
  private async dueOwnHanging(log: PartitionLog, producer: OwnProducer): Promise<OpenTransaction[]> {
    let open;
    try {
      open = await this.holders.openOn(this.topic, log.partition);
    } catch {
      return []; // named, or not, by the warning of the checkpoint read
    }
    const now = Date.now();
    const seen = new Set(open.map((t) => `${t.producerId}:${t.startOffset}`));
    for (const id of this.heldSince.keys()) if (!seen.has(id)) this.heldSince.delete(id);
    for (const id of seen) if (!this.heldSince.has(id)) this.heldSince.set(id, now);
    if (this.waiting && !seen.has(this.waiting.id)) {
      // Ended meanwhile (by an operator, or another relay).
      this.waiting = undefined;
      this.aborts.ended(RELAY);
    }
    return open.filter((t) => {
      const id = `${t.producerId}:${t.startOffset}`;
      return t.transactionalId === producer.transactionalId && forgottenByCoordinator(t) && now - this.heldSince.get(id)! >= producer.abortAfterMs && this.aborts.mayRead(RELAY, id, producer.abortAfterMs, now);
    });
  }

  /**
   * Ends hanging transactions of the relay's own producer on the checkpoint partition (and wherever else each is
   * open: its batch's events). Its checkpoint record says which batch it carried: a batch the database already
   * counts as relayed was answered committed (its rows are gone), so the transaction is committed; a later one is
   * aborted and sent again from the outbox, less its events Kafka already holds committed (keepDelivered), once
   * they were read whole (HangingAbortPolicy: else it is left open, the checkpoint read waits on it, and it is read
   * again; after the last of COMMITTED_READS_BEFORE_ABORT reads that were not whole, it is aborted anyway). Throws
   * when one cannot be ended (the relay starts over, and tries again).
   */
  private async endOwnHanging({ log, due }: DueHanging, producer: OwnProducer): Promise<void> {
    const { partition } = log;
    for (const t of due) {
      const id = `${t.producerId}:${t.startOffset}`;
      try {
        const records = await log.read(BigInt(t.startOffset), 'uncommitted', 1024 * 1024);
        const first = records.find((r) => r.offset === t.startOffset && !r.isControlRecord);
        if (!first || first.key?.toString('utf8') !== producer.key) throw new Error(`its first record on ${this.topic}[${partition}] (offset ${t.startOffset}) is not this relay's checkpoint`);
        const { batch } = parseCheckpoint(first, this.topic);
        const commit = batch <= producer.knownRelayed;
        const topics = await producer.topics();
        if (!commit) {
          const short = await this.keepDelivered(t, partition, topics, producer);
          if (!producer.running()) throw new Error('the relay is stopping');
          const next = this.aborts.afterRead(RELAY, id, !short);
          if (next.action === 'read-again') {
            // Left open: the checkpoint read waits on it, and the next read of it comes `abortAfterMs` later.
            const why = `its own hanging transaction ${t.transactionalId} (batch ${batch}) is not aborted yet: the events its producer already committed were ${short}; the relay reads them again in ${Math.round(producer.abortAfterMs / 1000)} s (read ${next.reads} of ${next.of}; the last one aborts anyway)`;
            this.waiting = { id, why };
            this.warn(why);
            producer.waiting(why);
            continue;
          }
          if (next.action === 'abort-anyway') {
            this.alarm(
              `its own hanging transaction ${t.transactionalId} (batch ${batch}) is aborted anyway, so that the relay moves: the events its producer already committed were ${short}, ${next.reads} reads in a row. Batch ${batch} is sent again with those of its events that Kafka holds committed and no read found (on the partitions named), a second time with the same message ids (readers that do not deduplicate by message id see them twice); nothing is lost`,
            );
          }
          this.faults?.reach('before-hanging-abort');
        }
        const ended = await this.holders.endEverywhere(t, commit, topics, { topic: this.topic, partition });
        this.aborts.ended(RELAY);
        this.waiting = undefined;
        if (!commit) this.faults?.reach('after-hanging-abort');
        const what = { transactionalId: t.transactionalId, producerId: t.producerId, producerEpoch: t.producerEpoch, coordinatorState: t.state, batch: batch.toString(), [commit ? 'committed' : 'aborted']: ended };
        this.warn(
          commit
            ? `hanging transaction committed ${JSON.stringify(what)}: the relay's own producer had been answered that batch ${batch} committed (the database counts it relayed), and its coordinator never wrote the markers`
            : `hanging transaction aborted ${JSON.stringify(what)}: the relay's own producer left it open and its coordinator no longer ends it; batch ${batch} is sent again from the outbox, less its events Kafka already held committed`,
        );
      } catch (err) {
        // The relay's run loop logs it (the same message again only now and then), and health shows it.
        throw new Error(`its own hanging transaction ${t.transactionalId} on ${this.topic}[${partition}] is not ended yet (${(err as Error).message}); the relay tries again, and if this lasts an operator can end it (docs/outbox.md, "Operations")`);
      }
    }
  }

  /**
   * Before the relay aborts a hanging transaction of its own producer: the records that producer id committed on
   * `topics` (read uncommitted from each partition's leader, from the transaction's first checkpoint record's time
   * less the transaction timeout and COMMITTED_LOOKBACK_MS; a record counted when the producer's commit marker
   * follows it) are taken out of the outbox as relayed (`producer.delivered`). A broker crash can leave a batch's
   * commit markers written on its events' partitions and only the checkpoint's open: after the abort the batch is
   * sent again (its checkpoint aborted) by this relay or the next, and without this the events already committed
   * would go twice. Done before the abort, in the outbox's own table, so that a relay that dies after it leaves
   * nothing to redo, and one that dies before it leaves the transaction for the next relay to find, read and abort:
   * reading before the abort finds what reading after it would (a record of the transaction still open counts
   * neither before nor after; this relay's InitProducerId fenced any other writer of that producer id). The read has
   * COMMITTED_READ_MS of its own. What it found is taken out even when it is not whole (those events are in Kafka
   * whatever follows). Returns '' when the read was whole, else why not; throws when the outbox cannot be updated.
   */
  private async keepDelivered(t: OpenTransaction, partition: number, topics: string[], producer: OwnProducer): Promise<string> {
    let committed: CommittedRecords = new Map();
    let found = 0;
    let since = 0;
    let short = '';
    try {
      this.faults?.reach('hanging-read');
      const at = await this.holders.startedAt(this.topic, partition, t.producerId, t.startOffset);
      if (at === undefined) throw new Error(`its first record on ${this.topic}[${partition}] (offset ${t.startOffset}) was not found`);
      since = at - producer.abortAfterMs - COMMITTED_LOOKBACK_MS;
      const until = Date.now() + COMMITTED_READ_MS;
      const inTime = async () => {
        if (!producer.running()) throw new Error('the relay is stopping');
        if (Date.now() > until) throw new Error(`the read took more than ${COMMITTED_READ_MS / 1000} s`);
      };
      const read = await this.holders.committedRecords(new Set([t.producerId]), topics, since, inTime);
      committed = read.committed;
      for (const n of committed.values()) found += n;
      if (!read.complete) short = `not all read (${read.unread.slice(0, 10).join(', ')}${read.unread.length > 10 ? ` and ${read.unread.length - 10} more` : ''}: no leader, a failed fetch, the read's ${COMMITTED_READ_MS / 1000} s or its bytes used up)`;
    } catch (err) {
      short = `not read (${(err as Error).message})`;
    }
    let kept: number;
    try {
      kept = await producer.delivered(committed);
    } catch (err) {
      throw new Error(`the events its producer already committed could not be taken out of the outbox first (${(err as Error).message}), so it is not aborted yet`);
    }
    if (found > 0 || !short) {
      this.warn(
        `${kept} events of the outbox found committed in Kafka by its own producer (${found} records of producer id ${t.producerId} committed since ${new Date(since).toISOString()}) are taken out of the outbox as relayed, before any abort of its hanging transaction: they are not sent again`,
      );
    }
    return short;
  }

  /** Who holds the partition's last stable offset, as DescribeProducers and ListTransactions tell it. */
  private async holder(partition: number): Promise<string> {
    try {
      const open = await this.holders.openOn(this.topic, partition);
      const unsettled = open.filter((t) => !t.state || !/^(Ongoing|PrepareCommit|PrepareAbort)$/.test(t.state));
      const abort = unsettled.map((t) => `kafka-transactions.sh --bootstrap-server <broker> abort --topic ${this.topic} --partition ${partition} --start-offset ${t.startOffset}`).join(' ; ');
      return `held by ${describeHolders(open)}${unsettled.length ? `. No coordinator has it in progress: if that lasts past the transaction timeout, it is a hanging transaction, which only an abort ends: ${abort}` : ''}`;
    } catch (err) {
      return `its holder not found (${(err as Error).message})`;
    }
  }

  /** The last checkpoint under `key` among the committed records at offsets [from, to). */
  private async lastIn(log: PartitionLog, key: string, from: bigint, to: bigint): Promise<Checkpoint | undefined> {
    let found: Checkpoint | undefined;
    for (let next = from; next < to; ) {
      const records = await log.read(next, 'committed', 4 * 1024 * 1024);
      let last = next - 1n;
      for (const record of records) {
        const offset = BigInt(record.offset);
        if (offset > last) last = offset;
        // Markers, and the records of aborted transactions (marked so by the library's filter, src/kafkajs), are not checkpoints.
        if (offset < next || offset >= to || record.isControlRecord || record.key?.toString('utf8') !== key) continue;
        found = parseCheckpoint(record, this.topic);
      }
      if (last < next) break; // nothing more below `to` (compacted away)
      next = last + 1n;
    }
    return found;
  }
}

function parseCheckpoint(record: LoggedRecord, topic: string): Checkpoint {
  try {
    const value = JSON.parse(record.value?.toString('utf8') ?? '') as { batch?: unknown };
    if (typeof value.batch === 'string' && /^\d+$/.test(value.batch)) return { batch: BigInt(value.batch) };
  } catch {
    // refused below
  }
  throw new OutboxRelayError('checkpoint-unreadable', `the record at ${topic} offset ${record.offset} has the relay's key but is not one of its checkpoints: is another application writing to ${topic}?`);
}

/** Whether a topic's cleanup.policy keeps each key's last record for good: `compact`, and nothing else. */
export function isCompactOnly(policy: string | undefined): boolean {
  const parts = (policy ?? '').split(',').map((p) => p.trim().toLowerCase()).filter(Boolean);
  return parts.length > 0 && parts.every((p) => p === 'compact');
}
