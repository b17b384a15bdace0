import { isPlainText, wellFormed } from '../engine/record-identity';
import { notAvroReason } from '../formats/avro/avro.reader';
import type { SchemaRegistry } from '../formats/avro/schema-registry';
import { readFingerprint } from '../formats/avro/single-object.codec';
import { JSON_CODEC } from '../formats/json/json.codec';
import type { JsonLimits } from '../interfaces/format-options.interface';
import { registryBodyOf, registryIdOf } from '../registry/registry-framing';
import { missingPeerFault } from '../registry/registry-schemas';
import { checkBlockCounts } from './avro-blocks';

/** At most this much of a decoded value's JSON is shown (the rest is cut, `truncated` says so). */
export const MAX_DECODED_CHARS = 65536;
/** The first bytes of a value (or a key or header that is not text) shown as hex. */
export const HEX_PREVIEW_BYTES = 256;
/** A text key or header value longer than this is cut (its byte count stays whole). */
const MAX_TEXT_CHARS = 4096;

/** Bytes a record carries (its key, a header value), as an operator can read them whatever they hold. */
export interface BytesView {
  /** The bytes as text when they are plain UTF-8 without NUL (cut at 4096 characters); null when they are not. */
  text: string | null;
  bytes: number;
  /** The first 256 bytes as hex, when they are not text or were cut. */
  hex?: string;
}

/** A record's value, decoded with its writer's schema where the application has it. */
export interface ValueView {
  /** null: the record has no value. */
  bytes: number | null;
  framing: 'single-object' | 'schema-registry' | 'json' | 'unknown' | 'none';
  /** The writer schema's full name, when found. */
  schema: string | null;
  /** The decoded value as JSON (longs as strings, bytes as `{ "$bytes": base64 }`), cut at 65536 characters. */
  decoded: string | null;
  truncated: boolean;
  /** Why it could not be decoded. */
  error: string | null;
  /** The first 256 bytes as hex. */
  hex: string;
  /** A value that is not decoded but is plain text: its first 4096 characters. */
  text?: string;
}

export interface HeaderView extends BytesView {
  /** The header's name (not UTF-8 bytes replaced by U+FFFD). */
  name: string;
  /** A header with a null value. */
  null?: true;
}

export function bytesView(bytes: Buffer): BytesView {
  if (isPlainText(bytes)) {
    const text = bytes.toString('utf8');
    if (text.length <= MAX_TEXT_CHARS) return { text, bytes: bytes.length };
    return { text: `${wellFormed(text.slice(0, MAX_TEXT_CHARS))}…`, bytes: bytes.length, hex: hexOf(bytes) };
  }
  return { text: null, bytes: bytes.length, hex: hexOf(bytes) };
}

export function headerViews(pairs: ReadonlyArray<[string, string | null]> | undefined): HeaderView[] {
  return (pairs ?? []).map(([name64, value64]) => {
    const name = wellFormed(Buffer.from(name64, 'base64').toString('utf8')).slice(0, 1000);
    if (value64 === null) return { name, null: true, text: null, bytes: 0 };
    return { name, ...bytesView(Buffer.from(value64, 'base64')) };
  });
}

const hexOf = (bytes: Buffer) => bytes.subarray(0, HEX_PREVIEW_BYTES).toString('hex');

/** JSON is shown whatever its size (the record is already in memory), its big integers as their digits. */
const VIEW_LIMITS = (value: Buffer): JsonLimits => ({ maxBytes: Math.max(value.length, 2), maxDepth: 64, bigIntegers: 'string' });

/** JSON of a decoded Avro value: longs (bigint) as strings, bytes and fixed as base64. */
function toJson(value: unknown): string {
  return JSON.stringify(
    value,
    function (this: unknown, key, v) {
      const raw = (this as Record<string, unknown>)[key];
      if (typeof raw === 'bigint') return raw.toString();
      if (Buffer.isBuffer(raw)) return { $bytes: raw.toString('base64') };
      return v;
    },
    2,
  );
}

/**
 * What a value holds, read with its writer's schema (the one it was written with, found by fingerprint among the
 * application's schemas, or by id in its Schema Registry): never throws, an undecodable value says why.
 */
