import { existsSync, readdirSync, readFileSync, statSync } from 'fs';
import { join, resolve } from 'path';
import { QuarantinedRecord, readFrames, SpooledRecord } from './spool-record';

/** A spooled record as `kafka-eo spool show` prints it. */
export interface SpoolEntrySummary {
  messageId: string;
  topic: string;
  /** The key as text (UTF-8), or null. */
  key: string | null;
  headers: string[];
  spooledAt: string | null;
}

/** What a spool directory holds, read without changing anything (the publisher may be running on it). */
export interface SpoolInspection {
  directory: string;
  /** Records waiting for Kafka, after the cursor: how many, their bytes, and the oldest few. */
  waiting: { records: number; bytes: number; oldest: SpoolEntrySummary[] };
  /** Records set aside in quarantine-refused.log, each with why it can never be sent. */
  quarantined: Array<SpoolEntrySummary & { reason: string; at: string }>;
  /** Torn or corrupt tails moved aside at a start (quarantine-*.bin): bytes an operator may read. */
  corruptTails: Array<{ file: string; bytes: number }>;
  /** A segment whose tail is torn or corrupt now (a crash while writing): the next start moves it aside. */
  tornSegments: Array<{ file: string; atByte: number; reason: string }>;
}

const SEGMENT = /^segment-(\d{12})\.log$/;
const OLDEST_SHOWN = 20;

/**
 * Reads a spool directory as the publisher would at its start, but changes nothing: the records waiting after the
 * cursor, the quarantined ones with their reasons, and the corrupt tails set aside.
 */
export function inspectSpool(directory: string): SpoolInspection {
  const dir = resolve(directory);
  if (!existsSync(dir)) throw new Error(`no spool directory at ${dir}`);
  const names = readdirSync(dir);
  if (!names.some((name) => SEGMENT.test(name) || name === 'cursor.json' || name.startsWith('quarantine'))) {
    throw new Error(`${dir} is not a publisher spool (no segment-*.log, cursor.json or quarantine files)`);
  }
  const cursorFile = join(dir, 'cursor.json');
  const cursor = existsSync(cursorFile) ? (JSON.parse(readFileSync(cursorFile, 'utf8')) as { segment: number; offset: number }) : { segment: 0, offset: 0 };
  const inspection: SpoolInspection = { directory: dir, waiting: { records: 0, bytes: 0, oldest: [] }, quarantined: [], corruptTails: [], tornSegments: [] };
  const segments = names
    .map((name) => SEGMENT.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ n: Number(m[1]), name: m[0] }))
    .sort((a, b) => a.n - b.n);
  for (const { n, name } of segments) {
    if (n < cursor.segment) continue;
    for (const frame of readFrames(readFileSync(join(dir, name)))) {
      if (frame.kind === 'corrupt') {
        inspection.tornSegments.push({ file: join(dir, name), atByte: frame.offset, reason: frame.reason });
        break;
      }
      if (n === cursor.segment && frame.next <= cursor.offset) continue;
      inspection.waiting.records++;
      inspection.waiting.bytes += frame.next - frame.offset;
      if (inspection.waiting.oldest.length < OLDEST_SHOWN) inspection.waiting.oldest.push(summary(frame.record));
    }
  }
  const refused = join(dir, 'quarantine-refused.log');
  if (existsSync(refused)) {
    for (const frame of readFrames(readFileSync(refused))) {
      if (frame.kind === 'corrupt') break; // a torn last frame: its record is still in the spool
      const record = frame.record as QuarantinedRecord;
      inspection.quarantined.push({ ...summary(record), reason: String(record.quarantine?.reason ?? 'unknown'), at: new Date(record.quarantine?.at ?? 0).toISOString() });
    }
  }
  for (const name of names) {
    if (/^quarantine-\d{12}-\d+-\d+\.bin$/.test(name)) inspection.corruptTails.push({ file: join(dir, name), bytes: statSync(join(dir, name)).size });
  }
  return inspection;
}

function summary(record: SpooledRecord): SpoolEntrySummary {
  return {
    messageId: String(record.messageId),
    topic: String(record.topic),
    key: typeof record.key === 'string' ? Buffer.from(record.key, 'base64').toString('utf8') : null,
    headers: record.headers && typeof record.headers === 'object' ? Object.keys(record.headers) : [],
    spooledAt: typeof record.spooledAt === 'number' && record.spooledAt > 0 ? new Date(record.spooledAt).toISOString() : null,
  };
}
