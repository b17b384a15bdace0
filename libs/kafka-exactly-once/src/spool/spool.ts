import { Logger } from '@nestjs/common';
import { closeSync, existsSync, fsync, fsyncSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, statSync, truncateSync, unlinkSync, writeFileSync, writeSync } from 'fs';
import { join, resolve } from 'path';
import { promisify } from 'util';
import { SpoolFullError } from '../errors/spool-full.error';
import { encodeFrame, QuarantinedRecord, readFrames, SpooledRecord } from './spool-record';

export interface SpoolOptions {
  directory: string;
  /** Backlog (unacknowledged bytes) above which appends are refused with SpoolFullError. */
  maxBytes: number;
  /** A segment file is closed and a new one started past this size. */
  segmentBytes: number;
}

export interface SpoolBacklog {
  records: number;
  bytes: number;
  /** ms since the oldest record waiting was spooled; 0 when empty */
  oldestAgeMs: number;
}

interface Entry {
  record: SpooledRecord;
  segment: number;
  /** byte offset just after this record in its segment; 0 until the record is on disk (written and fsynced) */
  end: number;
  bytes: number;
}

/** fsync on libuv's thread pool: the event loop (live sends, the drainer) runs on while the disk syncs. */
const fsyncAsync = promisify(fsync);

const SEGMENT = /^segment-(\d{12})\.log$/;
const CURSOR = 'cursor.json';
/** Records the broker refused for good, framed like the segments, each with its reason. */
export const REFUSED_QUARANTINE = 'quarantine-refused.log';

/** What the refused-records quarantine holds. */
export interface SpoolQuarantine {
  records: number;
  lastReason?: string;
  file: string;
}

function fsyncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * A durable, append-only local spool: records framed with length and CRC-32C in numbered segment files, each
 * append fsynced before it is acknowledged (appends that arrive while an fsync runs share the next one: group
 * commit). A cursor file records how far Kafka has acknowledged; fully acknowledged segments are deleted. At
 * open, a torn or corrupt tail is moved to a quarantine file and the rest is kept. A record Kafka refuses for
 * good is moved to another quarantine file (quarantineOldest), so that it never blocks the records behind it.
 */
export class Spool {
  private readonly logger = new Logger(Spool.name);
  private readonly dir: string;
  private readonly queue: Entry[] = [];
  private readonly keys = new Map<string, number>();
  private backlogBytes = 0;
  private segment = 0;
  private fd?: number;
  private size = 0;
  private cursor = { segment: 0, offset: 0 };
  private pending: Array<{ frame: Buffer; entry: Entry; resolve: () => void; reject: (err: Error) => void }> = [];
  private flushing?: Promise<void>;
  /** The group commit being written now (one write and one fsync for the appends that came meanwhile). */
  private batchOnDisk?: Promise<void>;
  /** Waiters for a key's spooled records to be acknowledged (keyDrained). */
  private readonly keyWaiters = new Map<string, Array<() => void>>();
  /** The cursor to make durable next, and the write making one durable now (one at a time, the latest wins). */
  private cursorToWrite?: { segment: number; offset: number };
  private cursorWriting?: Promise<void>;
  private refused = { records: 0, lastReason: undefined as string | undefined };

  constructor(private readonly options: SpoolOptions) {
    this.dir = resolve(options.directory);
    mkdirSync(this.dir, { recursive: true });
    this.recover();
  }

  private segmentPath(n: number): string {
    return join(this.dir, `segment-${String(n).padStart(12, '0')}.log`);
  }

