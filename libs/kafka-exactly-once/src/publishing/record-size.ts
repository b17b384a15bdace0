import type { SpooledRecord } from '../spool/spool-record';
import { durableValueBytes } from './event-headers';

/**
 * Bytes of a Kafka record batch (format v2) around its records: base offset, length, leader epoch, magic, CRC,
 * attributes, last offset delta, timestamps, producer id and epoch, base sequence, record count.
 */
export const RECORD_BATCH_OVERHEAD = 61;

/** The broker's default `message.max.bytes`, used when neither the topic's nor the broker's setting can be read. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1048588;

/**
 * The largest record the publisher takes whatever the topic allows: a record must fit in one spool frame
 * (at most 64 MiB of JSON with base64 key and value, see spool-record.ts), with room to spare.
 */
export const MAX_PRODUCER_RECORD_BYTES = 32 * 1024 * 1024;

/** Bytes of a zig-zag varint (Kafka's record fields), for a non-negative or negative length. */
export function varintBytes(n: number): number {
  let zigzag = n >= 0 ? 2 * n : -2 * n - 1;
  let bytes = 1;
  while (zigzag >= 128) {
    zigzag = Math.floor(zigzag / 128);
    bytes++;
  }
  return bytes;
}

/**
 * What one record costs as the only record of a batch, as the broker measures it against the topic's
 * `max.message.bytes`: batch overhead plus the record with its varint lengths. Timestamp and offset deltas are
 * counted at their largest (a few bytes), so the estimate is never below the real size.
 */
export function estimateRecordBytes(record: Pick<SpooledRecord, 'key' | 'value' | 'headers'>): number {
  const key = record.key === null ? -1 : Buffer.byteLength(record.key, 'base64');
  const value = Buffer.byteLength(record.value, 'base64');
  const headers = Object.entries(record.headers);
  let body = 1 /* attributes */ + 10 /* timestamp delta, varlong at most */ + 5 /* offset delta */;
  body += varintBytes(key) + Math.max(0, key);
  body += varintBytes(value) + value;
  body += varintBytes(headers.length);
  for (const [name, value] of headers) {
    const nameBytes = Buffer.byteLength(name, 'utf8');
    const valueBytes = durableValueBytes(value);
    body += varintBytes(nameBytes) + nameBytes + varintBytes(valueBytes) + valueBytes;
  }
  return RECORD_BATCH_OVERHEAD + varintBytes(body) + body;
}
