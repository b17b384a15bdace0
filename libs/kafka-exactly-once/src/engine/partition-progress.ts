/** What a partition's worker is doing, for health checks. */
/** `delaying`: a retry tier's partition paused until its next record is due. */
export type PartitionActivity = 'idle' | 'working' | 'isolating' | 'backing-off' | 'fenced' | 'delaying';

/** One assigned partition as health checks report it. */
export interface PartitionHealth {
  topic: string;
  partition: number;
  activity: PartitionActivity;
  /** The next offset to handle, as committed by this member (null until known). */
  committedOffset: string | null;
  /** The partition's high watermark at the last fetch. */
  highWatermark: string | null;
  /**
   * Records still to handle: from the committed offset (or past the transaction markers and aborted records
   * fetched after it) to the high watermark. A caught-up partition of a topic written in transactions reports 0,
   * not the commit marker that ends it.
   */
  lag: number | null;
  lastCommitAt: string | null;
  /** How long fetched work has waited without a commit; null when there is none. */
  waitingMs: number | null;
  consecutiveFailures: number;
  lastError: { message: string; kind: string; at: string } | null;
  /** Work has waited longer than `stallAfterMs` without a commit. */
  stalled: boolean;
  /**
   * A retry tier's partition: when its next record is (or was) due (ISO 8601), while it has one not handled yet;
   * in the past while the partition is behind its records' due times.
   */
  nextDueAt: string | null;
  /** Units of work committed per second over the last minute (since the partition was assigned, if less). */
  unitsPerSecond: number;
  /** Records those units covered, per second. */
  recordsPerSecond: number;
  /** PostgreSQL's and Kafka's commits of those units together, on average (ms); null before the first one. */
  commitLatencyMs: number | null;
}

/** The window the rates are measured over. */
const RATE_WINDOW_MS = 60000;

/** One committed unit of work, as the rates count it. */
export interface CommittedUnit {
  records: number;
  /** PostgreSQL's commit and Kafka's, together (ms). */
  commitMs: number;
}

/**
 * The progress of one assigned partition. Work is "waiting" from the moment records are fetched until they
 * are all committed; every commit restarts the clock. A partition whose work waits longer than
 * `stallAfterMs` is stalled: health turns down and names it with its last error.
 */
export class PartitionProgress {
  activity: PartitionActivity = 'idle';
  private committed?: bigint;
  private highWatermark?: bigint;
  /**
   * Offsets below this hold nothing to handle any more: every record of the fetches up to it is done, the
   * transaction markers and aborted records among them included. Unknown after a (re)start.
   */
  private handledThrough?: bigint;
  /**
   * With no committed offset yet (a partition the group never committed, such as a retry tier nothing has left):
   * the first offset fetched since the (re)start. The records before it are not this group's to handle.
   */
  private fetchedFrom?: bigint;
  private lastCommitAt?: number;
  private waitingSince?: number;
  private failures = 0;
  private lastError?: { message: string; kind: string; at: number };
  private nextDueAt?: number;
  /** The units committed within the rate window, oldest first: [at, records, commitMs]. */
  private readonly units: Array<[number, number, number]> = [];
  private readonly since: number;

  constructor(
    readonly topic: string,
    readonly partition: number,
    now = Date.now(),
  ) {
    this.since = now;
  }

  fetched(highWatermark: string, firstOffset?: string, now = Date.now()): void {
    this.highWatermark = BigInt(highWatermark);
    if (this.committed === undefined && this.fetchedFrom === undefined && firstOffset !== undefined) this.fetchedFrom = BigInt(firstOffset);
    this.waitingSince ??= now;
    if (this.activity === 'idle' || this.activity === 'delaying') this.activity = 'working';
  }

  /** A retry tier's next record is due then (kept until the partition has caught up). */
  headDue(due: number): void {
    this.nextDueAt = due;
  }

  /** A retry tier's partition waits until its next record is due: nothing is late, so it is no stall. */
  delayedUntil(due: number): void {
    this.waitingSince = undefined;
    this.nextDueAt = due;
    this.activity = 'delaying';
  }

