import type { DurableHeaders } from '../publishing/event-headers';
import { crc32c } from './crc32c';

/** A record waiting in the spool for Kafka, as it will be sent. */
export interface SpooledRecord {
  topic: string;
  /** base64, or null for no key */
  key: string | null;
  /** base64 */
  value: string;
  /** Text values as themselves, byte values as `{ base64 }` (see event-headers.ts). */
  headers: DurableHeaders;
  messageId: string;
  /** ms since the epoch, when it was spooled */
  spooledAt: number;
}

/** A record the broker refused for good, as kept in the spool's refused-records quarantine file. */
export interface QuarantinedRecord extends SpooledRecord {
  quarantine: { reason: string; /** ms since the epoch */ at: number };
}

/** Frame: 4-byte big-endian payload length, 4-byte big-endian CRC-32C of the payload, payload (UTF-8 JSON). */
export const FRAME_HEADER = 8;

export function encodeFrame(record: SpooledRecord): Buffer {
  const payload = Buffer.from(JSON.stringify(record), 'utf8');
  const frame = Buffer.allocUnsafe(FRAME_HEADER + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  frame.writeUInt32BE(crc32c(payload), 4);
  payload.copy(frame, FRAME_HEADER);
  return frame;
}

export type FrameRead =
  | { kind: 'record'; record: SpooledRecord; next: number }
  | { kind: 'end' }
  | { kind: 'corrupt'; reason: string };

/** Reads the frame at `offset` of `buf`: a record, the clean end of the data, or a torn or corrupt frame. */
export function readFrame(buf: Buffer, offset: number, maxRecordBytes = 64 * 1024 * 1024): FrameRead {
  if (offset === buf.length) return { kind: 'end' };
  if (buf.length - offset < FRAME_HEADER) return { kind: 'corrupt', reason: `torn frame header (${buf.length - offset} bytes)` };
  const length = buf.readUInt32BE(offset);
  if (length > maxRecordBytes) return { kind: 'corrupt', reason: `implausible record length ${length}` };
  if (buf.length - offset - FRAME_HEADER < length) return { kind: 'corrupt', reason: `torn record (${buf.length - offset - FRAME_HEADER} of ${length} bytes)` };
  const payload = buf.subarray(offset + FRAME_HEADER, offset + FRAME_HEADER + length);
  if (crc32c(payload) !== buf.readUInt32BE(offset + 4)) return { kind: 'corrupt', reason: 'checksum mismatch' };
  try {
    return { kind: 'record', record: JSON.parse(payload.toString('utf8')) as SpooledRecord, next: offset + FRAME_HEADER + length };
  } catch {
    return { kind: 'corrupt', reason: 'unreadable payload' };
  }
}

/**
 * The frames of a file from the start: each record with the byte offsets it spans, then, if the file does
 * not end cleanly, one `corrupt` entry with where the bad bytes start (nothing after it is read).
 */
export function* readFrames(
  buf: Buffer,
): Generator<{ kind: 'record'; record: SpooledRecord; offset: number; next: number } | { kind: 'corrupt'; reason: string; offset: number }> {
  for (let offset = 0; ; ) {
    const frame = readFrame(buf, offset);
    if (frame.kind === 'end') return;
    if (frame.kind === 'corrupt') {
      yield { kind: 'corrupt', reason: frame.reason, offset };
      return;
    }
    yield { kind: 'record', record: frame.record, offset, next: frame.next };
    offset = frame.next;
  }
}
