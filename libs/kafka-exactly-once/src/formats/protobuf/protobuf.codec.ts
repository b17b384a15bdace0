import { dirname } from 'path';
import type * as Protobuf from 'protobufjs';
import { DecodeError } from '../../errors/decode.error';
import type { BuiltWriter, RegistrySchema } from '../../registry/registry-schemas';
import type { ProtobufCodec } from '../format.codec';

/** Message indexes one record may carry: a real .proto nests a handful of levels, so more is a corrupt value. */
export const MAX_MESSAGE_INDEXES = 100;
/** The longest varint of a 32-bit value: a longer one is not one Confluent's serializers write. */
const MAX_VARINT_BYTES = 5;

/** A .proto file the schema imports, as the registry answer's references give it: the import path and the text. */
export interface ProtobufReference {
  name: string;
  schema: string;
}

/**
 * A Protobuf writer schema of the registry, ready to read and write record values. The bytes handled are those after
 * the magic byte and the schema id: Confluent's message indexes, then the message body.
 *
 * Decoded values are plain objects, the same whichever protobufjs options an application uses elsewhere:
 * - int64, uint64, sint64, fixed64, sfixed64: decimal strings, exact beyond 2^53 (a JSON number would round);
 * - enums: the value's name (a number the schema does not name stays a number);
 * - bytes: base64 strings (what JSON can carry; Protobuf's own JSON mapping does the same);
 * - fields not on the wire: their defaults (proto3 reads an absent field as its default anyway; a message field is
 *   null), except oneof members; a set oneof names its member under the oneof's own name (`{ kind: 'card', card: {...} }`);
 * - well-known types as their messages (a Timestamp is `{ seconds: '1700000000', nanos: 0 }`).
 */
export interface ProtobufSchema {
  id: number;
  /** The message the indexes name and its value; DecodeError (naming the schema id) for what does not read. */
  decode(bytesAfterId: Buffer): { message: string; value: Record<string, unknown> };
  /**
   * The message indexes and body of `value` as `messageName` (a full name with or without the package, or a name
   * relative to the package; undefined: the file's first message). Values are converted by protobufjs's
   * `fromObject` rules: 64-bit integers as decimal strings, numbers or bigints, enums as names or numbers, bytes as
   * Buffers or base64 strings.
   */
  encode(messageName: string | undefined, value: unknown): Buffer;
}

/**
 * Confluent's message indexes: the path from the file's top-level messages to the record's message, through nested
 * messages (index i among the declared messages of that level, enums not counted). Written as a zigzag varint
 * count, then each index as a zigzag varint; the path [0] (the file's first message), the common case, as the
 * single byte 0x00.
 */
export function encodeMessageIndexes(indexes: readonly number[]): Buffer {
  if (indexes.length === 0) throw new RangeError('message indexes: at least one index (the file\'s first message is [0])');
  if (indexes.length > MAX_MESSAGE_INDEXES) throw new RangeError(`message indexes: at most ${MAX_MESSAGE_INDEXES}, not ${indexes.length}`);
  for (const index of indexes) {
    if (!Number.isInteger(index) || index < 0 || index > 0x3fffffff) throw new RangeError(`message indexes: ${index} is not an index of a message`);
  }
  if (indexes.length === 1 && indexes[0] === 0) return Buffer.from([0]);
  const bytes: number[] = [];
  for (const n of [indexes.length, ...indexes]) writeZigzag(bytes, n);
  return Buffer.from(bytes);
}

/**
 * The message indexes at the start of `bytes` and where the body begins. A count above MAX_MESSAGE_INDEXES, a
 * negative count or index, a varint longer than 5 bytes or bytes that end within the indexes throw DecodeError
 * naming `schemaId`.
 */
export function decodeMessageIndexes(bytes: Buffer, schemaId: number): { indexes: number[]; bodyOffset: number } {
  let offset = 0;
  const next = (what: string): number => {
    let result = 0;
    for (let i = 0; i < MAX_VARINT_BYTES; i++) {
      if (offset >= bytes.length) throw new DecodeError(`value of Protobuf schema id ${schemaId}: the bytes end within the message indexes (${what})`);
      const byte = bytes[offset++];
      result += (byte & 0x7f) * 2 ** (7 * i);
      if ((byte & 0x80) === 0) {
        // zigzag: even is n / 2, odd is -(n + 1) / 2
        return result % 2 === 0 ? result / 2 : -(result + 1) / 2;
      }
    }
    throw new DecodeError(`value of Protobuf schema id ${schemaId}: a varint longer than ${MAX_VARINT_BYTES} bytes in the message indexes (${what}): not Confluent's framing`);
  };
  const count = next('count');
  if (count < 0 || count > MAX_MESSAGE_INDEXES) throw new DecodeError(`value of Protobuf schema id ${schemaId}: ${count} message indexes (at most ${MAX_MESSAGE_INDEXES}): not Confluent's framing`);
  if (count === 0) return { indexes: [0], bodyOffset: offset };
  const indexes: number[] = [];
  for (let i = 0; i < count; i++) {
    const index = next(`index ${i + 1} of ${count}`);
    if (index < 0) throw new DecodeError(`value of Protobuf schema id ${schemaId}: message index ${index} is negative`);
    indexes.push(index);
  }
  return { indexes, bodyOffset: offset };
}