export async function valueView(schemas: SchemaRegistry | undefined, value: Buffer | null): Promise<ValueView> {
  if (value === null) return { bytes: null, framing: 'none', schema: null, decoded: null, truncated: false, error: null, hex: '' };
  const base = { bytes: value.length, hex: hexOf(value) };
  const failed = (framing: ValueView['framing'], schema: string | null, error: string): ValueView => {
    const text = framing === 'unknown' && isPlainText(value) ? value.toString('utf8') : undefined;
    return { ...base, framing, schema, decoded: null, truncated: false, error, ...(text === undefined ? {} : { text: text.length > MAX_TEXT_CHARS ? `${wellFormed(text.slice(0, MAX_TEXT_CHARS))}…` : text }) };
  };
  const id = registryIdOf(value);
  const singleObject = value.length >= 10 && value[0] === 0xc3 && value[1] === 0x01;
  if (id === undefined && !singleObject) {
    // Plain JSON (Nest's Kafka transport, most Node services): shown as read, its big integers as their digits.
    let json: unknown;
    try {
      json = JSON_CODEC.decode(value, VIEW_LIMITS(value)).value;
    } catch (err) {
      if (value[0] === 0x7b) return failed('unknown', null, `not readable as JSON: ${wellFormed((err as Error).message).slice(0, 500)}`);
      return failed('unknown', null, 'neither Avro single-object encoding (C3 01), Schema Registry framing (byte 0 and a schema id) nor a JSON object');
    }
    const text = toJson(json);
    const truncated = text.length > MAX_DECODED_CHARS;
    return { ...base, framing: 'json', schema: null, decoded: truncated ? text.slice(0, MAX_DECODED_CHARS) : text, truncated, error: null };
  }
  if (!schemas) return failed(singleObject ? 'single-object' : 'schema-registry', null, 'no schemas to decode with (the CLI reads them from --schemas-dir or SCHEMAS_DIR)');
  let decoded: unknown;
  let schema: string | null = null;
  try {
    if (singleObject) {
      const writer = schemas.byFingerprintOf(readFingerprint(value));
      if (!writer) return failed('single-object', null, `no schema of this application has the writer's fingerprint ${value.subarray(2, 10).toString('hex')}`);
      schema = writer.name;
      checkBlockCounts(writer.type, value.subarray(10));
      decoded = writer.type.fromBuffer(value.subarray(10));
    } else {
      const remote = schemas.remote;
      if (!remote) return failed('schema-registry', null, `framed for a Schema Registry (schema id ${id}), and no registry is configured`);
      // An id the registry does not know: shown as such at once (a record's wait for it is the consumer's).
      await remote.prefetch([value]).catch((err: unknown) => {
        if ((err as { failure?: string }).failure !== 'unknown-id') throw err;
      });
      const writer = remote.writer(id!);
      const body = registryBodyOf(value);
      if (!writer || writer === 'unknown') return failed('schema-registry', null, `the Schema Registry knows no schema of id ${id}`);
      if ('unreadable' in writer) return failed('schema-registry', null, writer.unreadable);
      if ('missingPeer' in writer) return failed('schema-registry', null, missingPeerFault(id!, writer).message);
      if (!('codec' in writer)) return failed('schema-registry', null, `schema id ${id}: ${notAvroReason(writer)}`);
      const codec = writer.codec;
      if (codec.schemaType === 'PROTOBUF') {
        const read = codec.decode(body, VIEW_LIMITS(value));
        schema = `${read.name} (Protobuf id ${id})`;
        decoded = read.value;
      } else if (codec.schemaType === 'JSON') {
        schema = `JSON Schema id ${id}`;
        // Shown as the JSON text it is, never checked against its schema here.
        decoded = JSON_CODEC.decode(body, VIEW_LIMITS(value)).value;
      } else {
        schema = codec.type.name ?? null;
        checkBlockCounts(codec.type, body);
        decoded = codec.decode(body, VIEW_LIMITS(value)).value;
      }
    }
  } catch (err) {
    return failed(singleObject ? 'single-object' : 'schema-registry', schema, `cannot decode: ${wellFormed((err as Error).message).slice(0, 500)}`);
  }
  const json = toJson(decoded);
  const truncated = json.length > MAX_DECODED_CHARS;
  return { ...base, framing: singleObject ? 'single-object' : 'schema-registry', schema, decoded: truncated ? json.slice(0, MAX_DECODED_CHARS) : json, truncated, error: null };
}

/** The stages of `retry-history` headers' values (JSON objects, oldest first); a value that is not one is left out. */
export function retryHistoryOf(values: ReadonlyArray<string | null>): Array<Record<string, unknown>> {
  return values.flatMap((text) => {
    if (text === null) return [];
    try {
      const parsed = JSON.parse(text);
      return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? [parsed as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
}
