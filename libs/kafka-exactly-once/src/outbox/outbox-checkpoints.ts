import { COMMITTED_LOOKBACK_MS, type CommittedRecords, forgottenByCoordinator, HangingTransactions, PartitionLogs, type KafkaClient, type LoggedRecord, type Message, type OpenTransaction, type PartitionLog } from '../kafkajs';
import { withDeadline } from '../engine/deadline';
import type { FaultInjector } from '../engine/fault-injector';
import { createTopicsAndWait } from '../kafka-topics';
import { sleep } from '../engine/sleep';
import { describeHolders } from '../errors/hanging-transaction.error';
import { OutboxRelayError } from '../errors/outbox-relay.error';
/** How long the read waits on an open transaction before it names it in a warning (once per read). */
const HOLDER_WARNING_AFTER_MS = 5000;
/** What the read of an aborted transaction's committed events leaves of the checkpoint read's time, for what follows it. */
const KEEP_DELIVERED_MARGIN_MS = 3000;

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

  constructor(
    private readonly kafka: KafkaClient,
    private readonly topic: string,
    /** Told which transaction holds the checkpoint partition's last stable offset, once a read has waited on it. */
    private readonly warn: (message: string) => void = () => undefined,
    private readonly faults?: FaultInjector,
  ) {
    this.logs = new PartitionLogs(kafka);
    this.holders = new HangingTransactions(kafka);
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
    const admin = this.kafka.admin({ retry: { retries: 2 } });
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
    // The read's own deadline comes first, so that a wait on an open transaction fails with its holder named.
    const own = timeoutMs - Math.min(5000, Math.floor(timeoutMs / 5));
    return withDeadline(this.read(key, Date.now() + own, producer), timeoutMs, `reading the outbox checkpoint from ${this.topic}`).catch((err) => {
      this.logs.reset();
      throw err;
    });
  }

  private async read(key: string, deadline: number, producer?: OwnProducer): Promise<Checkpoint> {
    const log = await this.logs.ofKey(this.topic, key);
    if (!log) throw new OutboxRelayError('checkpoint-topic', `the outbox relay's checkpoint topic ${this.topic} does not exist`);
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
        if (await this.endOwnHanging(log, producer, deadline)) continue;
      }
      const overdue = Date.now() > deadline;
      if (overdue || (!warned && Date.now() - waitingSince >= HOLDER_WARNING_AFTER_MS)) {
        const held = `${this.topic}[${partition}] holds an open transaction (last stable offset ${stable}, high watermark ${end}), ${await this.holder(partition)}`;
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
   * Ends a hanging transaction of the relay's own producer on the checkpoint partition (and wherever else it is
   * open: its batch's events), once this relay has seen it hold the partition for `abortAfterMs` and its
   * coordinator no longer ends it. Its checkpoint record says which batch it carried: a batch the database
   * already counts as relayed was answered committed (its rows are gone), so the transaction is committed; a later
   * one is aborted and sent again from the outbox. Returns whether it ended one.
   */
  private async endOwnHanging(log: PartitionLog, producer: OwnProducer, deadline: number): Promise<boolean> {
    const { partition } = log;
    let open;
    try {
      open = await this.holders.openOn(this.topic, partition);
    } catch {
      return false; // named, or not, by the warning below
    }
    const now = Date.now();
    const seen = new Set(open.map((t) => `${t.producerId}:${t.startOffset}`));
    for (const id of this.heldSince.keys()) if (!seen.has(id)) this.heldSince.delete(id);
    for (const id of seen) if (!this.heldSince.has(id)) this.heldSince.set(id, now);
    const due = open.filter((t) => t.transactionalId === producer.transactionalId && forgottenByCoordinator(t) && now - this.heldSince.get(`${t.producerId}:${t.startOffset}`)! >= producer.abortAfterMs);
    for (const t of due) {
      try {
        const records = await log.read(BigInt(t.startOffset), 'uncommitted', 1024 * 1024);
        const first = records.find((r) => r.offset === t.startOffset && !r.isControlRecord);
        if (!first || first.key?.toString('utf8') !== producer.key) throw new Error(`its first record on ${this.topic}[${partition}] (offset ${t.startOffset}) is not this relay's checkpoint`);
        const { batch } = parseCheckpoint(first, this.topic);
        const commit = batch <= producer.knownRelayed;
        const topics = await producer.topics();
        if (!commit) {
          await this.keepDelivered(t, partition, topics, producer, deadline);
          this.faults?.reach('before-hanging-abort');
        }
        const ended = await this.holders.endEverywhere(t, commit, topics, { topic: this.topic, partition });
        if (!commit) this.faults?.reach('after-hanging-abort');
        const what = { transactionalId: t.transactionalId, producerId: t.producerId, producerEpoch: t.producerEpoch, coordinatorState: t.state, batch: batch.toString(), [commit ? 'committed' : 'aborted']: ended };
        this.warn(
          commit
            ? `hanging transaction committed ${JSON.stringify(what)}: the relay's own producer had been answered that batch ${batch} committed (the database counts it relayed), and its coordinator never wrote the markers`
            : `hanging transaction aborted ${JSON.stringify(what)}: the relay's own producer left it open and its coordinator no longer ends it; batch ${batch} is sent again from the outbox, less its events Kafka already held committed`,
        );
      } catch (err) {
        this.warn(`hanging transaction of the relay's own producer ${t.transactionalId} not ended (${(err as Error).message}): an operator must end it (docs/outbox.md, "Operations")`);
        return false;
      }
    }
    return due.length > 0;
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
   * neither before nor after; this relay's InitProducerId fenced any other writer of that producer id). What cannot
   * be read (by `deadline` less KEEP_DELIVERED_MARGIN_MS among it) is sent again (a second time, with the same message
   * ids), never fewer.
   */
  private async keepDelivered(t: OpenTransaction, partition: number, topics: string[], producer: OwnProducer, deadline: number): Promise<void> {
    let committed: CommittedRecords = new Map();
    let found = 0;
    let since = 0;
    try {
      const at = await this.holders.startedAt(this.topic, partition, t.producerId, t.startOffset);
      if (at === undefined) throw new Error(`its first record on ${this.topic}[${partition}] (offset ${t.startOffset}) was not found`);
      since = at - producer.abortAfterMs - COMMITTED_LOOKBACK_MS;
      // Within the checkpoint read's own time, with a moment left for the outbox's statement and the abort.
      const inTime = async () => {
        if (Date.now() > deadline - KEEP_DELIVERED_MARGIN_MS) throw new Error('the checkpoint read is out of time');
      };
      const read = await this.holders.committedRecords(new Set([t.producerId]), topics, since, inTime);
      committed = read.committed;
      for (const n of committed.values()) found += n;
      if (!read.complete) this.warn(`the records its own producer committed were not all read (${read.unread.slice(0, 10).join(', ')}${read.unread.length > 10 ? ` and ${read.unread.length - 10} more` : ''}): events committed there may be sent a second time, with the same message ids`);
    } catch (err) {
      this.warn(`which events its own producer already committed could not be read (${(err as Error).message}): the batch is sent again whole, events already committed a second time with the same message ids`);
    }
    const kept = await producer.delivered(committed);
    this.warn(
      `${kept} events of the outbox found committed in Kafka by its own producer (${found} records of producer id ${t.producerId} committed since ${new Date(since).toISOString()}) are taken out of the outbox as relayed before its hanging transaction is aborted: they are not sent again`,
    );
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