/**
 * A registry's Protobuf schema, compiled: `text` (the .proto file) parsed with field names as written, its
 * imports from `references` (name: the import path; the referenced files in any order) or protobufjs's well-known
 * types (google/protobuf/timestamp.proto and the others it bundles). `{ unreadable }` with the reason when the
 * files do not parse or resolve, or an import is neither; `{ missingPeer }` when protobufjs is not installed (not
 * the schema's fault: its records wait for the package).
 */
export function buildProtobufSchema(id: number, text: string, references: readonly ProtobufReference[] = []): { protobuf: ProtobufSchema } | { unreadable: string } | { missingPeer: 'protobufjs' } {
  const protobuf = loadProtobuf();
  if (!protobuf) return { missingPeer: 'protobufjs' };
  const options = { keepCase: true };
  try {
    // The main file alone gives its own messages in the order it declares them (what message indexes count); in
    // the full root, files of the same package share one namespace.
    const own = protobuf.parse(text, new protobuf.Root(), options);
    const ownPackage = own.package ? own.root.lookup(own.package) : own.root;
    if (!(ownPackage instanceof protobuf.Namespace)) return { unreadable: `Protobuf schema id ${id}: its package ${own.package} is not a namespace` };
    const root = new protobuf.Root();
    const byName = new Map(references.map((reference) => [reference.name, reference.schema]));
    const common = protobuf.common as unknown as { get(file: string): { nested?: Protobuf.INamespace['nested'] } | null };
    const added = new Set<string>();
    const add = (file: string, source: string): void => {
      if (added.has(file)) return;
      added.add(file);
      const parsed = protobuf.parse(source, root, options);
      for (const imported of [...(parsed.imports ?? []), ...(parsed.weakImports ?? [])]) {
        const referenced = byName.get(imported);
        if (referenced !== undefined) {
          add(imported, referenced);
          continue;
        }
        const known = common.get(imported);
        if (!known?.nested) throw new Error(`${file} imports ${imported}, which is neither among the schema's references nor a well-known type protobufjs bundles`);
        if (!added.has(imported)) {
          added.add(imported);
          root.addJSON(known.nested);
        }
      }
    };
    add('(the schema)', text);
    root.resolveAll();
    const messagesOf = (namespace: Protobuf.NamespaceBase): Protobuf.Type[] => namespace.nestedArray.filter((t): t is Protobuf.Type => t instanceof protobuf.Type);
    const ownTop = messagesOf(ownPackage);
    if (ownTop.length === 0) return { unreadable: `Protobuf schema id ${id} declares no message` };
    return { protobuf: schemaOf(id, protobuf, own.package ?? '', ownTop, messagesOf, (type) => root.lookupType(type.fullName)) };
  } catch (err) {
    return { unreadable: `Protobuf schema id ${id} cannot be read here: ${(err as Error).message}` };
  }
}

/**
 * The codec of a registry's Protobuf schema: a body is Confluent's message indexes and the message they name (its
 * full name beside the value); an event is written as the message named (the file's first when none is), checked
 * field by field first (validate says what encode would refuse).
 */
export function protobufCodec(schema: ProtobufSchema): ProtobufCodec {
  return {
    format: 'protobuf',
    schemaType: 'PROTOBUF',
    describe: `Protobuf schema id ${schema.id}`,
    validatesDecoded: false,
    decode(body) {
      const { message, value } = schema.decode(body);
      return { value, name: message };
    },
    validate(value, name) {
      try {
        schema.encode(name, value);
        return [];
      } catch (err) {
        return [{ path: '', problem: (err as Error).message }];
      }
    },
    encode: (value, name) => schema.encode(name, value),
  };
}