  /** The group's committed offset, as read when the worker (re)started. */
  startedAt(nextOffset: bigint): void {
    if (nextOffset >= 0n) this.committed = nextOffset;
    this.handledThrough = undefined;
    this.fetchedFrom = undefined;
  }

  /**
   * A fetch held nothing to handle below `nextOffset` (only transaction markers or aborted records: KafkaJS
   * moves past them without a batch to handle).
   */
  passedThrough(nextOffset: bigint, highWatermark: string): void {
    this.highWatermark = BigInt(highWatermark);
    if (this.handledThrough === undefined || nextOffset > this.handledThrough) this.handledThrough = nextOffset;
  }

  committedUpTo(nextOffset: bigint, now = Date.now(), unit?: CommittedUnit): void {
    if (unit) {
      this.units.push([now, unit.records, unit.commitMs]);
      this.forgetUnitsBefore(now - RATE_WINDOW_MS);
    }
    this.committed = nextOffset;
    this.lastCommitAt = now;
    this.failures = 0;
    if (this.waitingSince !== undefined) this.waitingSince = now;
    if (this.activity === 'backing-off') this.activity = 'working';
  }

  /** Every fetched record is done, up to `fetchedThrough` (the offset after the fetch's last, markers included). */
  caughtUp(fetchedThrough?: bigint): void {
    if (fetchedThrough !== undefined && (this.handledThrough === undefined || fetchedThrough > this.handledThrough)) this.handledThrough = fetchedThrough;
    this.waitingSince = undefined;
    this.nextDueAt = undefined;
    this.activity = 'idle';
  }

  failed(error: unknown, kind: string, now = Date.now()): void {
    this.failures++;
    const message = error instanceof Error ? error.message : String(error);
    this.lastError = { message: message.slice(0, 1200), kind, at: now };
  }

  get consecutiveFailures(): number {
    return this.failures;
  }

  private forgetUnitsBefore(at: number): void {
    let old = 0;
    while (old < this.units.length && this.units[old][0] < at) old++;
    if (old > 0) this.units.splice(0, old);
  }

  private rates(now: number): Pick<PartitionHealth, 'unitsPerSecond' | 'recordsPerSecond' | 'commitLatencyMs'> {
    this.forgetUnitsBefore(now - RATE_WINDOW_MS);
    const seconds = Math.max(1, (now - Math.max(this.since, now - RATE_WINDOW_MS)) / 1000);
    let records = 0;
    let commitMs = 0;
    for (const [, n, ms] of this.units) {
      records += n;
      commitMs += ms;
    }
    const round = (x: number) => Math.round(x * 100) / 100;
    return {
      unitsPerSecond: round(this.units.length / seconds),
      recordsPerSecond: round(records / seconds),
      commitLatencyMs: this.units.length === 0 ? null : round(commitMs / this.units.length),
    };
  }

  snapshot(stallAfterMs: number, now = Date.now()): PartitionHealth {
    const waitingMs = this.waitingSince === undefined ? null : now - this.waitingSince;
    const floor = this.committed ?? this.fetchedFrom;
    const done = floor !== undefined && this.handledThrough !== undefined && this.handledThrough > floor ? this.handledThrough : floor;
    const lag = done !== undefined && this.highWatermark !== undefined ? Number(this.highWatermark > done ? this.highWatermark - done : 0n) : null;
    return {
      topic: this.topic,
      partition: this.partition,
      activity: this.activity,
      committedOffset: this.committed?.toString() ?? null,
      highWatermark: this.highWatermark?.toString() ?? null,
      lag,
      lastCommitAt: this.lastCommitAt ? new Date(this.lastCommitAt).toISOString() : null,
      waitingMs,
      consecutiveFailures: this.failures,
      lastError: this.lastError ? { message: this.lastError.message, kind: this.lastError.kind, at: new Date(this.lastError.at).toISOString() } : null,
      stalled: waitingMs !== null && waitingMs > stallAfterMs,
      nextDueAt: this.nextDueAt === undefined ? null : new Date(this.nextDueAt).toISOString(),
      ...this.rates(now),
    };
  }
}
