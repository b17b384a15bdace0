import type { IHeaders, Message } from 'kafkajs';
import type { ProduceArgs } from './kafkajs-internals';

/**
 * The body of an uncompressed Produce request (versions 3 to 8 share it: transactional id, acks, timeout, and per
 * topic and partition one record batch of magic 2; 9 and later are encoded otherwise, and KafkaJS speaks up to
 * 7), written in one Buffer of the exact size.
 *
 * KafkaJS writes the same bytes through an encoder per record, per header and per varint, each growing its own
 * zero-filled buffer and copied into the next: in a profile of the library's copy (bench variant E) that was the
 * largest allocator of the process. The bytes are the same as KafkaJS's (a spec compares them), except where
 * KafkaJS cannot write at all: a null header value, which a record may carry (Kafka's format has it: length -1)
 * and KafkaJS's size computation throws on, is written as a null header.
 */
export function encodeProduceBody(args: ProduceArgs, crc32c: (bytes: Buffer) => number, now: number = Date.now()): Buffer {
  const transactionalId = args.transactionalId ?? null;
  const topics = args.topicData.map(({ topic, partitions }) => ({
    name: Buffer.from(topic, 'utf8'),
    partitions: partitions.map(({ partition, firstSequence, messages, timestamp }) => ({ partition, batch: recordBatch(messages, args, firstSequence, now, timestamp) })),
  }));
  const txn = transactionalId === null ? null : Buffer.from(transactionalId, 'utf8');
  let size = 2 + (txn?.length ?? 0) + 2 + 4 + 4;
  for (const t of topics) {
    size += 2 + t.name.length + 4;
    for (const p of t.partitions) size += 4 + 4 + p.batch.size;
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  if (txn === null) at = out.writeInt16BE(-1, at);
  else {
    at = out.writeInt16BE(txn.length, at);
    at += txn.copy(out, at);
  }
  at = out.writeInt16BE(args.acks, at);
  at = out.writeInt32BE(args.timeout, at);
  at = out.writeInt32BE(topics.length, at);
  for (const t of topics) {
    at = out.writeInt16BE(t.name.length, at);
    at += t.name.copy(out, at);
    at = out.writeInt32BE(t.partitions.length, at);
    for (const p of t.partitions) {
      at = out.writeInt32BE(p.partition, at);
      at = out.writeInt32BE(p.batch.size, at);
      at = p.batch.write(out, at, crc32c);
    }
  }
  if (at !== size) throw new Error(`produce request encoding: wrote ${at} of ${size} bytes`);
  return out;
}

/** A field of a record as bytes: null stays null (length -1); strings as UTF-8, as KafkaJS writes them. */
type Bytes = Buffer | null;

interface EncodedRecord {
  timestampDelta: number;
  key: Bytes;
  value: Bytes;
  headers: Array<[Buffer, Bytes]>;
  /** The record's body length (what its leading varint says). */
  body: number;
}

/** A key, a value or a header value: bytes, text as UTF-8, or null; anything else is refused, never turned into text. */
function bytesOf(value: unknown, what: string): Bytes {
  if (value === null || value === undefined) return null;
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`a record's ${what} must be a Buffer, a string or null, not ${typeof value}`);
}

/**
 * Not a Kafka error type: the library's own refusal of a record it cannot encode (a key, value or header value
 * that is neither bytes, text nor null), before any request carries it. Nothing was written.
 */
export const UNENCODABLE_RECORD = 'UNENCODABLE_RECORD';

/**
 * What of a record the Produce encoding cannot write (a key, value or header value that is neither bytes, text nor
 * null), named, or undefined when it can write all of it. Checked before a send starts, so that such a record is
 * refused with nothing written rather than failing inside a request.
 */
export function unencodablePart(message: { key?: unknown; value?: unknown; headers?: unknown }): string | undefined {
  if (!isBytes(message.key)) return `its key is ${typeOf(message.key)}`;
  if (!isBytes(message.value)) return `its value is ${typeOf(message.value)}`;
  const headers = message.headers;
  if (headers === undefined || headers === null) return undefined;
  if (typeof headers !== 'object') return `its headers are ${typeOf(headers)}`;
  for (const name of Object.keys(headers)) {
    const value = (headers as Record<string, unknown>)[name];
    const values = Array.isArray(value) ? value : [value];
    for (const one of values) if (one !== undefined && !isBytes(one)) return `header "${name.slice(0, 100)}" is ${typeOf(one)}`;
  }
  return undefined;
}

function isBytes(value: unknown): boolean {
  return value === null || value === undefined || typeof value === 'string' || value instanceof Uint8Array;
}

function typeOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}

/** Header names repeat from record to record: their bytes are kept (a bounded number of them). */
const NAMES = new Map<string, Buffer>();
const MAX_NAMES = 1024;

function nameBytes(name: string): Buffer {
  let bytes = NAMES.get(name);
  if (bytes === undefined) {
    bytes = Buffer.from(name, 'utf8');
    if (NAMES.size < MAX_NAMES && name.length <= 256) NAMES.set(name, bytes);
  }
  return bytes;
}

function headerList(headers: IHeaders | undefined): Array<[Buffer, Bytes]> {
  const list: Array<[Buffer, Bytes]> = [];
  if (!headers) return list;
  for (const name of Object.keys(headers)) {
    const value = headers[name] as unknown;
    const key = nameBytes(name);
    // An undefined value is no header (as JSON, and so the publisher's spool, has it); null is a null header.
    if (Array.isArray(value)) {
      for (const one of value) if (one !== undefined) list.push([key, bytesOf(one, `header "${name}"`)]);
    } else if (value !== undefined) list.push([key, bytesOf(value, `header "${name}"`)]);
  }
  return list;
}