/** The codec of a registry's schema of schemaType PROTOBUF, or why there is none here (a schema problem, protobufjs missing). */
export function protobufWriter(schema: RegistrySchema): BuiltWriter<ProtobufCodec> {
  const built = buildProtobufSchema(schema.id, schema.text, schema.references.map((r) => ({ name: r.name, schema: r.text })));
  if ('missingPeer' in built) return { missingPeer: built.missingPeer, schemaType: 'PROTOBUF', kind: 'a Protobuf schema' };
  if ('unreadable' in built) return { unreadable: `the registry's schema id ${schema.id} is a Protobuf schema that cannot be read here: ${built.unreadable}` };
  return { codec: protobufCodec(built.protobuf) };
}

/**
 * The compiled schema over the main file's own messages (`ownTop`, where message indexes point) and the full root their
 * field types resolve in (`inFull`: the same message there).
 */
function schemaOf(
  id: number,
  protobuf: typeof Protobuf,
  pkg: string,
  ownTop: Protobuf.Type[],
  messagesOf: (namespace: Protobuf.NamespaceBase) => Protobuf.Type[],
  inFull: (type: Protobuf.Type) => Protobuf.Type,
): ProtobufSchema {
  const typeAt = (indexes: readonly number[]): Protobuf.Type | string => {
    let level = ownTop;
    let type: Protobuf.Type | undefined;
    for (const index of indexes) {
      const within = type ? `message ${ownName(type.fullName)}` : 'the file';
      type = level[index];
      if (!type) return `message indexes [${indexes.join(', ')}] name no message: ${within} declares ${level.length} message${level.length === 1 ? '' : 's'} at that level, and index ${index} is not one`;
      level = messagesOf(type);
    }
    return type!;
  };
  const pathOf = (name: string): number[] | undefined => {
    const relative = name.replace(/^\./, '');
    const bare = pkg && relative.startsWith(`${pkg}.`) ? relative.slice(pkg.length + 1) : relative;
    const path: number[] = [];
    let level = ownTop;
    for (const part of bare.split('.')) {
      const index = level.findIndex((t) => t.name === part);
      if (index < 0) return undefined;
      path.push(index);
      level = messagesOf(level[index]);
    }
    return path;
  };
  return {
    id,
    decode(bytesAfterId) {
      const { indexes, bodyOffset } = decodeMessageIndexes(bytesAfterId, id);
      const own = typeAt(indexes);
      if (typeof own === 'string') throw new DecodeError(`value of Protobuf schema id ${id}: ${own}`);
      const type = inFull(own);
      const message = ownName(type.fullName);
      // NOTE: protobufjs's reader of a Buffer clamps a truncated string to what is left instead of failing
      // (https://github.com/protobufjs/protobuf.js/pull/2205), and a truncated 64-bit varint reads past the end
      // (https://github.com/protobufjs/protobuf.js/issues/2321): the plain reader checks strings, and a position past
      // the end after decoding is a truncated body either way.
      const body = bytesAfterId.subarray(bodyOffset);
      const reader = new protobuf.Reader(new Uint8Array(body.buffer, body.byteOffset, body.byteLength));
      let decoded: Protobuf.Message;
      try {
        decoded = type.decode(reader);
      } catch (err) {
        throw new DecodeError(`value of Protobuf schema id ${id} does not read as ${message}: ${(err as Error).message}`, { cause: err });
      }
      if (reader.pos > reader.len) throw new DecodeError(`value of Protobuf schema id ${id} does not read as ${message}: the body ends within a field (${reader.len} bytes)`);
      const value = type.toObject(decoded, { longs: String, enums: String, bytes: String, defaults: true, oneofs: true });
      return { message, value };
    },
    encode(messageName, value) {
      const path = messageName === undefined ? [0] : pathOf(messageName);
      if (!path) throw new Error(`Protobuf schema id ${id} declares no message ${messageName} (its messages: ${ownTop.map((t) => ownName(t.fullName)).join(', ')})`);
      if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new TypeError(`Protobuf schema id ${id}: a message's value is an object, not ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
      const type = inFull(typeAt(path) as Protobuf.Type);
      // protobufjs's fromObject drops unknown fields and coerces wrong types ("abc" into an int32 is 0): checked first.
      const problems = messageProblems(protobuf, type, value, '$', 0);
      if (problems.length > 0) throw new TypeError(`not a valid ${ownName(type.fullName)} of Protobuf schema id ${id}: ${problems.slice(0, 20).join('; ')}`);
      const body = type.encode(type.fromObject(withoutBigints(value) as Record<string, unknown>)).finish();
      return Buffer.concat([encodeMessageIndexes(path), Buffer.from(body.buffer, body.byteOffset, body.byteLength)]);
    },
  };
}

/** A message's full name without the leading dot (`shop.Order.Line`). */
function ownName(fullName: string): string {
  return fullName.replace(/^\./, '');
}

/** bigint is what the library's Avro reads give 64-bit integers as; protobufjs's `fromObject` takes their decimal strings. */
function withoutBigints(value: unknown, depth = 0): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (depth > 100 || value === null || typeof value !== 'object' || Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return value;
  if (Array.isArray(value)) return value.map((v) => withoutBigints(v, depth + 1));
  // Defined, never assigned: a key `__proto__` stays a plain (unknown, refused) field and reaches no prototype.
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) Object.defineProperty(out, key, { value: withoutBigints(v, depth + 1), enumerable: true, writable: true, configurable: true });
  return out;
}

const INTEGER_TYPES = new Set(['int32', 'uint32', 'sint32', 'fixed32', 'sfixed32', 'int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

/** What in `value` is not a `type` message as protobufjs's fromObject takes it: unknown fields, wrong types (paths named). */
function messageProblems(protobuf: typeof Protobuf, type: Protobuf.Type, value: unknown, path: string, depth: number): string[] {
  if (depth > 100) return [`${path}: nested deeper than 100`];
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [`${path}: expected a ${ownName(type.fullName)} object`];
  const problems: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    const field = type.fields[key];
    const at = `${path}.${key}`;
    if (!field) {
      if (!(type.oneofs && key in type.oneofs)) problems.push(`${at}: no such field`);
      continue;
    }
    if (v === null || v === undefined) continue;
    field.resolve();
    const check = (item: unknown, where: string): void => {
      if (field.resolvedType instanceof protobuf.Type) problems.push(...messageProblems(protobuf, field.resolvedType, item, where, depth + 1));
      else if (field.resolvedType instanceof protobuf.Enum) {
        if (!(typeof item === 'string' && item in field.resolvedType.values) && !(typeof item === 'number' && Object.values(field.resolvedType.values).includes(item))) problems.push(`${where}: not a value of ${ownName(field.resolvedType.fullName)}`);
      } else problems.push(...scalarProblem(field.type, item, where));
    };
    if (field.map) {
      if (typeof v !== 'object' || Array.isArray(v)) problems.push(`${at}: expected a map (an object)`);
      else for (const [k, item] of Object.entries(v as object)) check(item, `${at}[${JSON.stringify(k)}]`);
    } else if (field.repeated) {
      if (!Array.isArray(v)) problems.push(`${at}: expected a list`);
      else v.forEach((item, i) => check(item, `${at}[${i}]`));
    } else check(v, at);
  }
  return problems;
}

function scalarProblem(kind: string, value: unknown, where: string): string[] {
  if (INTEGER_TYPES.has(kind)) {
    const ok = typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value)) || (typeof value === 'string' && /^-?\d{1,20}$/.test(value));
    return ok ? [] : [`${where}: expected an integer (${kind})`];
  }
  if (kind === 'double' || kind === 'float') return typeof value === 'number' ? [] : [`${where}: expected a number (${kind})`];
  if (kind === 'bool') return typeof value === 'boolean' ? [] : [`${where}: expected true or false`];
  if (kind === 'string') return typeof value === 'string' ? [] : [`${where}: expected a string`];
  if (kind === 'bytes') return typeof value === 'string' || Buffer.isBuffer(value) || value instanceof Uint8Array ? [] : [`${where}: expected bytes (base64 text or a Buffer)`];
  return [];
}

function writeZigzag(bytes: number[], n: number): void {
  let u = n * 2; // n is never negative here: its zigzag is 2n
  while (u >= 0x80) {
    bytes.push((u % 0x80) | 0x80);
    u = Math.floor(u / 0x80);
  }
  bytes.push(u);
}

/** protobufjs, if the application installed it (an optional peer dependency: only Protobuf writers need it). */
function loadProtobuf(): typeof Protobuf | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const protobuf = require('protobufjs') as typeof Protobuf;
    // int64 as exact decimal strings needs Long: without it protobufjs reads 64-bit values as (rounded) numbers.
    // `long` is protobufjs's own dependency: found from protobufjs's folder, where a strict installer puts it.
    if (!protobuf.util.Long) {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      protobuf.util.Long = require(require.resolve('long', { paths: [dirname(require.resolve('protobufjs'))] }));
      protobuf.configure();
    }
    return protobuf;
  } catch (err) {
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND') return undefined;
    throw err;
  }
}
