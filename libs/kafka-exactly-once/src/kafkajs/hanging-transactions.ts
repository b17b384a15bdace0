import { ClusterClient, type KafkaJsBroker, ProtocolRequest, sendRequest } from './producer/kafkajs-internals';
import { decodedHeaders, recordDigest } from './record-digest';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Decoder = require('kafkajs/src/protocol/decoder');

const WRITE_TXN_MARKERS = 27;
const DESCRIBE_PRODUCERS = 61;
const LIST_TRANSACTIONS = 66;

/** A transaction open on a partition: its producer, since which offset, and its transactional id when known. */
export interface OpenTransaction {
  producerId: string;
  producerEpoch: number;
  startOffset: string;
  transactionalId?: string;
  state?: string;
  /** The epoch of the coordinator that last wrote a marker for this producer here (-1: none yet). */
  coordinatorEpoch?: number;
}

/** The open transactions of one partition, as DescribeProducers answers. */
export interface PartitionProducers {
  topic: string;
  partition: number;
  errorCode: number;
  producers: OpenTransaction[];
}

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

/** A compact array of topics, each with a compact array of partition numbers and empty tagged fields. */
function writeTopicPartitions(encoder: any, topics: Array<{ topic: string; partitions: number[] }>): any {
  encoder.writeUVarInt(topics.length + 1);
  for (const { topic, partitions } of topics) {
    encoder.writeUVarIntString(topic).writeUVarInt(partitions.length + 1);
    for (const p of partitions) encoder.writeInt32(p);
    encoder.writeUVarInt(0);
  }
  return encoder;
}

/** DescribeProducers v0 (KIP-664, flexible): the producers of partitions (all led by one broker) with their open transactions. */
export function describeProducersV0(topics: Array<{ topic: string; partitions: number[] }>): ProtocolRequest {
  return {
    request: {
      apiKey: DESCRIBE_PRODUCERS,
      apiVersion: 0,
      apiName: 'DescribeProducers',
      // KafkaJS writes request header v1: the empty tagged fields of header v2 open the body.
      encode: async () => {
        return writeTopicPartitions(new Encoder().writeUVarInt(0), topics).writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields(); // response header v1
        decoder.readInt32(); // throttle time
        const topics = decoder.readUVarIntArray((t: any) => {
          const topic = t.readUVarIntString();
          const partitions = t.readUVarIntArray((p: any) => {
            const partition = p.readInt32();
            const errorCode = p.readInt16();
            p.readUVarIntString(); // error message
            const producers: OpenTransaction[] = (
              p.readUVarIntArray((s: any) => {
                const producerId = s.readInt64().toString();
                const producerEpoch = s.readInt32();
                s.readInt32(); // last sequence
                s.readInt64(); // last timestamp
                const coordinatorEpoch = s.readInt32();
                const startOffset = s.readInt64().toString();
                s.readTaggedFields();
                return { producerId, producerEpoch, startOffset, coordinatorEpoch };
              }) ?? []
            ).filter((s: OpenTransaction) => BigInt(s.startOffset) >= 0n);
            p.readTaggedFields();
            return { topic, partition, errorCode, producers };
          });
          t.readTaggedFields();
          return partitions ?? [];
        });
        return (topics ?? []).flat();
      },
      parse: async (data: unknown) => data,
    },
  };
}

/** One partition's answer to WriteTxnMarkers. */
export interface MarkerAnswer {
  topic: string;
  partition: number;
  errorCode: number;
}

/**
 * WriteTxnMarkers v1 (flexible): a commit or abort marker for one producer's transaction on partitions led by the
 * broker it is sent to; an abort is what `kafka-transactions.sh abort` sends (KIP-664; the ClusterAction
 * permission on the cluster).
 */
