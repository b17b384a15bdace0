import { DecodeError } from '../../errors/decode.error';
import { EventValidationError, FieldError } from '../../errors/event-validation.error';
import { fingerprintBytes } from './rabin-fingerprint';
import { SchemaRegistryError } from '../../errors/schema-registry.error';
import { registryBodyOf, registryIdOf } from '../../registry/registry-framing';
import { notAvroReason } from '../../registry/registry-schemas';
import { LoadedSchema, SchemaRegistry } from './schema-registry';

/** Avro single-object encoding (Avro specification): `C3 01`, 8-byte little-endian CRC-64-AVRO, binary body. */
export const SINGLE_OBJECT_MAGIC = Buffer.from([0xc3, 0x01]);
const HEADER_LENGTH = 10;

/** Lists every field of `value` that does not match `schema`, with its path. Empty when valid. */
export function validationErrors(schema: LoadedSchema, value: unknown): FieldError[] {
  const errors: FieldError[] = [];
  schema.type.isValid(value, {
    errorHook: (path: string[], actual: unknown, type: { toString(): string; typeName?: string }) => {
      errors.push({ path: path.join('.'), problem: describeProblem(actual, type) });
    },
  });
  return errors;
}

function describeProblem(actual: unknown, type: { toString(): string; typeName?: string }): string {
  const expected = type.typeName === 'enum' ? `one of ${JSON.stringify((type as unknown as { symbols: string[] }).symbols)}` : `a ${type.toString()}`;
  if (actual === undefined) return `is missing (expected ${expected})`;
  const shown = typeof actual === 'bigint' ? `${actual}n` : JSON.stringify(actual);
  return `expected ${expected}, got ${shown === undefined ? typeof actual : shown}`;
}

/** Validates then encodes; throws EventValidationError naming each bad field, and encodes nothing then. */
export function encodeSingleObject(schema: LoadedSchema, value: unknown): Buffer {
  const errors = validationErrors(schema, value);
  if (errors.length > 0) throw new EventValidationError(schema.name, errors);
  return Buffer.concat([SINGLE_OBJECT_MAGIC, fingerprintBytes(schema.fingerprint), schema.type.toBuffer(value)]);
}

/** The writer schema's fingerprint of a single-object encoded value. */
export function readFingerprint(bytes: Buffer | null): bigint {
  if (!bytes || !isSingleObject(bytes)) {
    throw new DecodeError(
      bytes ? `value is not Avro single-object encoded (C3 01, then an 8-byte schema fingerprint and the body); ${describeStart(bytes)}` : 'record has no value',
    );
  }
  return bytes.readBigInt64LE(2);
}

function isSingleObject(bytes: Buffer): boolean {
  return bytes.length >= HEADER_LENGTH && bytes[0] === 0xc3 && bytes[1] === 0x01;
}

/** What a value that is in no known framing starts with, for its decode failure's message. */
export function describeStart(bytes: Buffer): string {
  if (bytes.length === 0) return 'it is empty (0 bytes)';
  return `it starts with ${bytes.subarray(0, 4).toString('hex').replace(/(..)(?=.)/g, '$1 ')} (${bytes.length} byte${bytes.length === 1 ? '' : 's'})`;
}

/**
 * Decodes a record's value as `reader`, whichever framing it has, told apart by its first bytes (a topic moving
 * from one framing to the other holds both): Avro single-object encoding (`C3 01`), the writer schema found by
 * fingerprint among the local ones; or Confluent's Schema Registry framing (`00`, a 4-byte id), the writer
 * schema fetched from the registry by id beforehand (RegistrySchemas.prefetch). Avro schema resolution applies
 * when the writer is another version. Throws DecodeError for what no retry can read (an id the registry does
 * not know among them), SchemaRegistryError (`unavailable`) when the writer schema could not be fetched.
 */
export function decodeEvent(registry: SchemaRegistry, reader: LoadedSchema, bytes: Buffer | null): unknown {
  const id = registryIdOf(bytes);
  if (id === undefined) {
    if (bytes && registry.remote && !isSingleObject(bytes)) {
      throw new DecodeError(
        `value is in neither framing this topic reads: Avro single-object encoding (C3 01, then an 8-byte schema fingerprint and the body) or a Schema Registry's (00, then a 4-byte schema id and the body); ${describeStart(bytes)}`,
      );
    }
    return decodeSingleObject(registry, reader, bytes);
  }
  const remote = registry.remote;
  if (!remote) {
    throw new DecodeError(`value is framed for a Schema Registry (byte 0, schema id ${id}), and this module has no schemaRegistry option to read it with`);
  }
  const writer = remote.readableWriter(id);
  if (!('type' in writer)) throw new DecodeError(`value is framed for a Schema Registry with schema id ${id}: ${notAvroReason(writer)}`);
  const body = registryBodyOf(bytes as Buffer);
  try {
    return reader.type.fromBuffer(body, registry.resolverFor(reader, writer.type));
  } catch (err) {
    throw new DecodeError(`value cannot be read as ${reader.name} from the registry's schema id ${id}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Decodes a single-object encoded value as `reader`: finds the writer schema by fingerprint and applies Avro
 * schema resolution when the writer is another version.
 */
export function decodeSingleObject(registry: SchemaRegistry, reader: LoadedSchema, bytes: Buffer | null): unknown {
  const fingerprint = readFingerprint(bytes);
  const writer = registry.byFingerprintOf(fingerprint);
  if (!writer) {
    throw new DecodeError(
      `value was written with a schema this instance does not know (fingerprint ${fingerprintBytes(fingerprint).toString('hex')}); deploy that schema version to the schemas directory, then republish the dead letter`,
      { kind: 'unknown-schema' },
    );
  }
  const body = (bytes as Buffer).subarray(HEADER_LENGTH);
  try {
    if (writer.fingerprint === reader.fingerprint) return reader.type.fromBuffer(body);
    return reader.type.fromBuffer(body, registry.resolver(reader, writer));
  } catch (err) {
    throw new DecodeError(`value cannot be read as ${reader.name} from writer ${writer.name} (${writer.file}): ${(err as Error).message}`, {
      cause: err,
    });
  }
}
