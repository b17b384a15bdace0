import { DecodeError } from '../errors/decode.error';
import { EventValidationError } from '../errors/event-validation.error';
import { RetriableValidationError } from '../errors/retriable-validation.error';
import type { EventFormat, JsonLimits } from '../interfaces/format-options.interface';
import { registryBodyOf, registryIdOf, startsAsRegistryFramed } from '../registry/registry-framing';
import type { ReadableWriter } from '../registry/registry-schemas';
import { notAvroReason, readAvroValue } from './avro/avro.reader';
import type { LoadedSchema, SchemaRegistry } from './avro/schema-registry';
import type { EventValidator } from './event-validator';
import type { DecodedValue, WriterCodec } from './format.codec';
import { parseJsonValue } from './json/json.codec';
import { describeStart } from './value-start';

/** How a handler reads its records: decoding by its format, then its validation. */
export interface EventReader {
  format: EventFormat;
  /** The Avro reader schema (format `avro` only). */
  schema?: LoadedSchema;
  /** What the handler reads, for logs. */
  describe: string;
  /** Whether values in a Schema Registry's framing are read as such (false: no registry, or a plain JSON topic). */
  readsRegistry: boolean;
  /** The event a record's value stands for, as the handler gets it; DecodeError, EventValidationError or SchemaRegistryError (`unavailable`: wait). */
  read(bytes: Buffer | null): Promise<unknown>;
  /** The decoding half of `read`: DecodeError, EventValidationError (a registry JSON Schema's) or SchemaRegistryError. */
  decode(bytes: Buffer | null): DecodedValue;
  /**
   * The validating half of `read`: the event as the handler gets it; EventValidationError when it is invalid, or
   * RetriableValidationError when the validator could not decide now.
   */
  validate(event: unknown): Promise<unknown>;
}

export interface ReaderSpec {
  format: EventFormat;
  /** The Avro reader schema (format `avro`). */
  schema?: LoadedSchema;
  json: JsonLimits;
  validator?: EventValidator;
  /** The validator's name, for logs. */
  validatorName?: string;
  /**
   * Format `json`: whether a value starting with `00` is read in the registry's framing (default: when the module has
   * a registry). false: plain JSON only, such a value gets the JSON reader's refusal.
   */
  registryFraming?: boolean;
  /**
   * The handler's topic, as consumed: whether its subject holds a writer schema whose package is not installed (its
   * records then wait a while: see RegistrySchemas.missingPeerFailure). Without it, no subject does.
   */
  topic?: string;
}

/** The reader of a handler. */
export function eventReader(registry: SchemaRegistry, spec: ReaderSpec): EventReader {
  const readsRegistry = registry.remote !== undefined && (spec.format !== 'json' || spec.registryFraming !== false);
  const decode = decoderOf(registry, spec, readsRegistry);
  const validator = spec.validator;
  const base = spec.format === 'avro' ? `${spec.schema!.name} (Avro)` : spec.format === 'json' ? (registry.remote && !readsRegistry ? 'JSON, plain only' : 'JSON') : 'Protobuf';
  const validate = validator ? (event: unknown) => validated(validator, spec.validatorName!, event) : async (event: unknown) => event;
  return {
    format: spec.format,
    schema: spec.schema,
    readsRegistry,
    describe: spec.validatorName ? `${base}, validated with ${spec.validatorName}` : base,
    read: async (bytes) => validate(decode(bytes).event),
    decode,
    validate,
  };
}

/**
 * How the handler's records decode, chosen by its format: Avro with its reader schema (either framing); JSON as plain
 * JSON, or by the writer schema's codec when the value is in the registry's framing; Protobuf by the writer schema's
 * codec.
 */