export function txnMarkersV1(producerId: string, producerEpoch: number, coordinatorEpoch: number, commit: boolean, topics: Array<{ topic: string; partitions: number[] }>): ProtocolRequest {
  return {
    request: {
      apiKey: WRITE_TXN_MARKERS,
      apiVersion: 1,
      apiName: 'WriteTxnMarkers',
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarInt(2); // header's tagged fields; one marker
        encoder.writeInt64(producerId).writeInt16(producerEpoch).writeBoolean(commit);
        return writeTopicPartitions(encoder, topics).writeInt32(coordinatorEpoch).writeUVarInt(0).writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields(); // response header v1
        const markers =
          decoder.readUVarIntArray((m: any) => {
            m.readInt64(); // producer id
            const topics =
              m.readUVarIntArray((t: any) => {
                const topic = t.readUVarIntString();
                const partitions =
                  t.readUVarIntArray((p: any) => {
                    const partition = p.readInt32();
                    const errorCode = p.readInt16();
                    p.readTaggedFields();
                    return { topic, partition, errorCode };
                  }) ?? [];
                t.readTaggedFields();
                return partitions;
              }) ?? [];
            m.readTaggedFields();
            return topics.flat();
          }) ?? [];
        return markers.flat();
      },
      parse: async (data: unknown) => data,
    },
  };
}

/** ListTransactions v0 (KIP-664, flexible), filtered by producer ids: their transactional ids and states. */
export function listTransactionsV0(producerIds: string[]): ProtocolRequest {
  return {
    request: {
      apiKey: LIST_TRANSACTIONS,
      apiVersion: 0,
      apiName: 'ListTransactions',
      encode: async () => {
        const encoder = new Encoder().writeUVarInt(0).writeUVarInt(1).writeUVarInt(producerIds.length + 1);
        for (const id of producerIds) encoder.writeInt64(id);
        return encoder.writeUVarInt(0);
      },
    },
    response: {
      decode: async (payload: Buffer) => {
        const decoder = new Decoder(payload);
        decoder.readTaggedFields();
        decoder.readInt32(); // throttle time
        decoder.readInt16(); // error code
        decoder.readUVarIntArray((d: any) => d.readUVarIntString()); // unknown state filters
        const states =
          decoder.readUVarIntArray((d: any) => {
            const transactionalId = d.readUVarIntString();
            const producerId = d.readInt64().toString();
            const state = d.readUVarIntString();
            d.readTaggedFields();
            return { transactionalId, producerId, state };
          }) ?? [];
        return states;
      },
      parse: async (data: unknown) => data,
    },
  };
}

/** One record as KafkaJS's fetch decoder gives it, with what this file reads of it. */
export interface LogRecord {
  offset: string;
  timestamp: string;
  key: Buffer | null;
  value?: Buffer | null;
  headers?: Record<string, unknown>;
  isControlRecord: boolean;
  batchContext?: { producerId?: string; inTransaction?: boolean };
}

/** What this file asks of a KafkaJS Broker besides its requests by definition. */
interface LogBroker {
  listOffsets(args: object): Promise<{ responses: Array<{ partitions: Array<{ offset: string }> }> }>;
  fetch(args: object): Promise<{ responses: Array<{ partitions: Array<{ errorCode?: number; messages: LogRecord[] }> }> }>;
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

/** ListOffsets, read uncommitted: a partition's first offset of a timestamp or later (-1: none), or (timestamp -1) its high watermark. */
async function offsetAt(broker: LogBroker, topic: string, partition: number, timestamp: number): Promise<bigint> {
  const answer = await broker.listOffsets({ replicaId: -1, isolationLevel: 0, topics: [{ topic, partitions: [{ partition, timestamp }] }] });
  return BigInt(answer.responses[0].partitions[0].offset);
}

/** One Fetch of a partition from `from`, read uncommitted: the records at `from` and after, or why not. */
async function fetchFrom(broker: LogBroker, topic: string, partition: number, from: bigint): Promise<LogRecord[]> {
  const answer = await broker.fetch({ replicaId: -1, isolationLevel: 0, maxWaitTime: 100, minBytes: 1, maxBytes: FETCH_BYTES, topics: [{ topic, partitions: [{ partition, fetchOffset: from.toString(), maxBytes: FETCH_BYTES }] }] });
  const got = answer.responses[0]?.partitions[0];
  if (got?.errorCode) throw new Error(`fetching ${topic}[${partition}] from offset ${from} failed (error code ${got.errorCode})`);
  return (got?.messages ?? []).filter((r) => BigInt(r.offset) >= from);
}

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
    const producer = String(record.batchContext?.producerId);
    if (!producerIds.has(producer)) continue;
    if (record.isControlRecord) {
      const digests = open.get(producer) ?? [];
      open.delete(producer);
      if (isCommitMarker(record)) for (const d of digests) committed.set(d, (committed.get(d) ?? 0) + 1);
    } else if (record.batchContext?.inTransaction) {
      const digest = recordDigest(topic, record.key, record.value ?? null, decodedHeaders(record.headers));
      (open.get(producer) ?? open.set(producer, []).get(producer)!).push(digest);
    }
  }
}

