import { recordDigest } from '../kafkajs/record-digest';
import { type LogRecord, type LogRequests, LATEST, type OpenTransaction, type PartitionProducers } from './log-requests';

export type { OpenTransaction } from './log-requests';

/**
 * Coordinator states (ListTransactions' names) in which the coordinator writes no more markers for the producer:
 * a transaction of it still open on a partition then stays open for good. In any other state (Ongoing,
 * PrepareCommit, PrepareAbort, PrepareEpochFence, or one this code does not know) the coordinator may still end it.
 */
const ENDED_BY_COORDINATOR = new Set(['Empty', 'CompleteCommit', 'CompleteAbort', 'Dead']);

/** Whether a transaction's coordinator no longer ends it (named, in a state that writes no more markers). */
export function forgottenByCoordinator(open: OpenTransaction): boolean {
  return open.transactionalId !== undefined && open.state !== undefined && ENDED_BY_COORDINATOR.has(open.state);
}

/** Java's String.hashCode, by which Kafka places a group on a partition of __consumer_offsets. */
export function javaHash(text: string): number {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (Math.imul(31, h) + text.charCodeAt(i)) | 0; // UTF-16 code units, as Java's
  return h;
}

/** The partition of __consumer_offsets that holds a group's offsets (its coordinator leads it). */
export function offsetsPartitionOf(groupId: string, partitions: number): number {
  const hash = javaHash(groupId);
  return (hash === -2147483648 ? 0 : Math.abs(hash)) % partitions;
}

/**
 * How far before a hanging transaction's first record (beyond the transaction timeout) the records its producer
 * committed are looked for: a unit's or a batch's events go out before its offsets or checkpoint, and those of a
 * crash's aftermath may be written late.
 */
export const COMMITTED_LOOKBACK_MS = 120000;

/** How much one read of committed records fetches at most, over all its partitions (what it found up to there counts). */
export const COMMITTED_READ_BYTES = 256 * 1024 * 1024;
const FETCH_BYTES = 1024 * 1024;

/** A control record's key: version (int16), then type (int16): 0 abort, 1 commit. */
function isCommitMarker(record: LogRecord): boolean {
  return !!record.key && record.key.length >= 4 && record.key.readInt16BE(2) === 1;
}

/** The records one producer id committed, as counts of their digests (recordDigest: topic, key, value, headers). */
export type CommittedRecords = Map<string, number>;

/**
 * Reads records of one partition of `topic` in log order: counts in `committed` the digests of the records of
 * `producerIds` whose transaction's commit marker follows them. `open` carries, per producer id, the digests of its
 * transaction not ended yet from one call to the next (an abort marker drops them).
 */
export function committedIn(topic: string, records: readonly LogRecord[], producerIds: ReadonlySet<string>, open: Map<string, string[]>, committed: CommittedRecords): void {
  for (const record of records) {
    const producer = record.producerId;
    if (!producerIds.has(producer)) continue;
    if (record.isControlRecord) {
      const digests = open.get(producer) ?? [];
      open.delete(producer);
      if (isCommitMarker(record)) for (const d of digests) committed.set(d, (committed.get(d) ?? 0) + 1);
    } else if (record.inTransaction) {
      const digest = recordDigest(topic, record.key, record.value, record.headers);
      (open.get(producer) ?? open.set(producer, []).get(producer)!).push(digest);
    }
  }
}

/**
 * Who holds a group's committed offsets unstable: the transactions open on the group's partition of
 * __consumer_offsets (DescribeProducers on its leader, the group coordinator) and their transactional ids
 * (ListTransactions on every broker: each knows the transactions it coordinates). What `kafka-transactions.sh
 * find-hanging` does, for the log and health of a partition whose offsets stay pending past the transaction timeout.
 * On either driver's requests (log-requests.ts).
 */
export class HangingTransactions {
  constructor(private readonly requests: LogRequests) {}

  async holdingOffsetsOf(groupId: string): Promise<{ offsetsPartition: number; open: OpenTransaction[] }> {
    return this.afresh(async () => {
      const offsetsPartition = offsetsPartitionOf(groupId, (await this.requests.partitionsOf('__consumer_offsets')).length);
      const coordinator = await this.requests.groupCoordinator(groupId);
      const described = answeredWithout(await this.requests.describeProducers(coordinator, [{ topic: '__consumer_offsets', partitions: [offsetsPartition] }]));
      return { offsetsPartition, open: await this.named(described.flatMap((p) => p.producers)) };
    });
  }

