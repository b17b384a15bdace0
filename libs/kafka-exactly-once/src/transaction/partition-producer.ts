import { Logger } from '@nestjs/common';
import { CheckedProducer, CheckedTransaction, fenceTransactionalId, type KafkaClient, type RetryOptions } from '../kafkajs';

/**
 * The retries of a transactional producer: from 20 ms unless the application set its own first wait. Right
 * after a commit, the coordinator answers the next transaction's first request (AddPartitionsToTxn) with
 * CONCURRENT_TRANSACTIONS while it still writes the previous one's markers, and KafkaJS waits its first retry
 * time before asking again: with its default 300 ms, every partition of the fetch waited that long. The waits
 * grow fourfold (20, 80, 320, 1280, 5120 ms: about 7 s over KafkaJS's 5 retries, near its default 9 s) so that
 * a leader election is still waited out. The number of retries is the application's (KafkaJS's 5 by default).
 */
export function transactionalRetry(retry?: RetryOptions): RetryOptions {
  if (retry?.initialRetryTime !== undefined) return { ...retry };
  return { multiplier: 4, ...retry, initialRetryTime: 20 };
}

/**
 * The transactional producer of one input partition, `transactionalId = {prefix}.{groupId}.{topic}.{partition}`.
 * KafkaJS's TxnOffsetCommit carries no group generation (no KIP-447), so this per-partition id is what fences
 * a stalled previous owner: `start()` runs InitProducerId, which bumps the epoch and settles (aborts, or
 * completes if already decided) any transaction the previous owner left open.
 */
export class PartitionProducer {
  private readonly logger = new Logger(PartitionProducer.name);
  private producer?: CheckedProducer;
  private open?: CheckedTransaction;
  private legacyFenced = false;

  constructor(
    private readonly kafka: KafkaClient,
    readonly transactionalId: string,
    private readonly transactionTimeoutMs: number,
    /** The application's `kafka.retry`, if any. */
    private readonly retry?: RetryOptions,
    /** The id an earlier version of the library used for the same role, fenced once too (rolling upgrades). */
    private readonly legacyId?: string,
  ) {}

  /** Creates the producer and runs InitProducerId (at connect), then opens the first transaction. */
  async start(): Promise<void> {
    await this.close();
    if (this.legacyId && this.legacyId !== this.transactionalId && !this.legacyFenced) {
      await fenceTransactionalId(this.kafka, this.legacyId, { transactionTimeout: this.transactionTimeoutMs, retry: transactionalRetry(this.retry) });
      this.legacyFenced = true;
    }
    const producer = new CheckedProducer(this.kafka, {
      transactionalId: this.transactionalId,
      transactionTimeout: this.transactionTimeoutMs,
      retry: transactionalRetry(this.retry),
    });
    try {
      await producer.connect();
    } catch (err) {
      await producer.disconnect().catch(() => undefined);
      throw err;
    }
    this.producer = producer;
    this.open = await producer.transaction();
  }

  /** The open transaction, or a new one. One open transaction per producer at a time. */
  async begin(): Promise<CheckedTransaction> {
    if (!this.producer) throw new Error(`producer ${this.transactionalId} is not started`);
    if (this.open?.isActive()) return this.open;
    this.open = await this.producer.transaction();
    return this.open;
  }

  /** Aborts the open transaction if there is one; resolves false when the outcome is unknown. */
  async abortQuietly(): Promise<boolean> {
    const txn = this.open;
    if (!txn?.isActive()) return true;
    try {
      await txn.abort();
      return true;
    } catch (err) {
      this.logger.warn(`abort of ${this.transactionalId} failed: ${(err as Error).message}`);
      return false;
    }
  }

  /** Disconnects without touching the open transaction: the broker or the next owner settles it. */
  async close(): Promise<void> {
    const producer = this.producer;
    this.producer = undefined;
    this.open = undefined;
    if (producer) await producer.disconnect().catch((err) => this.logger.warn(`disconnect of ${this.transactionalId}: ${err.message}`));
  }
}
