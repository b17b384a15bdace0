import { DecodeError } from '../../errors/decode.error';
import { EventValidationError, FieldError } from '../../errors/event-validation.error';
import { describeStart } from '../value-start';
import { avroProblems } from './avro.codec';
import { fingerprintBytes } from './rabin-fingerprint';
import { LoadedSchema, SchemaRegistry } from './schema-registry';

/** Avro single-object encoding (Avro specification): `C3 01`, 8-byte little-endian CRC-64-AVRO, binary body. */
export const SINGLE_OBJECT_MAGIC = Buffer.from([0xc3, 0x01]);
const HEADER_LENGTH = 10;

/** Lists every field of `value` that does not match `schema`, with its path. Empty when valid. */
export function validationErrors(schema: LoadedSchema, value: unknown): FieldError[] {
  return avroProblems(schema.type, value);
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

/** Whether a value starts as Avro single-object encoding does (`C3 01`, then room for the fingerprint). */
export function isSingleObject(bytes: Buffer): boolean {
  return bytes.length >= HEADER_LENGTH && bytes[0] === 0xc3 && bytes[1] === 0x01;
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