/**
 * Who holds a group's committed offsets unstable: the transactions open on the group's partition of
 * __consumer_offsets (DescribeProducers on its leader, the group coordinator) and their transactional ids
 * (ListTransactions on every broker: each knows the transactions it coordinates). What `kafka-transactions.sh
 * find-hanging` does, for the log and health of a partition whose offsets stay pending past the transaction timeout.
 */
export class HangingTransactions extends ClusterClient {
  async holdingOffsetsOf(groupId: string): Promise<{ offsetsPartition: number; open: OpenTransaction[] }> {
    await this.connected();
    await this.cluster.addMultipleTargetTopics(['__consumer_offsets']);
    const partitions = this.cluster.findTopicPartitionMetadata('__consumer_offsets').length || 50;
    const offsetsPartition = offsetsPartitionOf(groupId, partitions);
    const coordinator = await this.cluster.findGroupCoordinator({ groupId });
    const described = await sendRequest<PartitionProducers[]>(coordinator, describeProducersV0([{ topic: '__consumer_offsets', partitions: [offsetsPartition] }]));
    return { offsetsPartition, open: await this.named(described.flatMap((p) => p.producers)) };
  }

  /** The transactions open on a partition (DescribeProducers on its leader), named by their coordinators. */
  async openOn(topic: string, partition: number): Promise<OpenTransaction[]> {
    await this.connected();
    await this.cluster.addMultipleTargetTopics([topic]);
    const leader = this.cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)?.leader;
    if (leader === undefined || leader < 0) return [];
    const broker = await this.cluster.findBroker({ nodeId: leader });
    const described = await sendRequest<PartitionProducers[]>(broker, describeProducersV0([{ topic, partitions: [partition] }]));
    return this.named(described.flatMap((p) => p.producers));
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
    await this.connected();
    const wanted = [...new Set([...topics, last.topic])];
    await this.cluster.addMultipleTargetTopics(wanted);
    await this.cluster.refreshMetadata();
    const byLeader = new Map<number, Map<string, number[]>>();
    const leaderless: string[] = [];
    for (const topic of wanted) {
      for (const p of this.cluster.findTopicPartitionMetadata(topic)) {
        if (topic === last.topic && p.partitionId !== last.partition && !topics.includes(topic)) continue;
        if (p.leader === undefined || p.leader < 0) {
          leaderless.push(`${topic}[${p.partitionId}]`);
          continue;
        }
        const led = byLeader.get(p.leader) ?? byLeader.set(p.leader, new Map()).get(p.leader)!;
        led.set(topic, [...(led.get(topic) ?? []), p.partitionId]);
      }
    }
    if (leaderless.length) throw new Error(`partitions without a leader (${leaderless.join(', ')}): nothing was written`);

    const open: Array<{ leader: number; topic: string; partition: number; producerEpoch: number; coordinatorEpoch: number }> = [];
    for (const [leader, led] of byLeader) {
      const broker = await this.cluster.findBroker({ nodeId: leader });
      const described = await sendRequest<PartitionProducers[]>(broker, describeProducersV0([...led].map(([topic, partitions]) => ({ topic, partitions }))));
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
        const broker = await this.cluster.findBroker({ nodeId: leader });
        const answers = await sendRequest<MarkerAnswer[]>(broker, txnMarkersV1(holder.producerId, producerEpoch, coordinatorEpoch, commit, [...grouped].map(([topic, partitions]) => ({ topic, partitions }))));
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
    const records = await fetchFrom(await this.leaderOf(topic, partition), topic, partition, BigInt(startOffset));
    const record = records.find((r) => r.offset === startOffset && String(r.batchContext?.producerId) === producerId);
    return record ? Number(record.timestamp) : undefined;
  }