  /** The transactions open on a partition (DescribeProducers on its leader), named by their coordinators. */
  async openOn(topic: string, partition: number): Promise<OpenTransaction[]> {
    return this.afresh(async () => {
      const leader = (await this.requests.partitionsOf(topic)).find((p) => p.partition === partition)?.leader;
      if (leader === undefined || leader < 0) return [];
      const described = answeredWithout(await this.requests.describeProducers(leader, [{ topic, partitions: [partition] }]));
      return this.named(described.flatMap((p) => p.producers));
    });
  }

  /**
   * Ends a hanging transaction of one producer with a marker written by each partition's leader, what an operator
   * does with `kafka-transactions.sh abort`, partition by partition. The transaction is looked for, with
   * DescribeProducers, on every partition of `topics` (those the producer may write) and on `last` (the partition
   * known to hold it: the group's offsets, the relay's checkpoint), which is ended after all the others, so that
   * a failure part-way leaves the partition that holds the library back still held. It is the producer's open
   * transaction wherever its producer id has one at the holder's epoch or an earlier one; each partition's marker
   * carries the epoch it has there. Nothing is written when a partition cannot be described (no leader, an error):
   * a transaction ended on some of its partitions only would let a later one of the same producer take in the
   * rest. Returns the partitions ended; throws naming what was and was not done.
   */
  async endEverywhere(holder: OpenTransaction, commit: boolean, topics: string[], last: { topic: string; partition: number }): Promise<string[]> {
    return this.afresh(() => this.end(holder, commit, topics, last));
  }

  private async end(holder: OpenTransaction, commit: boolean, topics: string[], last: { topic: string; partition: number }): Promise<string[]> {
    const wanted = [...new Set([...topics, last.topic])];
    const byLeader = new Map<number, Map<string, number[]>>();
    const leaderless: string[] = [];
    for (const topic of wanted) {
      for (const p of await this.requests.partitionsOf(topic, true)) {
        if (topic === last.topic && p.partition !== last.partition && !topics.includes(topic)) continue;
        if (p.leader < 0) {
          leaderless.push(`${topic}[${p.partition}]`);
          continue;
        }
        const led = byLeader.get(p.leader) ?? byLeader.set(p.leader, new Map()).get(p.leader)!;
        led.set(topic, [...(led.get(topic) ?? []), p.partition]);
      }
    }
    if (leaderless.length) throw new Error(`partitions without a leader (${leaderless.join(', ')}): nothing was written`);

    const open: Array<{ leader: number; topic: string; partition: number; producerEpoch: number; coordinatorEpoch: number }> = [];
    for (const [leader, led] of byLeader) {
      const described: PartitionProducers[] = await this.requests.describeProducers(
        leader,
        [...led].map(([topic, partitions]) => ({ topic, partitions })),
      );
      const failed = described.filter((p) => p.errorCode !== 0);
      if (failed.length) throw new Error(`DescribeProducers failed for ${failed.map((p) => `${p.topic}[${p.partition}] (error code ${p.errorCode})`).join(', ')}: nothing was written`);
      for (const p of described) {
        for (const t of p.producers) {
          if (t.producerId === holder.producerId && t.producerEpoch <= holder.producerEpoch) {
            open.push({ leader, topic: p.topic, partition: p.partition, producerEpoch: t.producerEpoch, coordinatorEpoch: Math.max(t.coordinatorEpoch ?? -1, 0) });
          }
        }
      }
    }
    const isLast = (o: { topic: string; partition: number }) => o.topic === last.topic && o.partition === last.partition;
    const ended: string[] = [];
    for (const round of [open.filter((o) => !isLast(o)), open.filter(isLast)]) {
      // One request per leader, producer epoch and coordinator epoch (a marker carries one of each).
      const requests = new Map<string, typeof open>();
      for (const o of round) {
        const key = `${o.leader}:${o.producerEpoch}:${o.coordinatorEpoch}`;
        requests.set(key, [...(requests.get(key) ?? []), o]);
      }
      for (const these of requests.values()) {
        const { leader, producerEpoch, coordinatorEpoch } = these[0];
        const grouped = new Map<string, number[]>();
        for (const o of these) grouped.set(o.topic, [...(grouped.get(o.topic) ?? []), o.partition]);
        const answers = await this.requests.writeTxnMarkers(
          leader,
          { producerId: holder.producerId, producerEpoch, coordinatorEpoch, commit },
          [...grouped].map(([topic, partitions]) => ({ topic, partitions })),
        );
        const refused = answers.filter((a) => a.errorCode !== 0);
        ended.push(...answers.filter((a) => a.errorCode === 0).map((a) => `${a.topic}[${a.partition}]`));
        if (refused.length) {
          throw new Error(`the ${commit ? 'commit' : 'abort'} marker was refused on ${refused.map((a) => `${a.topic}[${a.partition}] (error code ${a.errorCode})`).join(', ')}${ended.length ? `; written on ${ended.join(', ')}` : ''}`);
        }
      }
    }
    return ended;
  }