/** Bytes of a zigzag varint (Kafka's signed varint) of a 32-bit value. */
export function varIntSize(value: number): number {
  let v = ((value << 1) ^ (value >> 31)) >>> 0;
  let bytes = 1;
  while (v >= 0x80) {
    bytes += 1;
    v >>>= 7;
  }
  return bytes;
}

function writeVarInt(out: Buffer, value: number, at: number): number {
  let v = ((value << 1) ^ (value >> 31)) >>> 0;
  while (v >= 0x80) {
    out[at++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  out[at++] = v;
  return at;
}

/** A zigzag varlong; record timestamp deltas (milliseconds) fit well within 2^53. */
function varLongSize(value: number): number {
  if (value >= -0x40000000 && value < 0x40000000) return varIntSize(value);
  let v = zigzag64(value);
  let bytes = 1;
  while (v >= 0x80n) {
    bytes += 1;
    v >>= 7n;
  }
  return bytes;
}

function writeVarLong(out: Buffer, value: number, at: number): number {
  if (value >= -0x40000000 && value < 0x40000000) return writeVarInt(out, value, at);
  let v = zigzag64(value);
  while (v >= 0x80n) {
    out[at++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  out[at++] = Number(v);
  return at;
}

function zigzag64(value: number): bigint {
  const v = BigInt(value);
  return BigInt.asUintN(64, (v << 1n) ^ (v >> 63n));
}

const bytesSize = (b: Bytes) => (b === null ? 1 : varIntSize(b.length) + b.length);

function writeBytes(out: Buffer, b: Bytes, at: number): number {
  if (b === null) return writeVarInt(out, -1, at);
  at = writeVarInt(out, b.length, at);
  return at + b.copy(out, at);
}

const TRANSACTIONAL = 16;
/** From the batch's attributes (offset 21 of the batch) to its end: what the CRC covers. */
const CRC_FROM = 8 + 4 + 4 + 1 + 4;

function recordBatch(
  messages: Message[],
  args: ProduceArgs,
  firstSequence: number,
  now: number,
  partitionStamp: string | undefined,
): { size: number; write(out: Buffer, at: number, crc32c: (bytes: Buffer) => number): number } {
  const own = (m: Message) => m.timestamp !== undefined && m.timestamp !== null && m.timestamp !== '';
  // A record without a timestamp gets the partition's (as if it were its own), else, as KafkaJS does, now: then
  // the batch's first and largest timestamps are those of the records with their own.
  const fallback = partitionStamp === undefined ? now : Number(partitionStamp);
  const stamps = messages.map((m) => (own(m) ? Number(m.timestamp) : fallback));
  let first = Infinity;
  let max = -Infinity;
  for (const [i, m] of messages.entries()) {
    if (!own(m) && partitionStamp === undefined) continue;
    first = Math.min(first, stamps[i]);
    max = Math.max(max, stamps[i]);
  }
  if (first === Infinity) first = max = now;
  const records: EncodedRecord[] = messages.map((m, i) => {
    const headers = headerList(m.headers);
    const key = bytesOf(m.key, 'key');
    const value = bytesOf(m.value, 'value');
    const timestampDelta = stamps[i] - first;
    let body = 1 + varLongSize(timestampDelta) + varIntSize(i) + bytesSize(key) + bytesSize(value) + varIntSize(headers.length);
    for (const [name, v] of headers) body += varIntSize(name.length) + name.length + bytesSize(v);
    return { timestampDelta, key, value, headers, body };
  });
  let recordsSize = 0;
  for (const r of records) recordsSize += varIntSize(r.body) + r.body;
  // firstOffset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2, lastOffsetDelta 4, first and max
  // timestamps 16, producer id 8, epoch 2, first sequence 4, record count 4.
  const size = CRC_FROM + 2 + 4 + 16 + 8 + 2 + 4 + 4 + recordsSize;
  return {
    size,
    write(out, start, crc32c) {
      let at = start;
      at = out.writeBigInt64BE(0n, at);
      at = out.writeInt32BE(size - 12, at);
      at = out.writeInt32BE(0, at); // partition leader epoch (KafkaJS writes 0; the broker sets it)
      at = out.writeInt8(2, at); // magic
      const crcAt = at;
      at += 4;
      at = out.writeInt16BE(args.transactionalId ? TRANSACTIONAL : 0, at);
      at = out.writeInt32BE(records.length - 1, at);
      at = out.writeBigInt64BE(BigInt(first), at);
      at = out.writeBigInt64BE(BigInt(max), at);
      at = out.writeBigInt64BE(BigInt(String(args.producerId)), at);
      at = out.writeInt16BE(args.producerEpoch, at);
      at = out.writeInt32BE(firstSequence, at);
      at = out.writeInt32BE(records.length, at);
      for (const [i, r] of records.entries()) {
        at = writeVarInt(out, r.body, at);
        at = out.writeInt8(0, at);
        at = writeVarLong(out, r.timestampDelta, at);
        at = writeVarInt(out, i, at);
        at = writeBytes(out, r.key, at);
        at = writeBytes(out, r.value, at);
        at = writeVarInt(out, r.headers.length, at);
        for (const [name, v] of r.headers) {
          at = writeVarInt(out, name.length, at);
          at += name.copy(out, at);
          at = writeBytes(out, v, at);
        }
      }
      out.writeUInt32BE(crc32c(out.subarray(start + CRC_FROM, at)) >>> 0, crcAt);
      return at;
    },
  };
}