  /** Rebuilds the queue from the segments after the cursor, quarantining any torn or corrupt tail. */
  private recover(): void {
    this.recoverRefused();
    const cursorFile = join(this.dir, CURSOR);
    if (existsSync(cursorFile)) this.cursor = JSON.parse(readFileSync(cursorFile, 'utf8'));
    const segments = readdirSync(this.dir)
      .map((name) => SEGMENT.exec(name))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
    for (const n of segments) {
      const path = this.segmentPath(n);
      if (n < this.cursor.segment) {
        unlinkSync(path);
        continue;
      }
      const buf = readFileSync(path);
      for (const frame of readFrames(buf)) {
        const { offset } = frame;
        if (frame.kind === 'corrupt') {
          const quarantine = join(this.dir, `quarantine-${String(n).padStart(12, '0')}-${offset}-${Date.now()}.bin`);
          writeFileSync(quarantine, buf.subarray(offset));
          truncateSync(path, offset);
          this.logger.error(
            `spool segment ${path}: ${frame.reason} at byte ${offset}; moved ${buf.length - offset} bytes to ${quarantine}, kept the ${this.queue.length} records before it`,
          );
          break;
        }
        if (n > this.cursor.segment || frame.next > this.cursor.offset) this.enqueue({ record: frame.record, segment: n, end: frame.next, bytes: frame.next - offset });
      }
    }
    this.segment = segments.length > 0 ? segments[segments.length - 1] : Math.max(1, this.cursor.segment);
    this.openSegment(this.segment);
    if (this.queue.length > 0) this.logger.warn(`spool ${this.dir}: ${this.queue.length} records waiting for Kafka from a previous run`);
  }

  /**
   * Counts the refused records kept from earlier runs. A torn last frame (a crash while quarantining) is cut
   * off: its record is still in the spool, since the cursor moves only after the quarantine write is fsynced.
   */
  private recoverRefused(): void {
    const path = join(this.dir, REFUSED_QUARANTINE);
    if (!existsSync(path)) return;
    const buf = readFileSync(path);
    for (const frame of readFrames(buf)) {
      if (frame.kind === 'corrupt') {
        truncateSync(path, frame.offset);
        this.logger.warn(`spool quarantine ${path}: ${frame.reason} at byte ${frame.offset}, cut off (its record is still in the spool)`);
        break;
      }
      this.refused.records++;
      this.refused.lastReason = (frame.record as QuarantinedRecord).quarantine?.reason;
    }
  }

