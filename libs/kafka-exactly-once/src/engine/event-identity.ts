import { hash } from 'crypto';
import type { KeyedRecord, MessageIdFrom } from '../interfaces/record-info.interface';
import { displayMessageId, type RecordIdentity } from './record-identity';

/** The longest field path `messageIdFrom` may name, in characters, and its deepest nesting. */
const MAX_PATH_CHARS = 1000;
const MAX_PATH_SEGMENTS = 32;

/** Why `messageIdFrom` cannot be used (checked at boot, with the option's name in the error), or undefined. */
export function messageIdFromProblem(value: unknown): string | undefined {
  if (typeof value === 'function') return undefined;
  if (typeof value !== 'string') return `must be a field path of the event (e.g. 'paymentId') or a function (event, record) => key, got ${value === null ? 'null' : typeof value}`;
  if (value.length === 0 || value.length > MAX_PATH_CHARS) return `must be a field path of 1 to ${MAX_PATH_CHARS} characters (e.g. 'paymentId' or 'order.id'), got ${value.length} characters`;
  const segments = value.split('.');
  if (segments.length > MAX_PATH_SEGMENTS) return `names a field ${segments.length} levels deep, more than ${MAX_PATH_SEGMENTS}: use a function (event) => key`;
  if (segments.some((s) => s.trim() === '' || s !== s.trim())) return `must be field names joined by dots, none empty or with blanks around it (e.g. 'order.id'), got ${JSON.stringify(value.slice(0, 200))}; for other names use a function (event) => event['the name']`;
  return undefined;
}

/** How a handler derives a record's identity from its event (resolved at boot). */
export interface EventKeySource {
  /** `field paymentId`, `a function`: for logs. */
  describe: string;
  /** The key's bytes, or why there is none (the record then keeps its coordinates). Never throws. */
  keyOf(event: unknown, record: () => KeyedRecord): { key: Buffer } | { problem: string };
}

/** The source of `from` (checked with messageIdFromProblem first). */
export function eventKeySource(from: MessageIdFrom): EventKeySource {
  if (typeof from === 'function') {
    return {
      describe: 'a function of the event',
      keyOf: (event, record) => {
        let value: unknown;
        try {
          value = from(event, record());
        } catch (err) {
          return { problem: `the messageIdFrom function threw: ${String((err as Error)?.message ?? err).slice(0, 300)}` };
        }
        return keyBytes(value, 'the messageIdFrom function returned');
      },
    };
  }
  const path = from.split('.');
  return {
    describe: `field ${from}`,
    keyOf: (event) => {
      let value: unknown = event;
      for (const name of path) {
        // Own fields only: a path never reaches a prototype's member (`constructor`, `__proto__`, `toString`).
        if (value === null || typeof value !== 'object' || !Object.prototype.hasOwnProperty.call(value, name)) return { problem: `the event has no field ${from}` };
        value = (value as Record<string, unknown>)[name];
      }
      return keyBytes(value, `field ${from} is`);
    },
  };
}

/**
 * A key's bytes: a string's UTF-8, a number's or a bigint's decimal text, a Buffer's or Uint8Array's own bytes (a
 * copy: an Avro `bytes` field, or the record's `keyBytes`, whose distinct values a text of them may not keep apart).
 */
function keyBytes(value: unknown, what: string): { key: Buffer } | { problem: string } {
  if (typeof value === 'string') return value.length > 0 ? { key: Buffer.from(value, 'utf8') } : { problem: `${what} an empty string` };
  if (value instanceof Uint8Array) return value.length > 0 ? { key: Buffer.from(value) } : { problem: `${what} no bytes` };
  if (typeof value === 'bigint') return { key: Buffer.from(value.toString(), 'utf8') };
  if (typeof value === 'number') return Number.isFinite(value) ? { key: Buffer.from(String(value), 'utf8') } : { problem: `${what} ${value}, not a usable key` };
  const kind = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'object' ? 'an object' : typeof value;
  return { problem: `${what} ${kind}; a key is a non-empty string, a finite number, a bigint or bytes (a Buffer)` };
}

/**
 * The digest of an event's own key: SHA3-256 behind a domain tag of its own. Neither a `message-id` header (SHA-256
 * of its bytes) nor a record's coordinates (SHA3-256 behind another tag) can reach it, so a header can never make a
 * record with an event key a duplicate, nor an event key another record; a key of any length is hashed, never stored.
 */
export function eventKeyDigest(key: Buffer): string {
  return hash('sha3-256', Buffer.concat([Buffer.from('kafka-eo event key\u0000', 'utf8'), key]), 'hex');
}

/** The identity of a record known by its event's key, in `scope` (the scope its coordinates identity had). */
export function eventKeyIdentity(scope: string, key: Buffer): RecordIdentity {
  return { raw: key, digest: eventKeyDigest(key), kind: 'event-key', scope, displayId: displayMessageId(key) };
}
