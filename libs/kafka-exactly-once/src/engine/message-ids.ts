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

/** Namespace of handlers' idempotency keys (fixed: changing it would change every key a record was given). */
const IDEMPOTENCY_NAMESPACE = Buffer.from('kafka-eo idempotency key\u0000', 'utf8');

/**
 * The idempotency key of a record for calls outside the database (`ctx.idempotencyKey`): a UUID (version 8,
 * RFC 9562) from SHA-256 of the consumer group and the record's inbox key (scope and digest). The inbox key is
 * the same in every run of the record: in-place retries, re-runs of its unit of work, redeliveries, every retry
 * tier (scoped to the topic it was first consumed from), dead-letter replays and releases of a parked key.
 */
export function idempotencyKey(group: string, scope: string, digest: string): string {
  const bytes = hash('sha256', Buffer.concat([IDEMPOTENCY_NAMESPACE, Buffer.from(`${group}\u0000${scope}\u0000${digest}`, 'utf8')]), 'buffer').subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x80;
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
