import type { PartitionMetadata } from 'kafkajs';
import { partitionOf } from '../kafkajs/producer/checked-producer';
import { EARLIEST, type Isolation, LATEST, type LogRecord, type LogRequests } from './log-requests';

/** A record as read from a partition's log: markers and the records of aborted transactions (read committed) are control records. */
export type LoggedRecord = Pick<LogRecord, 'offset' | 'key' | 'value' | 'isControlRecord'>;

/** One partition's log, read from its leader. */
export interface PartitionLog {
  readonly partition: number;
  /** The partition's latest offset (its high watermark uncommitted, its last stable offset committed) or its earliest. */
  offset(which: 'latest' | 'earliest', isolation: Isolation): Promise<bigint>;
  /** What one Fetch from `from` answers (up to `maxBytes`), the records of aborted transactions marked as control records when committed. */
  read(from: bigint, isolation: Isolation, maxBytes: number): Promise<LoggedRecord[]>;
}

/**
 * Reads of single partitions' logs, which a consumer group does not give: the offsets of one isolation level, a
 * range read without a group. The outbox relay reads its checkpoints so. On either driver's requests (log-requests.ts).
 */
export class PartitionLogs {
  constructor(private readonly requests: LogRequests) {}

  /**
   * The log of the partition `key` goes to in `topic` (the Java client's hash of keys), on its leader as the
   * metadata says now; a topic the cluster does not know is thrown (UNKNOWN_TOPIC_OR_PARTITION, retriable: a topic
   * made a moment ago may not be in every broker's metadata yet). A failed request connects afresh next time.
   */
  async ofKey(topic: string, key: string): Promise<PartitionLog> {
    try {
      const partitions = await this.requests.partitionsOf(topic, true);
      const partition = partitionOf(topic, partitions.map((p) => ({ partitionId: p.partition }) as PartitionMetadata), { key, value: null });
      const leader = partitions.find((p) => p.partition === partition)?.leader;
      if (leader === undefined || leader < 0) throw new Error(`partition ${topic}[${partition}] has no leader`);
      return {
        partition,
        offset: (which, isolation) => this.requests.listOffset(leader, topic, partition, which === 'latest' ? LATEST : EARLIEST, isolation),
        read: async (from, isolation, maxBytes) => {
          // A partition's error (its leader moved, the offset out of range) is not an empty range: the read fails.
          const { errorCode, records } = await this.requests.fetch(leader, topic, partition, from, isolation, maxBytes);
          if (errorCode) throw new Error(`fetching ${topic}[${partition}] from offset ${from} failed (error code ${errorCode})`);
          return records;
        },
      };
    } catch (err) {
      this.reset();
      throw err;
    }
  }

  /** After a failed read: connect afresh next time. */
  reset(): void {
    this.requests.reset();
  }

  async disconnect(): Promise<void> {
    await this.requests.disconnect();
  }
}
