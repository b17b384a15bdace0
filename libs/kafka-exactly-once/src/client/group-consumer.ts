import type { KafkaMessage } from 'kafkajs';
import type { FetchBudget } from './fetch-budget';

/**
 * What the engine asks of a driver's consumer group (docs/drivers.md): one consumer per group, whose fetched batches
 * go to per-partition workers, each partition paused while its worker runs and resumed after. Every driver
 * implements it; the KafkaJS driver's is KafkaJS's consumer on the library's corrected group.
 */
export interface GroupConsumerConfig {
  groupId: string;
  /** `consumer`: Kafka 4's protocol (KIP-848), which only the platformatic driver speaks. */
  groupProtocol: 'classic' | 'consumer';
  sessionTimeout: number;
  heartbeatInterval: number;
  rebalanceTimeout: number;
  maxBytesPerPartition: number;
  /**
   * The bytes held across partitions (consumer.maxBytesInFlight): each Fetch asks for at most what it grants (its
   * fetch-wide limit), and none is sent while it grants nothing (the fetch waits for room).
   */
  fetchBudget?: FetchBudget;
  maxWaitTimeInMs: number;
  /** Always false: the library reads committed records only. */
  readUncommitted: false;
  allowAutoTopicCreation: false;
}

/** Partitions named by topic (every partition of the topic without `partitions`). */
export type TopicPartitionsRef = Array<{ topic: string; partitions?: number[] }>;

/** One fetched batch of one partition, as the driver hands it to `eachBatch`. */
export interface FetchedBatch {
  batch: {
    topic: string;
    partition: number;
    /** The partition's high watermark when fetched (a decimal string). */
    highWatermark: string;
    /** The committed records of the batch, in offset order (control records and aborted ones left out). */
    messages: KafkaMessage[];
    /** The offset of the first record handed over, or null when none is. */
    firstOffset(): string | null;
    /** The offset of the last record of the fetched range (handed over or not). */
    lastOffset(): string;
  };
  /** The partition's next fetch starts after `offset` (a decimal string). */
  resolveOffset(offset: string): void;
  /** Tells the group this member is alive (throws a rebalance error when the group is rebalancing). */
  heartbeat(): Promise<void>;
  /** Pauses this partition's fetching; returns the resume. */
  pause(): () => void;
  /** Whether the consumer still runs. */
  isRunning(): boolean;
  /** Whether the batch belongs to an earlier assignment or fetch position (a rebalance or a seek since). */
  isStale(): boolean;
}

/** What each event of a group consumer carries. */
export interface GroupConsumerEvents {
  /**
   * The member's assignment. `incremental`: the partitions it had before and still has were its own throughout (no
   * other member could have had them meanwhile: KIP-848), so their state stands; without it, every partition is
   * taken as assigned anew (the classic protocol's rebalance).
   */
  'consumer.group_join': { memberId: string; memberAssignment: Record<string, number[]>; incremental?: boolean };
  /** After each partition's batch (batchSize 0: a fetch of markers or aborted records only, nothing handed over). */
  'consumer.end_batch_process': { topic: string; partition: number; batchSize: number; lastOffset: string; highWatermark: string };
  'consumer.rebalancing': { groupId: string; memberId: string };
  /** `restart`: whether the driver starts the consumer again by itself. */
  'consumer.crash': { error: Error; groupId: string; restart: boolean };
  'consumer.stop': null;
}

export interface GroupConsumerRun {
  autoCommit: false;
  eachBatchAutoResolve: false;
  partitionsConsumedConcurrently: number;
  eachBatch(payload: FetchedBatch): Promise<void>;
}

export interface GroupConsumer {
  readonly events: {
    GROUP_JOIN: 'consumer.group_join';
    END_BATCH_PROCESS: 'consumer.end_batch_process';
    REBALANCING: 'consumer.rebalancing';
    CRASH: 'consumer.crash';
    STOP: 'consumer.stop';
  };
  connect(): Promise<void>;
  /** `fromBeginning`: a partition without a committed offset starts at its earliest record. */
  subscribe(subscription: { topics: string[]; fromBeginning: boolean }): Promise<void>;
  run(config: GroupConsumerRun): Promise<void>;
  pause(topics: TopicPartitionsRef): void;
  resume(topics: TopicPartitionsRef): void;
  /** Stops fetching and leaves the group (after the drains, see group-drains.ts). */
  stop(): Promise<void>;
  disconnect(): Promise<void>;
  on<E extends keyof GroupConsumerEvents>(event: E, listener: (event: { payload: GroupConsumerEvents[E] }) => void): () => void;
}
