import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { INBOX_TABLE } from '../kafka-exactly-once.constants';

/**
 * Deletes processed inbox rows older than the retention window, in small batches so that no statement holds
 * many locks or runs long. A message id whose row is gone is no longer recognised as a duplicate: keep the
 * window longer than any redelivery or republish you expect.
 */
export class InboxRetention {
  private readonly logger = new Logger(InboxRetention.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<number>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly options: { retentionDays: number; retentionIntervalMs: number; retentionBatchSize: number },
  ) {}

  start(): void {
    if (this.options.retentionIntervalMs <= 0 || this.timer) return;
    this.timer = setInterval(() => void this.runOnce().catch((err) => this.logger.error(`inbox retention failed: ${err.message}`)), this.options.retentionIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** Deletes expired rows batch by batch; returns how many. */
  runOnce(): Promise<number> {
    this.running ??= this.deleteExpired().finally(() => (this.running = undefined));
    return this.running;
  }

  private async deleteExpired(): Promise<number> {
    let total = 0;
    for (;;) {
      const result: [unknown[], number] = await this.dataSource.query(
        `DELETE FROM ${INBOX_TABLE} WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM ${INBOX_TABLE}
           WHERE (COALESCE(replayed_at, processed_at) < now() - make_interval(days => $1) AND status <> 'parked')
              OR (status = 'failing' AND claimed_at < now() - make_interval(days => $1))
           LIMIT $2))`,
        [this.options.retentionDays, this.options.retentionBatchSize],
      );
      const deleted = Array.isArray(result) ? Number(result[1] ?? 0) : 0;
      total += deleted;
      if (deleted < this.options.retentionBatchSize) break;
    }
    if (total > 0) this.logger.log(`deleted ${total} inbox rows older than ${this.options.retentionDays} days`);
    return total;
  }
}
