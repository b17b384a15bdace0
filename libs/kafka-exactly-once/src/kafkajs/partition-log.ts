import type { KafkaClient } from './client';
import { partitionOf } from './producer/checked-producer';
import { ClusterClient, type KafkaJsBroker } from './producer/kafkajs-internals';

/** Isolation levels of Fetch and ListOffsets. */
const ISOLATION = { committed: 1, uncommitted: 0 } as const;
const TIMESTAMP = { latest: -1, earliest: -2 } as const;

/** A record as read from a partition's log: markers and the records of aborted transactions (read committed) are control records. */
export interface LoggedRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  isControlRecord?: boolean;
}

/** One partition's log, read from its leader. */
export interface PartitionLog {
  readonly partition: number;
  /** The partition's latest offset (its high watermark uncommitted, its last stable offset committed) or its earliest. */
  offset(which: 'latest' | 'earliest', isolation: 'committed' | 'uncommitted'): Promise<bigint>;
  /** What one Fetch from `from` answers (up to `maxBytes`), the records of aborted transactions left out when committed. */
  read(from: bigint, isolation: 'committed' | 'uncommitted', maxBytes: number): Promise<LoggedRecord[]>;
}

interface LogRequests {
  listOffsets(args: object): Promise<{ responses: Array<{ partitions: Array<{ offset: string }> }> }>;
  fetch(args: object): Promise<{ responses: Array<{ partitions: Array<{ messages: LoggedRecord[] }> }> }>;
}

/**
 * Reads of single partitions' logs on the library's Kafka client, which KafkaJS's consumer does not give: the
 * offsets of one isolation level, a range read without a group. The outbox relay reads its checkpoints so.
 */
export class PartitionLogs extends ClusterClient {
  constructor(kafka: KafkaClient) {
    super(kafka);
  }

  /**
   * The log of the partition `key` goes to in `topic` (the Java client's hash of keys), on its leader as the
   * metadata says now; undefined when the topic does not exist. A failed request connects afresh next time.
   */
  async ofKey(topic: string, key: string): Promise<PartitionLog | undefined> {
    try {
      await this.connected();
      await this.cluster.addMultipleTargetTopics([topic]);
      await this.cluster.refreshMetadata();
      const partitions = this.cluster.findTopicPartitionMetadata(topic);
      if (partitions.length === 0) return undefined;
      const partition = partitionOf(topic, partitions, { key, value: null });
      const leader = partitions.find((p) => p.partitionId === partition)?.leader;
      if (leader === undefined || leader < 0) throw new Error(`partition ${topic}[${partition}] has no leader`);
      const broker = (await this.cluster.findBroker({ nodeId: leader })) as KafkaJsBroker & LogRequests;
      return {
        partition,
        offset: async (which, isolation) => {
          const answer = await broker.listOffsets({ replicaId: -1, isolationLevel: ISOLATION[isolation], topics: [{ topic, partitions: [{ partition, timestamp: TIMESTAMP[which] }] }] });
          return BigInt(answer.responses[0].partitions[0].offset);
        },
        read: async (from, isolation, maxBytes) => {
          const answer = await broker.fetch({
            replicaId: -1,
            isolationLevel: ISOLATION[isolation],
            maxWaitTime: 100,
            minBytes: 1,
            maxBytes,
            topics: [{ topic, partitions: [{ partition, fetchOffset: from.toString(), maxBytes }] }],
          });
          return answer.responses[0]?.partitions[0]?.messages ?? [];
        },
      };
    } catch (err) {
      this.reconnectNextTime();
      throw err;
    }
  }

  /** After a failed read: connect afresh next time. */
  reset(): void {
    this.reconnectNextTime();
  }
}
