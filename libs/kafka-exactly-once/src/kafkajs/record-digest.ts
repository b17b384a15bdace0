import { createHash } from 'crypto';
import type { Message } from 'kafkajs';

/** A header as bytes: its name and its value (null for a null header). */
export type DigestHeader = readonly [string, Buffer | null];

/**
 * A digest of everything a record carries: its topic, key, value and headers (length-prefixed, null told apart
 * from empty). Headers are taken by name in byte order, the values of one name in their order: KafkaJS groups a
 * repeated name when it encodes and when it decodes, so the order of different names is not kept, that of one
 * name's values is. Two records with the same digest carry the same bytes.
 */
export function recordDigest(topic: string, key: Buffer | null, value: Buffer | null, headers: readonly DigestHeader[]): string {
  const hash = createHash('sha256');
  const bytes = (b: Buffer | null) => {
    const length = Buffer.alloc(4);
    length.writeInt32BE(b === null ? -1 : b.length);
    hash.update(length);
    if (b !== null) hash.update(b);
  };
  bytes(Buffer.from(topic, 'utf8'));
  bytes(key);
  bytes(value);
  const names = Buffer.alloc(4);
  names.writeInt32BE(headers.length);
  hash.update(names);
  const sorted = headers.map((h, i) => ({ name: Buffer.from(h[0], 'utf8'), value: h[1], i })).sort((a, b) => Buffer.compare(a.name, b.name) || a.i - b.i);
  for (const h of sorted) {
    bytes(h.name);
    bytes(h.value);
  }
  return hash.digest('base64');
}

/**
 * The headers of a record as KafkaJS's fetch decoder gives them (a repeated name as an array), as pairs. Its
 * decoder folds into a plain object: a header named like an Object member (`constructor`, `toString`,
 * `__proto__`) comes as an array that starts with the inherited member, which is not one of the record's values
 * and is left out (as record-headers.ts's headerValues does).
 */
export function decodedHeaders(headers: Record<string, unknown> | undefined): DigestHeader[] {
  const pairs: DigestHeader[] = [];
  for (const [name, value] of Object.entries(headers ?? {})) {
    for (const one of Array.isArray(value) ? value : [value]) if (one === null || Buffer.isBuffer(one)) pairs.push([name, one]);
  }
  return pairs;
}

/**
 * The digest of a record a producer sends (KafkaJS's Message): as recordDigest of the record read back, text written
 * as its UTF-8 bytes, a header's array of values as that name repeated.
 */
export function messageDigest(topic: string, message: Pick<Message, 'key' | 'value' | 'headers'>): string {
  const bytes = (b: Buffer | string | null | undefined) => (b === null || b === undefined ? null : Buffer.isBuffer(b) ? b : Buffer.from(b, 'utf8'));
  const headers: DigestHeader[] = [];
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    for (const one of Array.isArray(value) ? value : [value]) if (one !== undefined) headers.push([name, bytes(one)]);
  }
  return recordDigest(topic, bytes(message.key), bytes(message.value), headers);
}

/**
 * Takes from `left` (counts of digests of records Kafka holds committed) one of each of `digests` it still counts,
 * in order, and returns those taken: what a record sent again leaves out. Each count is taken once: another
 * record with the same bytes finds it spent and is sent.
 */
export function takeCommitted(left: Map<string, number>, digests: readonly string[]): string[] {
  const taken: string[] = [];
  for (const digest of digests) {
    const n = left.get(digest) ?? 0;
    if (n === 0) continue;
    if (n === 1) left.delete(digest);
    else left.set(digest, n - 1);
    taken.push(digest);
  }
  return taken;
}