  /**
   * When the transaction of `producerId` open on a partition since `startOffset` wrote its first record there (the
   * record's timestamp, ms): read uncommitted from the partition's leader. Undefined when that record is not found.
   */
  async startedAt(topic: string, partition: number, producerId: string, startOffset: string): Promise<number | undefined> {
    return this.afresh(async () => {
      const records = await this.fetchFrom(await this.leaderOf(topic, partition), topic, partition, BigInt(startOffset));
      const record = records.find((r) => r.offset === startOffset && r.producerId === producerId);
      return record ? Number(record.timestamp) : undefined;
    });
  }

  /** A partition's high watermark: every record fetched from it so far lies below. */
  async latestOffset(topic: string, partition: number): Promise<bigint> {
    return this.afresh(async () => this.requests.listOffset(await this.leaderOf(topic, partition), topic, partition, LATEST, 'uncommitted'));
  }

  /**
   * The records that producers (by producer id) wrote in transactions that committed, on every partition of
   * `topics`, from each partition's first record of timestamp `sinceMs` or later (record timestamps: the
   * producer's clock), as counts of their digests. Read uncommitted from each partition's leader: a producer's
   * records count once its commit marker follows them; an abort marker drops them, and a transaction still open
   * counts nothing. What cannot be read counts nothing, and `complete` is then false: a topic the cluster does not
   * know, a partition without a leader or whose read fails (the others are still read), a read past COMMITTED_READ_BYTES in all, a `between` that
   * fails (it runs after each fetch and each partition: a group member's heartbeat, which fails when the group
   * rebalances; the read stops there). A caller sends again whatever is not counted, never fewer.
   */
  async committedRecords(
    producerIds: ReadonlySet<string>,
    topics: string[],
    sinceMs: number,
    between: () => Promise<void> = async () => undefined,
  ): Promise<{ committed: CommittedRecords; complete: boolean; unread: string[] }> {
    const committed: CommittedRecords = new Map();
    const unread: string[] = [];
    const readable: Array<{ topic: string; partitions: number[] }> = [];
    for (const topic of topics) {
      // A topic the cluster does not know (deleted, or refused) stops none of the others' reads.
      try {
        readable.push({ topic, partitions: (await this.requests.partitionsOf(topic)).map((p) => p.partition) });
      } catch (err) {
        unread.push(`${topic} (${(err as Error).message})`);
      }
    }
    let budget = COMMITTED_READ_BYTES;
    let stopped = false;
    const pause = async () => {
      if (!stopped) await between().catch(() => (stopped = true));
    };
    for (const { topic, partitions } of readable) {
      for (const partition of partitions) {
        if (stopped || budget <= 0) {
          unread.push(`${topic}[${partition}]`);
          continue;
        }
        // Per producer id, the digests of its transaction still open at this point of the log.
        const open = new Map<string, string[]>();
        try {
          const leader = await this.leaderOf(topic, partition);
          let from = await this.requests.listOffset(leader, topic, partition, sinceMs, 'uncommitted');
          const end = await this.requests.listOffset(leader, topic, partition, LATEST, 'uncommitted');
          while (from >= 0n && from < end) {
            if (stopped || budget <= 0) throw new Error('stopped');
            budget -= FETCH_BYTES;
            const records = await this.fetchFrom(leader, topic, partition, from);
            if (records.length === 0) throw new Error(`nothing fetched from offset ${from} below ${end}`);
            committedIn(topic, records, producerIds, open, committed);
            from = BigInt(records[records.length - 1].offset) + 1n;
            await pause();
          }
        } catch (err) {
          this.requests.reset();
          // What was read of the partition before still counts (each record counted followed its commit marker).
          unread.push(stopped || budget <= 0 ? `${topic}[${partition}]` : `${topic}[${partition}] (${(err as Error).message})`);
        }
        await pause();
      }
    }
    return { committed, complete: unread.length === 0, unread };
  }