  /** A partition's high watermark: every record fetched from it so far lies below. */
  async latestOffset(topic: string, partition: number): Promise<bigint> {
    return offsetAt(await this.leaderOf(topic, partition), topic, partition, -1);
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
    await this.connected();
    const committed: CommittedRecords = new Map();
    const unread: string[] = [];
    const readable: string[] = [];
    try {
      await this.cluster.addMultipleTargetTopics(topics);
      readable.push(...topics);
    } catch {
      // A topic the cluster does not know (deleted, or refused) stops none of the others' reads.
      for (const topic of topics) {
        try {
          await this.cluster.addMultipleTargetTopics([topic]);
          readable.push(topic);
        } catch (err) {
          unread.push(`${topic} (${(err as Error).message})`);
        }
      }
    }
    let budget = COMMITTED_READ_BYTES;
    let stopped = false;
    const pause = async () => {
      if (!stopped) await between().catch(() => (stopped = true));
    };
    for (const topic of readable) {
      for (const { partitionId: partition } of this.cluster.findTopicPartitionMetadata(topic)) {
        if (stopped || budget <= 0) {
          unread.push(`${topic}[${partition}]`);
          continue;
        }
        // Per producer id, the digests of its transaction still open at this point of the log.
        const open = new Map<string, string[]>();
        try {
          const broker = await this.leaderOf(topic, partition);
          let from = await offsetAt(broker, topic, partition, sinceMs);
          const end = await offsetAt(broker, topic, partition, -1);
          while (from >= 0n && from < end) {
            if (stopped || budget <= 0) throw new Error('stopped');
            budget -= FETCH_BYTES;
            const records = await fetchFrom(broker, topic, partition, from);
            if (records.length === 0) throw new Error(`nothing fetched from offset ${from} below ${end}`);
            committedIn(topic, records, producerIds, open, committed);
            from = BigInt(records[records.length - 1].offset) + 1n;
            await pause();
          }
        } catch (err) {
          // What was read of the partition before still counts (each record counted followed its commit marker).
          unread.push(stopped || budget <= 0 ? `${topic}[${partition}]` : `${topic}[${partition}] (${(err as Error).message})`);
        }
        await pause();
      }
    }
    return { committed, complete: unread.length === 0, unread };
  }

  /** The broker leading a partition, as the metadata says now. */
  private async leaderOf(topic: string, partition: number): Promise<KafkaJsBroker & LogBroker> {
    await this.connected();
    await this.cluster.addMultipleTargetTopics([topic]);
    const leader = this.cluster.findTopicPartitionMetadata(topic).find((p) => p.partitionId === partition)?.leader;
    if (leader === undefined || leader < 0) throw new Error(`${topic}[${partition}] has no leader`);
    return (await this.cluster.findBroker({ nodeId: leader })) as KafkaJsBroker & LogBroker;
  }

  /** Each open transaction with its transactional id and state, from ListTransactions on every broker. */
  private async named(open: OpenTransaction[]): Promise<OpenTransaction[]> {
    if (open.length === 0) return open;
    const ids = open.map((t) => t.producerId);
    for (const nodeId of this.cluster.getNodeIds()) {
      try {
        const broker = await this.cluster.findBroker({ nodeId });
        const states = await sendRequest<Array<{ transactionalId: string; producerId: string; state: string }>>(broker, listTransactionsV0(ids));
        for (const s of states) {
          const t = open.find((o) => o.producerId === s.producerId);
          if (!t) continue;
          // Two brokers naming it differently (coordination moving between them): its state is not known.
          const state = t.state === undefined || t.state === s.state ? s.state : `${t.state} or ${s.state}`;
          Object.assign(t, { transactionalId: s.transactionalId, state });
        }
      } catch {
        // A broker that does not answer: its transactions stay unnamed (the producer id is still told).
      }
    }
    return open;
  }
}
