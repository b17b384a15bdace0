import { Logger } from '@nestjs/common';
import { FAULT_ENV } from '../kafka-exactly-once.constants';

/**
 * The points of a unit of work where the crash tests kill (or freeze) the process; `after-replay-db-commit`:
 * a release or dead-letter replay step, between its PostgreSQL commit and its Kafka transaction.
 */
export const UNIT_OF_WORK_FAULT_POINTS = ['mid-chunk', 'after-db-commit', 'before-kafka-commit'] as const;
/** The outbox relay's: a batch sent, before its Kafka commit; committed, before the rows are deleted; after that. */
export const OUTBOX_FAULT_POINTS = ['outbox-before-kafka-commit', 'outbox-after-kafka-commit', 'outbox-after-cleanup'] as const;
/** A unit of work that moved a record to a retry tier: its PostgreSQL transaction committed, its Kafka one not yet. */
export const RETRY_FAULT_POINTS = ['after-retry-move-db-commit'] as const;
/** A migration that commits page by page (the inbox's re-keying at boot): a page committed, the next not begun. */
export const MIGRATION_FAULT_POINTS = ['migration-after-page-commit'] as const;
/**
 * The library's abort of a hanging transaction of its own producer (a partition's, or the outbox relay's): what
 * that producer already committed has been read (and kept in PostgreSQL), the abort not written yet; the abort
 * written, nothing sent again yet; the read of what that producer committed, begun (with `fail`: a read that fails).
 */
export const HANGING_FAULT_POINTS = ['before-hanging-abort', 'after-hanging-abort', 'hanging-read'] as const;
export const FAULT_POINTS = [...UNIT_OF_WORK_FAULT_POINTS, 'after-replay-db-commit', ...OUTBOX_FAULT_POINTS, ...RETRY_FAULT_POINTS, ...MIGRATION_FAULT_POINTS, ...HANGING_FAULT_POINTS] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

/**
 * `kill`: SIGKILL (a crash). `stop`: SIGSTOP to itself (a stalled "zombie" that a SIGCONT wakes later).
 * `delay`: blocks the whole process for a while (a long pause: slow disk, GC, an overloaded host), e.g. past the
 * Kafka transaction timeout so that the broker aborts the transaction. `fail`: the step at the point throws, the
 * n-th time and every time after (a step that keeps failing).
 */
export type FaultAction = 'kill' | 'stop' | 'delay' | 'fail';

/**
 * Test-only fault injection: `KAFKA_EO_FAULT=<point>:<n>[:kill|stop|delay=<ms>|fail]` kills this process with
 * SIGKILL (or freezes it with SIGSTOP, or blocks it for <ms>) the n-th time a unit of work reaches <point> (see
 * FAULT_POINTS), or (`fail`) makes the step at <point> throw from the n-th time on. Unset, it does nothing. It exists so that the crash suites can prove recovery at each commit
 * point; never set it in production.
 */
export class FaultInjector {
  private readonly logger = new Logger(FaultInjector.name);
  private readonly point?: FaultPoint;
  private readonly at: number = 0;
  private readonly action: FaultAction = 'kill';
  private readonly delayMs: number = 0;
  private count = 0;

  constructor(spec: string | undefined = process.env[FAULT_ENV]) {
    if (!spec) return;
    const [point, n = '1', action = 'kill'] = spec.split(':');
    const delay = /^delay=(\d+)$/.exec(action);
    if (!(FAULT_POINTS as readonly string[]).includes(point) || !/^[1-9]\d*$/.test(n) || !(['kill', 'stop', 'fail'].includes(action) || delay)) {
      throw new Error(`${FAULT_ENV}="${spec}" is not <point>:<n>[:kill|stop|delay=<ms>|fail] with point one of ${FAULT_POINTS.join(', ')}`);
    }
    this.point = point as FaultPoint;
    this.at = Number(n);
    this.action = delay ? 'delay' : (action as FaultAction);
    this.delayMs = delay ? Number(delay[1]) : 0;
    this.logger.warn(`fault injection armed: ${this.describe()} at ${this.point} #${this.at}`);
  }

  private describe(): string {
    return this.action === 'kill' ? 'SIGKILL' : this.action === 'stop' ? 'SIGSTOP' : this.action === 'fail' ? 'a failure' : `a ${this.delayMs} ms pause`;
  }

  reach(point: FaultPoint): void {
    if (point !== this.point) return;
    this.count += 1;
    if (this.action === 'fail') {
      if (this.count < this.at) return;
      process.stderr.write(`kafka-exactly-once: fault injection: a failure at ${point} #${this.count}\n`);
      throw new Error(`fault injection: a failure at ${point}`);
    }
    if (this.count !== this.at) return;
    process.stderr.write(`kafka-exactly-once: fault injection: ${this.describe()} at ${point} #${this.count}\n`);
    if (this.action === 'delay') {
      // Blocks the event loop on purpose: nothing of this process runs meanwhile, as in a long stall.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, this.delayMs);
      return;
    }
    process.kill(process.pid, this.action === 'kill' ? 'SIGKILL' : 'SIGSTOP');
  }
}
