import type { DigestHeader } from '../kafkajs/record-digest';
import { KafkaProtocolError } from './kafka-errors';
import type { ProducerCluster } from './producer-parts';

/** Isolation levels of Fetch and ListOffsets. */
export type Isolation = 'committed' | 'uncommitted';

/** A transaction open on a partition: its producer, since which offset, and its transactional id when known. */
export interface OpenTransaction {
  producerId: string;
  producerEpoch: number;
  startOffset: string;
  transactionalId?: string;
  state?: string;
  /** The epoch of the coordinator that last wrote a marker for this producer here (-1: none yet). */
  coordinatorEpoch?: number;
  /** The timestamp (ms) of the producer's last write to the partition, as DescribeProducers answers (-1: unknown). */
  lastTimestamp?: string;
}

/** The open transactions of one partition, as DescribeProducers answers (those with a start offset only). */
export interface PartitionProducers {
  topic: string;
  partition: number;
  errorCode: number;
  producers: OpenTransaction[];
}

/** One partition's answer to WriteTxnMarkers. */
export interface MarkerAnswer {
  topic: string;
  partition: number;
  errorCode: number;
}

/** A transactional id's producer and state, as ListTransactions answers. */
export interface TransactionListing {
  transactionalId: string;
  producerId: string;
  state: string;
}

/** A transactional id as its coordinator describes it (DescribeTransactions). */
export interface TransactionDescription {
  transactionalId: string;
  errorCode: number;
  state: string;
  /** The producer's transaction timeout: the coordinator aborts a transaction open longer. */
  timeoutMs: number;
  /** When the coordinator began its current transaction (ms; -1: none). */
  startTimeMs: string;
  producerId: string;
  producerEpoch: number;
}

/** One partition's offset as ListOffsets answers it. */
export interface PartitionOffset {
  topic: string;
  partition: number;
  errorCode: number;
  offset: bigint;
}

/** Partitions of topics, as the requests below take them. */
export interface TopicPartitions {
  topic: string;
  partitions: number[];
}

/** A partition and its leader (-1: none) as the cluster's metadata names them. */
export interface PartitionLeader {
  partition: number;
  leader: number;
}

/**
 * One record as read from a partition's log. Markers are control records; so are the records of aborted
 * transactions in a read committed (the library's filter marks them: their offsets still count, their contents do not).
 */
export interface LogRecord {
  offset: string;
  /** The record's timestamp (ms), as the producer or the log set it. */
  timestamp: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: DigestHeader[];
  isControlRecord: boolean;
  /** The producer id of the record's batch (-1: none). */
  producerId: string;
  inTransaction: boolean;
}

/**
 * The requests the library sends itself to single brokers, besides producing and consuming: metadata, the hanging
 * transactions' DescribeProducers, ListTransactions and WriteTxnMarkers, and the partition reads (ListOffsets,
 * Fetch) of the outbox checkpoints and of the hanging-transaction recovery. Each driver brings its own, on its own
 * connections; the callers (hanging-transactions.ts, partition-logs.ts) do not know which. A failed request leaves
 * nothing behind: the next one connects and asks the metadata afresh when needed.
 */
export interface LogRequests {
  /** A topic's partitions with their leaders, the metadata asked now when `refresh`; throws for a topic the cluster does not know. */
  partitionsOf(topic: string, refresh?: boolean): Promise<PartitionLeader[]>;
  /** The node ids of the cluster's brokers. */
  brokers(): Promise<number[]>;
  /** The node id of a group's coordinator. */
  groupCoordinator(groupId: string): Promise<number>;
  /** DescribeProducers (KIP-664) to `broker`, for partitions it leads. */
  describeProducers(broker: number, topics: TopicPartitions[]): Promise<PartitionProducers[]>;
  /** ListTransactions (KIP-664) to `broker`, filtered by producer ids: the transactions it coordinates. */
  listTransactions(broker: number, producerIds: string[]): Promise<TransactionListing[]>;
  /** WriteTxnMarkers to `broker`: a commit or abort marker of one producer's transaction on partitions it leads. */
  writeTxnMarkers(broker: number, marker: TransactionMarker, topics: TopicPartitions[]): Promise<MarkerAnswer[]>;
  /** ListOffsets to `broker`: a partition's first offset of a timestamp or later (-1: none), or its latest (-1) or earliest (-2). */
  listOffset(broker: number, topic: string, partition: number, timestamp: number, isolation: Isolation): Promise<bigint>;
  /** ListOffsets to `broker` for many partitions it leads, in one request: each one's latest offset (the high watermark read uncommitted, the last stable offset read committed). */
  latestOffsets(broker: number, topics: TopicPartitions[], isolation: Isolation): Promise<PartitionOffset[]>;
  /** DescribeTransactions (KIP-664) to `broker`, the coordinator of these transactional ids. */
  describeTransactions(broker: number, transactionalIds: string[]): Promise<TransactionDescription[]>;
  /** One Fetch of a partition from `from` (up to `maxBytes`): its error code and the records of the answer, from wherever its first batch begins. */
  fetch(broker: number, topic: string, partition: number, from: bigint, isolation: Isolation, maxBytes: number): Promise<{ errorCode: number; records: LogRecord[] }>;
  /** After a failed request: connect afresh next time. */
  reset(): void;
  disconnect(): Promise<void>;
}

/** What a WriteTxnMarkers request ends: one producer's transaction at an epoch, committed or aborted. */
export interface TransactionMarker {
  producerId: string;
  producerEpoch: number;
  coordinatorEpoch: number;
  commit: boolean;
}

/** Latest and earliest as ListOffsets' timestamps. */
export const LATEST = -1;
export const EARLIEST = -2;

/** A topic's partitions and their leaders from a driver's cluster, the metadata asked now when `refresh` (LogRequests.partitionsOf). */
export async function partitionLeaders(cluster: ProducerCluster, topic: string, refresh: boolean): Promise<PartitionLeader[]> {
  await cluster.addMultipleTargetTopics([topic]);
  if (refresh) await cluster.refreshMetadata();
  const partitions = cluster.findTopicPartitionMetadata(topic);
  // No partitions is not an answer: a topic without any would read as one with nothing to read.
  if (partitions.length === 0) throw new KafkaProtocolError('UNKNOWN_TOPIC_OR_PARTITION', 3, true, `the cluster's metadata names no partition of topic ${topic}`);
  return partitions.map((p) => ({ partition: p.partitionId, leader: p.leader ?? -1 }));
}
