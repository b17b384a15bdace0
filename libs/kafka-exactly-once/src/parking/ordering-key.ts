import type { OrderingKey } from '../decorators/ordered-event.decorator';
import { displayMessageId, sha256Hex } from '../engine/record-identity';

/** An ordering key as the parking tables know it: the SHA-256 of its bytes, and a text form to show. */
export interface OrderingKeyId {
  /** SHA-256 of the key's bytes, hex. */
  digest: string;
  /** The key as text when it is plain UTF-8 of at most 200 characters; else a `sha256:` form. */
  display: string;
  bytes: Buffer;
}

/** Why no ordering key could be derived for a record. */
export class KeyUnresolvedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KeyUnresolvedError';
  }
}

export function orderingKeyOf(bytes: Buffer): OrderingKeyId {
  const digest = sha256Hex(bytes);
  return { digest, display: displayMessageId(bytes, digest), bytes };
}

/** The bytes of what a key function returned; throws KeyUnresolvedError for nothing usable. */
export function orderingKeyBytes(value: OrderingKey | null | undefined): Buffer {
  let bytes: Buffer | undefined;
  if (Buffer.isBuffer(value)) bytes = value;
  else if (typeof value === 'string') bytes = Buffer.from(value, 'utf8');
  else if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'bigint') bytes = Buffer.from(String(value), 'utf8');
  if (!bytes || bytes.length === 0) {
    throw new KeyUnresolvedError(`the @OrderedEvent key function returned ${value === '' || (Buffer.isBuffer(value) && value.length === 0) ? 'an empty key' : typeof value === 'number' ? String(value) : value === null ? 'null' : typeof value}; it must return a non-empty string, number, bigint or Buffer`);
  }
  return bytes;
}

/**
 * How an operator names a parked key: the key as text, or `sha256:<hex>` (the digest) for a key whose bytes are
 * not plain text, also as listed and logged (`sha256:<hex> (6 bytes)`, `sha256:<hex> (300 bytes, starts "...")`).
 */
export function keyDigestFromOperator(key: string): string {
  const digest = /^sha256:([0-9a-f]{64})(?: \([0-9]+ bytes(?:, starts "[\s\S]*")?\))?$/.exec(key);
  return digest ? digest[1] : sha256Hex(Buffer.from(key, 'utf8'));
}
