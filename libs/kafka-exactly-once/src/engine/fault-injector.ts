import { Logger } from '@nestjs/common';
import { FAULT_ENV } from '../kafka-exactly-once.constants';

/** The points of a unit of work where the crash tests kill the process. */
export const FAULT_POINTS = ['mid-chunk', 'after-db-commit', 'before-kafka-commit'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

/**
 * Test-only fault injection: `KAFKA_EO_FAULT=<point>:<n>` kills this process with SIGKILL the n-th time a unit
 * of work reaches <point> (see FAULT_POINTS). Unset, it does nothing. It exists so that the crash suites can
 * prove recovery at each commit point; never set it in production.
 */
export class FaultInjector {
  private readonly logger = new Logger(FaultInjector.name);
  private readonly point?: FaultPoint;
  private readonly at: number = 0;
  private count = 0;

  constructor(spec: string | undefined = process.env[FAULT_ENV]) {
    if (!spec) return;
    const [point, n] = spec.split(':');
    if (!(FAULT_POINTS as readonly string[]).includes(point) || !/^\d+$/.test(n ?? '1')) {
      throw new Error(`${FAULT_ENV}="${spec}" is not <point>:<n> with point one of ${FAULT_POINTS.join(', ')}`);
    }
    this.point = point as FaultPoint;
    this.at = Number(n ?? '1');
    this.logger.warn(`fault injection armed: SIGKILL at the ${this.at}th ${this.point}`);
  }

  reach(point: FaultPoint): void {
    if (point !== this.point) return;
    this.count += 1;
    if (this.count === this.at) {
      process.stderr.write(`kafka-exactly-once: fault injection: SIGKILL at ${point} #${this.count}\n`);
      process.kill(process.pid, 'SIGKILL');
    }
  }
}
