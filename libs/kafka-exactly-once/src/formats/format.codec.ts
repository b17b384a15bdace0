import type { Type as AvroType } from 'avsc';
import type { FieldError } from '../errors/event-validation.error';
import type { EventFormat, JsonLimits } from '../interfaces/format-options.interface';
import type { RecordSchema } from '../interfaces/record-info.interface';

/** A record's value decoded, before validation: the event, and the registry's writer schema when it names one. */
export interface DecodedValue {
  event: unknown;
  schema?: RecordSchema;
}

/** A body decoded by a codec: the value as its writer wrote it, and the name of what it is where the format names it. */
export interface DecodedBody {
  value: unknown;
  /** The Protobuf message's or the Avro record's full name; undefined for JSON. */
  name?: string;
}

/**
 * A format's codec for one schema (or for none: plain JSON), the one interface through which the event reader, the
 * writers (`encodeDeclaredEvent`) and the console's record view read and write a value's body, whatever its format.
 * The body is the value without its framing (Avro single-object encoding's, the Schema Registry's), which is the
 * caller's. Each format's codec is in its own folder: avro/, json/, json-schema/, protobuf/.
 */
export interface FormatCodec {
  /** The format of the values it reads (`RecordSchema.type` of a value read with it). */
  readonly format: EventFormat;
  /** What it reads, for messages: `JSON Schema id 5`, `Protobuf schema id 5`, an Avro record's full name, `JSON`. */
  readonly describe: string;
  /**
   * Whether a value it decodes is still to be checked with `validate` before a handler gets it: true where any body
   * of the format decodes whatever the schema says (JSON Schema), false where the bytes hold only what the schema
   * allows (Avro, Protobuf) or there is no schema (plain JSON).
   */
  readonly validatesDecoded: boolean;
  /** The value a body holds; throws (DecodeError) for bytes that do not read. `limits`: the JSON reader's, for a JSON body. */
  decode(body: Buffer, limits: JsonLimits): DecodedBody;
  /** What is wrong with `value` under the schema (as `name`, where the schema holds several messages), each with its path; empty when nothing is. */
  validate(value: unknown, name?: string): FieldError[];
  /** The body of `value` (as `name`, where the schema holds several messages); throws an Error saying why when it cannot be written. */
  encode(value: unknown, name?: string): Buffer;
}

/** The codec of an Avro schema: its avsc type too, which a reader schema resolves a writer's values with. */
export interface AvroCodec extends FormatCodec {
  readonly schemaType: 'AVRO';
  readonly type: AvroType;
}

/** The codec of a Schema Registry's JSON Schema writer schema. */
export interface JsonSchemaCodec extends FormatCodec {
  readonly schemaType: 'JSON';
}

/** The codec of a Schema Registry's Protobuf writer schema (its messages told apart by `name`). */
export interface ProtobufCodec extends FormatCodec {
  readonly schemaType: 'PROTOBUF';
}

/** The codec of a Schema Registry's writer schema, by its schemaType (what RegistrySchemas keeps by id). */
export type WriterCodec = AvroCodec | JsonSchemaCodec | ProtobufCodec;
