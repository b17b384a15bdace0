import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { randomUUID } from 'crypto';
import { hostname } from 'os';
import { OperatorService } from '../operator.service';
import type { BulkOperations } from './bulk-operations';

/** How long an instance's hold on a bulk action lasts without renewal (it renews it with every item and every tick). */
export const BULK_LEASE_MS = 15_000;
const BUSY_TICK_MS = 100;
const IDLE_TICK_MS = 1_000;
/** After an error of a walk, that bulk action waits this long before its next try. */
const BACKOFF_MS = 2_000;
/**
 * Failures in a row on one item, with PostgreSQL answering, after which the bulk action stops as failed (its
 * last error says which item and why): an item that always fails must not hold the action forever. Started again
 * (the same filter), it goes on with what is left, each item still acted on once.
 */
export const BULK_MAX_FAILURES = 10;

/**
 * Walks the running bulk actions of the group, in every process that runs KafkaExactlyOnceAdminModule: takes each
 * one's lease (an instance at a time walks it; a lease not renewed expires and another instance goes on from the
 * cursor), and acts on its items at its rate, one PostgreSQL transaction per item (BulkOperations.step). Replays and
 * releases are queued for the group's consumer no faster than it carries them out: at most twice the rate (and at
 * least 10) of them wait at a time. Stops on shutdown after the item in hand, giving its leases back.
 */
@Injectable()
export class BulkWorker implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(BulkWorker.name);
  /** This process, as the lease names it. */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopping = true;
  private readonly budgets = new Map<string, { tokens: number; at: number }>();
  private readonly notBefore = new Map<string, number>();
  /** Failures in a row of each operation (noted in PostgreSQL, so not an outage of PostgreSQL itself). */
  private readonly failures = new Map<string, number>();
  private lastWarning = 0;
  private readonly startedAt = Date.now();

  constructor(private readonly operators: OperatorService) {}

  onApplicationBootstrap(): void {
    this.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
  }

  start(): void {
    if (!this.stopping) return;
    this.stopping = false;
    this.schedule(IDLE_TICK_MS);
  }

  /** Stops after the item in hand and gives the leases back, so that another instance goes on at once. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
    try {
      await this.bulk().release(this.owner);
    } catch {
      // No database (or no group): nothing is held. A lease not given back expires on its own.
    }
  }

  /** One round: claims the group's running bulk actions and walks each as far as its rate allows now. */
  tick(): Promise<boolean> {
    const round = this.round().catch((err) => {
      this.warn(`bulk actions: ${(err as Error).message}; trying again`);
      return false;
    });
    this.running = round.then(() => undefined);
    return round;
  }

  private schedule(ms: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      void this.tick().then((busy) => this.schedule(busy ? BUSY_TICK_MS : IDLE_TICK_MS));
    }, ms);
    this.timer.unref();
  }

  private bulk(): BulkOperations {
    return this.operators.bulk;
  }

  private async round(): Promise<boolean> {
    const bulk = this.bulk();
    const claimed = await bulk.claim(this.owner, BULK_LEASE_MS);
    const now = Date.now();
    for (const id of this.budgets.keys()) if (!claimed.some((o) => o.id === id)) this.budgets.delete(id);
    for (const operation of claimed) {
      if (this.stopping) break;
      if ((this.notBefore.get(operation.id) ?? 0) > now) continue;
      try {
        if (operation.walked) {
          await bulk.finishIfSettled(operation.id, this.owner);
          continue;
        }
        const rate = operation.ratePerSecond;
        const budget = this.budgets.get(operation.id) ?? { tokens: 1, at: now };
        budget.tokens = Math.min(Math.max(1, rate / 2), budget.tokens + (rate * (now - budget.at)) / 1000);
        budget.at = now;
        this.budgets.set(operation.id, budget);
        let allowed = Math.floor(budget.tokens);
        if (allowed > 0 && operation.kind !== 'outbox-set-aside') allowed = Math.min(allowed, Math.max(10, 2 * rate) - (await bulk.openItems(operation.id)));
        for (let i = 0; i < allowed && !this.stopping; i++) {
          const result = await bulk.step(operation.id, this.owner, BULK_LEASE_MS);
          this.failures.delete(operation.id);
          if (result === 'walked' || result === 'lost') break;
          budget.tokens -= 1;
        }
      } catch (err) {
        this.notBefore.set(operation.id, Date.now() + BACKOFF_MS);
        const message = (err as Error).message;
        const noted = await bulk.noteError(operation.id, message).then(() => true, () => false);
        const inARow = noted ? (this.failures.get(operation.id) ?? 0) + 1 : 0;
        this.failures.set(operation.id, inARow);
        if (inARow >= BULK_MAX_FAILURES) {
          this.failures.delete(operation.id);
          await bulk.stopFailed(operation.id, this.owner, `stopped after ${inARow} failures in a row on the item after cursor ${operation.cursor ?? '(the first)'}: ${message}`).catch(() => undefined);
          this.logger.error(`bulk action ${operation.id} (${operation.action} of ${operation.kind}) stopped as failed: ${inARow} failures in a row on one item (${message}); what it acted on stays done, start it again to go on past it`);
        } else {
          this.warn(`bulk action ${operation.id} (${operation.action} of ${operation.kind}): ${message}; nothing of the item was committed, trying again in ${BACKOFF_MS} ms`);
        }
      }
    }
    // Walking: ticks close together, for the rate; only waiting for the consumer (or nothing): once a second.
    return claimed.some((o) => !o.walked);
  }

  /** At most one warning a minute; none in the first seconds (the module's migrations may not have run yet). */
  private warn(message: string): void {
    const now = Date.now();
    if (now - this.startedAt < 10_000 || now - this.lastWarning < 60_000) return;
    this.lastWarning = now;
    this.logger.warn(message);
  }
}
