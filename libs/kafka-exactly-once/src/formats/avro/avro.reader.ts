import { DecodeError } from '../../errors/decode.error';
import { registryBodyOf, registryIdOf } from '../../registry/registry-framing';
import type { ReadableWriter } from '../../registry/registry-schemas';
import type { AvroCodec, DecodedValue, WriterCodec } from '../format.codec';
import { describeStart } from '../value-start';
import type { LoadedSchema, SchemaRegistry } from './schema-registry';
import { decodeSingleObject, isSingleObject } from './single-object.codec';

/** The Avro codec of a registry's writer schema, if it is an Avro one. */
export function avroWriterOf(writer: ReadableWriter<WriterCodec>): AvroCodec | undefined {
  return 'codec' in writer && writer.codec.schemaType === 'AVRO' ? writer.codec : undefined;
}

/** A writer that is not Avro: what an Avro reader says of it. */
export function notAvroReason(writer: ReadableWriter<WriterCodec>): string {
  const type = 'unsupported' in writer ? writer.unsupported : 'missingPeer' in writer ? writer.schemaType : writer.codec.schemaType;
  return `the registry holds a ${type} schema under this id, not an Avro one`;
}

/**
 * A record's value read as `reader` (see decodeEvent), with the registry's writer schema beside it when the value is
 * in the registry's framing: its id and the Avro record's full name.
 */
export function readAvroValue(registry: SchemaRegistry, reader: LoadedSchema, bytes: Buffer | null): DecodedValue {
  const event = decodeEvent(registry, reader, bytes);
  const id = registryIdOf(bytes);
  if (id === undefined || !registry.remote) return { event };
  // Read with the writer of that id, which is cached by now (else the decode above would have thrown).
  const name = avroWriterOf(registry.remote.readableWriter(id))?.type.name;
  return { event, schema: { id, type: 'avro', name } };
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
  const readable = remote.readableWriter(id);
  const writer = avroWriterOf(readable);
  if (!writer) throw new DecodeError(`value is framed for a Schema Registry with schema id ${id}: ${notAvroReason(readable)}`);
  const body = registryBodyOf(bytes as Buffer);
  try {
    return reader.type.fromBuffer(body, registry.resolverFor(reader, writer.type));
  } catch (err) {
    throw new DecodeError(`value cannot be read as ${reader.name} from the registry's schema id ${id}: ${(err as Error).message}`, { cause: err });
  }
}