function decoderOf(registry: SchemaRegistry, spec: ReaderSpec, readsRegistry: boolean): (bytes: Buffer | null) => DecodedValue {
  switch (spec.format) {
    case 'avro': {
      const schema = spec.schema!;
      return (bytes) => readAvroValue(registry, schema, bytes);
    }
    case 'json':
      return (bytes) => {
        if (readsRegistry && startsAsRegistryFramed(bytes)) return readRegistryFramed(registry, bytes as Buffer, 'json', spec);
        return { event: parseJsonValue(bytes, spec.json) };
      };
    case 'protobuf':
      return (bytes) => {
        if (!startsAsRegistryFramed(bytes)) {
          throw new DecodeError(bytes ? `value is not in a Schema Registry's framing (00, then a 4-byte schema id), which Protobuf records need here; ${describeStart(bytes)}` : 'record has no value (a tombstone)');
        }
        if (!registry.remote) throw new DecodeError('value is Protobuf in a Schema Registry\'s framing, and this module has no schemaRegistry option to read it with');
        return readRegistryFramed(registry, bytes as Buffer, 'protobuf', spec);
      };
  }
}

/** A value in Confluent's framing whose writer schema (fetched before the unit of work) is JSON Schema or Protobuf. */
function readRegistryFramed(registry: SchemaRegistry, bytes: Buffer, format: 'json' | 'protobuf', spec: ReaderSpec): DecodedValue {
  const id = registryIdOf(bytes);
  if (id === undefined) throw new DecodeError(`value starts with 00 as a Schema Registry's framing does, and is too short to hold a schema id; ${describeStart(bytes)}`);
  const remote = registry.remote!;
  const writer = remote.readableWriter(id);
  // A JSON Schema or Protobuf writer whose package is not installed: this handler would read it. It waits a while
  // when the topic's subject holds that schema (a configuration the boot refuses), else it is the record's failure.
  if ('missingPeer' in writer) throw remote.missingPeerFailure(id, writer, spec.topic ?? '');
  return readWithWriter(id, writer, bytes, format, spec.json);
}

/**
 * Reads a registry-framed value with its writer schema's codec, whichever of JSON Schema and Protobuf it is: a topic
 * may move from one to the other (or carry both) under a json or protobuf handler, which gets a plain object either
 * way. A codec that decodes any body (JSON Schema) checks the value against the writer's schema: its problems make
 * the record `validation-failed`.
 */
function readWithWriter(id: number, writer: Exclude<ReadableWriter<WriterCodec>, { missingPeer: unknown }>, bytes: Buffer, format: 'json' | 'protobuf', limits: JsonLimits): DecodedValue {
  if ('codec' in writer && writer.codec.schemaType !== 'AVRO') {
    const codec = writer.codec;
    const { value, name } = codec.decode(registryBodyOf(bytes), limits);
    if (codec.validatesDecoded) {
      const problems = codec.validate(value);
      if (problems.length > 0) throw new EventValidationError(codec.describe, problems);
    }
    // The message's name goes to the handler beside the event (ctx.message.schema), never into the event itself.
    return { event: value, schema: name === undefined ? { id, type: codec.format } : { id, type: codec.format, name } };
  }
  const kind = 'codec' in writer ? 'an Avro schema (read by a handler of format avro, with its reader schema)' : `a schema of a kind not read here (${notAvroReason(writer)})`;
  throw new DecodeError(`value is framed for a Schema Registry with schema id ${id}, ${kind}, and this handler reads ${format === 'json' ? 'JSON' : 'Protobuf'}`);
}

/**
 * The validator's answer; a validator that throws (not a validation result) fails the record the same way, unless
 * it says it could not decide now (RetriableValidationError, or any error with `retriable: true`).
 */
async function validated(validator: EventValidator, name: string, event: unknown): Promise<unknown> {
  try {
    return await validator(event);
  } catch (err) {
    if (err instanceof EventValidationError || err instanceof RetriableValidationError) throw err;
    if ((err as { retriable?: unknown } | null)?.retriable === true) {
      throw new RetriableValidationError(`${name} could not decide now: ${(err as Error)?.message ?? String(err)}`, { cause: err });
    }
    throw Object.assign(new EventValidationError(name, [{ path: '', problem: `the validator threw: ${(err as Error)?.message ?? String(err)}` }]), { cause: err });
  }
}

