import { Logger } from '@nestjs/common';
import { FAULT_ENV } from '../kafka-exactly-once.constants';

/** The points of a unit of work where the crash tests kill (or freeze) the process. */
export const FAULT_POINTS = ['mid-chunk', 'after-db-commit', 'before-kafka-commit'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

/** `kill`: SIGKILL (a crash). `stop`: SIGSTOP to itself (a stalled "zombie" that a SIGCONT wakes later). */
export type FaultAction = 'kill' | 'stop';

/**
 * Test-only fault injection: `KAFKA_EO_FAULT=<point>:<n>[:stop]` kills this process with SIGKILL (or freezes it
 * with SIGSTOP) the n-th time a unit of work reaches <point> (see FAULT_POINTS). Unset, it does nothing. It
 * exists so that the crash suites can prove recovery at each commit point; never set it in production.
 */
export class FaultInjector {
  private readonly logger = new Logger(FaultInjector.name);
  private readonly point?: FaultPoint;
  private readonly at: number = 0;
  private readonly action: FaultAction = 'kill';
  private count = 0;

  constructor(spec: string | undefined = process.env[FAULT_ENV]) {
    if (!spec) return;
    const [point, n = '1', action = 'kill'] = spec.split(':');
    if (!(FAULT_POINTS as readonly string[]).includes(point) || !/^[1-9]\d*$/.test(n) || !['kill', 'stop'].includes(action)) {
      throw new Error(`${FAULT_ENV}="${spec}" is not <point>:<n>[:kill|stop] with point one of ${FAULT_POINTS.join(', ')}`);
    }
    this.point = point as FaultPoint;
    this.at = Number(n);
    this.action = action as FaultAction;
    this.logger.warn(`fault injection armed: ${this.action === 'kill' ? 'SIGKILL' : 'SIGSTOP'} at ${this.point} #${this.at}`);
  }

  reach(point: FaultPoint): void {
    if (point !== this.point) return;
    this.count += 1;
    if (this.count !== this.at) return;
    const signal = this.action === 'kill' ? 'SIGKILL' : 'SIGSTOP';
    process.stderr.write(`kafka-exactly-once: fault injection: ${signal} at ${point} #${this.count}\n`);
    process.kill(process.pid, signal);
  }
}