  private openSegment(n: number): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.segment = n;
    const path = this.segmentPath(n);
    this.fd = openSync(path, 'a');
    this.size = statSync(path).size;
    fsyncDirectory(this.dir);
  }

  private enqueue(entry: Entry): void {
    this.queue.push(entry);
    this.backlogBytes += entry.bytes;
    const key = keyOf(entry.record);
    this.keys.set(key, (this.keys.get(key) ?? 0) + 1);
  }

  /** Whether records of this topic and key are waiting: new ones must queue behind them to keep their order. */
  hasKey(topic: string, key: string | null): boolean {
    return this.keys.has(`${topic}\u0000${key ?? ''}`);
  }

  get isEmpty(): boolean {
    return this.queue.length === 0;
  }

  backlog(now = Date.now()): SpoolBacklog {
    return {
      records: this.queue.length,
      bytes: this.backlogBytes,
      oldestAgeMs: this.queue.length > 0 ? Math.max(0, now - this.queue[0].record.spooledAt) : 0,
    };
  }

  /** Appends a record; resolves once it is on disk (fsync). Throws SpoolFullError past `maxBytes`. */
  append(record: SpooledRecord): Promise<void> {
    const frame = encodeFrame(record);
    if (this.backlogBytes + frame.length > this.options.maxBytes) {
      return Promise.reject(new SpoolFullError(this.dir, this.backlogBytes, this.options.maxBytes, { messageId: record.messageId, outcome: 'not-sent' }));
    }
    // Counted at once, so that a publish of the same key right after queues behind this one.
    const entry: Entry = { record, segment: 0, end: 0, bytes: frame.length };
    this.enqueue(entry);
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ frame, entry, resolve, reject });
      void this.flush();
    });
  }

  /**
   * Group commit: the appends that arrive while a batch is written and fsynced go together in the next one. The
   * writes go to the page cache at once; the fsync runs off the event loop.
   */
  private flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    this.flushing = (async () => {
      try {
        while (this.pending.length > 0) {
          await Promise.resolve(); // let appends issued in the same tick join this fsync
          const batch = this.pending;
          this.pending = [];
          const written = this.writeBatch(batch);
          this.batchOnDisk = written.then(
            () => undefined,
            () => undefined,
          );
          await written;
        }
      } finally {
        // Cleared in the same turn as the last waiters are released, so that their next append starts a new flush.
        this.flushing = undefined;
        this.batchOnDisk = undefined;
      }
    })();
    return this.flushing;
  }

  /** Writes and fsyncs one group commit; each append is answered after its bytes are on disk, or failed and taken off. */
  private async writeBatch(batch: Spool['pending']): Promise<void> {
    const start = { segment: this.segment, size: this.size };
    const places: Array<{ segment: number; end: number }> = [];
    try {
      for (const item of batch) {
        if (this.size > 0 && this.size + item.frame.length > this.options.segmentBytes) {
          // The segment being left holds records of this batch: it is synced before it is closed.
          fsyncSync(this.fd as number);
          this.openSegment(this.segment + 1);
        }
        writeFully(this.fd as number, item.frame);
        this.size += item.frame.length;
        places.push({ segment: this.segment, end: this.size });
      }
      await fsyncAsync(this.fd as number);
    } catch (err) {
      // The callers hear "not spooled": take the batch's bytes off the disk too, so that a restart cannot
      // resurrect records whose publish failed, nor find a torn frame in front of later good ones.
      this.rollBack(start);
      for (const item of batch) this.drop(item.entry);
      batch.forEach((item) => item.reject(err as Error));
      return;
    }
    // On disk now: the drainer may send them, and their publishes are answered.
    batch.forEach((item, i) => {
      item.entry.segment = places[i].segment;
      item.entry.end = places[i].end;
      item.resolve();
    });
  }

  private rollBack(start: { segment: number; size: number }): void {
    try {
      for (let n = this.segment; n > start.segment; n--) unlinkSync(this.segmentPath(n));
      if (this.segment !== start.segment) this.openSegment(start.segment);
      ftruncateSync(this.fd as number, start.size);
      fsyncSync(this.fd as number);
      this.size = start.size;
    } catch (err) {
      this.logger.error(`spool ${this.dir}: could not roll back a failed write (${(err as Error).message}); a restart will quarantine what is left of it`);
    }
  }

  private drop(entry: Entry): void {
    const index = this.queue.indexOf(entry);
    if (index >= 0) this.queue.splice(index, 1);
    this.forget(entry);
  }

  private forget(entry: Entry): void {
    this.backlogBytes -= entry.bytes;
    const key = keyOf(entry.record);
    const left = (this.keys.get(key) ?? 1) - 1;
    if (left > 0) {
      this.keys.set(key, left);
      return;
    }
    this.keys.delete(key);
    const waiters = this.keyWaiters.get(key);
    this.keyWaiters.delete(key);
    waiters?.forEach((wake) => wake());
  }

  /**
   * Resolves true once no record of this topic and key waits in the spool (at once when none does), false
   * after `timeoutMs`: a new record of the key may then go to Kafka directly, behind the spooled ones.
   */
  keyDrained(topic: string, key: string | null, timeoutMs: number): Promise<boolean> {
    const name = `${topic}\u0000${key ?? ''}`;
    if (!this.keys.has(name)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const waiters = this.keyWaiters.get(name)?.filter((w) => w !== wake);
        if (waiters?.length) this.keyWaiters.set(name, waiters);
        else this.keyWaiters.delete(name);
        resolve(false);
      }, timeoutMs);
      timer.unref?.();
      this.keyWaiters.set(name, [...(this.keyWaiters.get(name) ?? []), wake]);
    });
  }

  /**
   * The oldest `max` records that are on disk, in order, for the drainer. When the oldest is still being written,
   * waits for its group commit (never for the appends that keep coming after it).
   */
  async peek(max: number): Promise<SpooledRecord[]> {
    while (this.queue.length > 0 && this.queue[0].end === 0 && this.flushing) await (this.batchOnDisk ?? new Promise((r) => setImmediate(r)));
    const out: SpooledRecord[] = [];
    for (const entry of this.queue) {
      if (out.length >= max || entry.end === 0) break;
      out.push(entry.record);
    }
    return out;
  }

  /**
   * Kafka acknowledged the oldest `count` records: they leave the spool at once (their keys may go live again),
   * and the cursor past them is made durable off the event loop, after which drained segments are deleted.
   * Resolves when that cursor (or a later one) is on disk. A crash before that sends them again after the restart:
   * copies that consumers drop by message id.
   */
  acknowledge(count: number): Promise<void> {
    if (count <= 0) return Promise.resolve();
    const done = this.queue.splice(0, count);
    done.forEach((entry) => this.forget(entry));
    const last = done[done.length - 1];
    this.cursor = { segment: last.segment, offset: last.end };
    this.cursorToWrite = this.cursor;
    return this.writeCursor();
  }

  /** One cursor write at a time; acknowledgements made meanwhile are written together by the next one. */
  private writeCursor(): Promise<void> {
    const previous = this.cursorWriting ?? Promise.resolve();
    const next = previous.then(async () => {
      const cursor = this.cursorToWrite;
      if (!cursor) return; // written by an earlier turn
      this.cursorToWrite = undefined;
      const tmp = join(this.dir, `${CURSOR}.tmp`);
      writeFileSync(tmp, JSON.stringify(cursor));
      const fd = openSync(tmp, 'r+');
      try {
        await fsyncAsync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, join(this.dir, CURSOR));
      for (const name of readdirSync(this.dir)) {
        const m = SEGMENT.exec(name);
        if (m && Number(m[1]) < cursor.segment) unlinkSync(join(this.dir, name));
      }
      // Nothing waits and nothing is being written: start a fresh segment rather than grow a drained one.
      if (this.queue.length === 0 && !this.flushing && this.size > this.options.segmentBytes / 2) this.openSegment(this.segment + 1);
    });
    const settled = next.catch(() => undefined);
    this.cursorWriting = settled;
    void settled.then(() => {
      if (this.cursorWriting === settled) this.cursorWriting = undefined;
    });
    return next;
  }

  /**
   * Moves the oldest waiting record, which Kafka refused for good, to the refused-records quarantine file with
   * its reason (fsynced), then acknowledges it, so that the records behind it move on. Returns the record.
   */
  quarantineOldest(reason: string, now = Date.now()): SpooledRecord {
    const entry = this.queue[0];
    if (!entry || entry.end === 0) throw new Error('quarantineOldest: no spooled record is on disk yet');
    const quarantined: QuarantinedRecord = { ...entry.record, quarantine: { reason, at: now } };
    const path = join(this.dir, REFUSED_QUARANTINE);
    const created = !existsSync(path);
    const fd = openSync(path, 'a');
    try {
      writeFully(fd, encodeFrame(quarantined));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (created) fsyncDirectory(this.dir);
    this.refused.records++;
    this.refused.lastReason = reason;
    void this.acknowledge(1).catch((err: Error) => this.logger.error(`spool ${this.dir}: cursor not written (${err.message}); the record may be sent again after a restart`));
    return entry.record;
  }

  /** The refused-records quarantine: how many records it holds (this run and earlier ones) and the last reason. */
  quarantine(): SpoolQuarantine {
    return { ...this.refused, file: join(this.dir, REFUSED_QUARANTINE) };
  }

  async close(): Promise<void> {
    await this.flushing;
    await this.cursorWriting?.catch(() => undefined);
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** writeSync may write less than asked (e.g. a full disk): write the rest, or throw. */
function writeFully(fd: number, buf: Buffer): void {
  for (let written = 0; written < buf.length; ) {
    const n = writeSync(fd, buf, written, buf.length - written);
    if (n <= 0) throw new Error('spool write made no progress');
    written += n;
  }
}

function keyOf(record: SpooledRecord): string {
  return `${record.topic}\u0000${record.key === null ? '' : Buffer.from(record.key, 'base64').toString('utf8')}`;
}
