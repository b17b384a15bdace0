import { hash, randomBytes } from 'crypto';

/** Namespace of the UUIDv5 ids of emitted events (fixed: changing it would change every replayed id). */
const OUTPUT_NAMESPACE = Buffer.from('6f0b2a1e9c3d4f5a8b7c1d2e3f405162', 'hex');

/**
 * The message id of the `index`-th event emitted while handling `inputMessageId` in `group`: a UUIDv5, the
 * same on every replay, so that downstream consumers deduplicate replays too.
 */
export function outputMessageId(group: string, inputMessageId: string, index: number): string {
  const name = Buffer.from(`${group}\u0000${inputMessageId}\u0000${index}`, 'utf8');
  const bytes = hash('sha1', Buffer.concat([OUTPUT_NAMESPACE, name]), 'buffer').subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x50;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return formatUuid(bytes);
}

/** A UUIDv7 (RFC 9562): 48-bit millisecond timestamp, then random bits; sorts by creation time. */
export function uuidv7(now: number = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = (bytes[6] & 0x0f) | 0x70;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return formatUuid(bytes);
}

function formatUuid(bytes: Buffer): string {
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}