  async disconnect(): Promise<void> {
    await this.requests.disconnect();
  }

  /** A question whose failure leaves the next to connect and find coordinators afresh. */
  private async afresh<T>(question: () => Promise<T>): Promise<T> {
    try {
      return await question();
    } catch (err) {
      this.requests.reset();
      throw err;
    }
  }

  /** One Fetch of a partition from `from`, read uncommitted: the records at `from` and after, or why not. */
  private async fetchFrom(leader: number, topic: string, partition: number, from: bigint): Promise<LogRecord[]> {
    const { errorCode, records } = await this.requests.fetch(leader, topic, partition, from, 'uncommitted', FETCH_BYTES);
    if (errorCode) throw new Error(`fetching ${topic}[${partition}] from offset ${from} failed (error code ${errorCode})`);
    return records.filter((r) => BigInt(r.offset) >= from);
  }

  /** The broker leading a partition, as the metadata says now. */
  private async leaderOf(topic: string, partition: number): Promise<number> {
    const leader = (await this.requests.partitionsOf(topic)).find((p) => p.partition === partition)?.leader;
    if (leader === undefined || leader < 0) throw new Error(`${topic}[${partition}] has no leader`);
    return leader;
  }

  /** Each open transaction with its transactional id and state, from ListTransactions on every broker. */
  private async named(open: OpenTransaction[]): Promise<OpenTransaction[]> {
    await this.name(open);
    return open;
  }

  /**
   * Names each open transaction (transactional id, coordinator state) with ListTransactions on every broker, side by
   * side (`ask` bounds each question). Returns the broker that named each transactional id (its coordinator) and
   * the brokers that did not answer, with why: their transactions stay unnamed (the producer id is still told).
   */
  async name(open: OpenTransaction[], ask: <T>(question: Promise<T>) => Promise<T> = (q) => q): Promise<{ coordinators: Map<string, number>; unanswered: Map<number, string> }> {
    const coordinators = new Map<string, number>();
    const unanswered = new Map<number, string>();
    if (open.length === 0) return { coordinators, unanswered };
    const ids = [...new Set(open.map((t) => t.producerId))];
    await Promise.all(
      (await ask(this.requests.brokers())).map(async (broker) => {
        try {
          for (const s of await ask(this.requests.listTransactions(broker, ids))) {
            for (const t of open.filter((o) => o.producerId === s.producerId)) {
              // Two brokers naming it differently (coordination moving between them): its state is not known.
              const state = t.state === undefined || t.state === s.state ? s.state : `${t.state} or ${s.state}`;
              Object.assign(t, { transactionalId: s.transactionalId, state });
              coordinators.set(s.transactionalId, broker);
            }
          }
        } catch (err) {
          unanswered.set(broker, (err as Error).message);
        }
      }),
    );
    return { coordinators, unanswered };
  }
}

/**
 * DescribeProducers' answers, each partition's error code thrown: a partition its leader or coordinator no longer
 * serves (it moved) is not one without open transactions.
 */
function answeredWithout(described: PartitionProducers[]): PartitionProducers[] {
  const failed = described.filter((p) => p.errorCode !== 0);
  if (failed.length) throw new Error(`DescribeProducers failed for ${failed.map((p) => `${p.topic}[${p.partition}] (error code ${p.errorCode})`).join(', ')}`);
  return described;
}
