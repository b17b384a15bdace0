import { hash } from 'crypto';
import type { IHeaders, KafkaMessage } from '../kafkajs';
import { HEADERS } from '../kafka-exactly-once.constants';

/** How far deduplication reaches: message ids are unique per topic (default), or across the whole group. */
export type DeduplicationScope = 'topic' | 'group';

/**
 * How the inbox knows a record. A message id may be any bytes of any length (NUL, invalid UTF-8, a megabyte):
 * the inbox is keyed by the SHA-256 of its raw bytes, so PostgreSQL never has to store or index it as text;
 * `displayId` is a text form safe to store, log and put in headers. A record without a header whose handler names
 * the event's own key (`messageIdFrom`) is known by that key, in a namespace of its own (engine/event-identity.ts).
 *
 * A record without a `message-id` header is known by its coordinates, in a namespace no header can reach: its
 * digest is a SHA3-256 (of a domain tag and the coordinates), never the SHA-256 of any bytes, so that a header
 * that spells another record's coordinates (`payments/0/5`) does not make that record a duplicate.
 */
export interface RecordIdentity {
  /** The raw `message-id` header bytes, or the UTF-8 of `topic/partition/offset` when there is none. */
  raw: Buffer;
  /** The inbox key's digest, hex: SHA-256 of `raw` for a message id, SHA3-256 of the coordinates without one. */
  digest: string;
  /**
   * `message-id`: the header; `coordinates`: the record has none (redeliveries of it are deduplicated, nothing else);
   * `event-key`: it has none, and its handler names the event's own key (`messageIdFrom`): `raw` is that key.
   */
  kind: 'message-id' | 'coordinates' | 'event-key';
  /** `''` for a group-wide scope, else the topic. Part of the inbox key. */
  scope: string;
  /** `raw` as text when it is plain UTF-8 without NUL and at most 200 characters; else a `sha256:` form. */
  displayId: string;
}

const MAX_DISPLAY_CHARS = 200;

/** The first value of a header (KafkaJS gives an array when a record repeats a header name). */
export function firstHeader(value: IHeaders[string]): Buffer | undefined {
  if (value === undefined || value === null) return undefined;
  const first = (Array.isArray(value) ? value : [value]).find((v) => Buffer.isBuffer(v) || typeof v === 'string');
  if (first === undefined) return undefined;
  return Buffer.isBuffer(first) ? first : Buffer.from(String(first));
}

/** Whether `bytes` is valid UTF-8 with no NUL (what a PostgreSQL text column and a JSON string can hold). */
export function isPlainText(bytes: Buffer): boolean {
  if (bytes.includes(0)) return false;
  return Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes);
}

/** A text form of a message id that can be stored and logged as is. */
export function displayMessageId(raw: Buffer, digest = sha256Hex(raw)): string {
  if (isPlainText(raw)) {
    const text = raw.toString('utf8');
    if (text.length <= MAX_DISPLAY_CHARS) return text;
  }
  return `sha256:${digest} (${raw.length} bytes${isPlainText(raw) ? `, starts "${wellFormed(raw.toString('utf8').slice(0, 40))}"` : ''})`;
}

export function sha256Hex(bytes: Buffer): string {
  // The one-shot hash: a quarter of createHash's time for a short id (it runs once per record).
  return hash('sha256', bytes, 'hex');
}

/**
 * What the ids of a record's outputs are derived from: the id itself when it is plain text, else its digest
 * behind a NUL (which no plain-text id contains), so that no id can be made to collide with another's.
 */
export function outputIdSeed(id: RecordIdentity): string {
  if (id.kind === 'coordinates') return `\u0000coordinates:${id.raw.toString('utf8')}`;
  // The scope too: the same business key on two topics (scope 'topic') names two events, whose outputs differ.
  if (id.kind === 'event-key') return `\u0000event-key:${id.scope}\u0000${id.digest}`;
  return isPlainText(id.raw) ? id.raw.toString('utf8') : `\u0000sha256:${id.digest}`;
}

/** The digest of a record known by its coordinates: SHA3-256, so that no message id's SHA-256 can equal it. */
export function coordinatesDigest(coordinates: string): string {
  return hash('sha3-256', `kafka-eo coordinates\u0000${coordinates}`, 'hex');
}

/**
 * Identifies a record: its `message-id` header bytes, else its coordinates (deduplicates redelivery only). A
 * record of a retry tier (`tier` set) keeps the identity it had on the topic it was first consumed from: that
 * topic's scope, and without a message id the coordinates its origin headers name.
 */
export function identify(
  topic: string,
  partition: number,
  message: Pick<KafkaMessage, 'headers' | 'offset'>,
  scope: DeduplicationScope,
  tier?: { base: string; origin?: { topic: string; partition: number; offset: string } },
): RecordIdentity {
  const header = firstHeader(message.headers?.[HEADERS.messageId]);
  const scoped = scope === 'group' ? '' : (tier?.base ?? topic);
  if (header && header.length > 0) {
    const digest = sha256Hex(header);
    return { raw: header, digest, kind: 'message-id', scope: scoped, displayId: displayMessageId(header, digest) };
  }
  const at = tier?.origin ?? { topic, partition, offset: message.offset };
  const text = `${at.topic}/${at.partition}/${at.offset}`;
  const raw = Buffer.from(text, 'utf8');
  return { raw, digest: coordinatesDigest(text), kind: 'coordinates', scope: scoped, displayId: text };
}

/** Lone UTF-16 surrogates (jsonb refuses them) replaced by U+FFFD. */
export function wellFormed(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** Text that PostgreSQL text and jsonb accept: no NUL, no lone surrogate, at most `max` characters. */
export function storableText(text: string, max = 4000): string {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/\u0000/g, '\\0');
  return wellFormed(clean.length > max ? `${clean.slice(0, max)}…` : clean);
}
