import { closeSync, openSync, writeSync } from 'fs';

/**
 * When each step of a committed unit of work ended, in epoch milliseconds with fractions (module option
 * `operations.stepLog`): the batch holding its records received from the fetch, the unit begun (after its
 * partition's earlier units), the inbox claim, the handlers, the inbox rows, the outputs sent in the Kafka
 * transaction, PostgreSQL's COMMIT, and Kafka's sendOffsets and EndTxn. The bench's `--tail-steps` matches the
 * slowest records to their units (docs/benchmarks.md).
 */
export interface UnitSteps {
  fetched: number;
  started: number;
  claimed?: number;
  handled?: number;
  recorded?: number;
  produced?: number;
  pgCommitted?: number;
  committed?: number;
}

/** Now, in epoch milliseconds with the fractions of the monotonic clock. */
export const stepClock = (): number => performance.timeOrigin + performance.now();

const FLUSH_BYTES = 64 * 1024;
const FLUSH_MS = 1000;

/**
 * One JSON line per committed unit of work, appended to a file: a diagnostic of where a record's time goes, off
 * unless the option names a file. Lines are buffered and written at most every second (or 64 KiB), so that the
 * units pay a string each, not a write.
 */
export class StepLog {
  private fd: number | undefined;
  private lines: string[] = [];
  private bytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly path: string) {}

  unit(topic: string, partition: number, first: string, last: string, count: number, steps: UnitSteps): void {
    const line = `${JSON.stringify({ topic, partition, first, last, count, ...steps })}\n`;
    this.lines.push(line);
    this.bytes += line.length;
    if (this.bytes >= FLUSH_BYTES) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.timer.unref();
    }
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.lines.length === 0) return;
    const text = this.lines.join('');
    this.lines = [];
    this.bytes = 0;
    this.fd ??= openSync(this.path, 'a');
    writeSync(this.fd, text);
  }

  close(): void {
    this.flush();
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
