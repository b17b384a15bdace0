import { MissingKeyError } from '../errors/missing-key.error';
import { UndeclaredTopicError } from '../errors/undeclared-topic.error';
import type { ResolvedOptions } from '../options/resolved-options';
import { EventValidationError } from '../errors/event-validation.error';
import { SchemaRegistryError } from '../errors/schema-registry.error';
import { frameForRegistry } from '../registry/registry-framing';
import type { LatestWriter } from '../registry/registry-schemas';
import { avroCodec } from './avro/avro.codec';
import type { SchemaRegistry } from './avro/schema-registry';
import { encodeSingleObject } from './avro/single-object.codec';
import type { FormatCodec, WriterCodec } from './format.codec';
import { JSON_CODEC } from './json/json.codec';
import { writesToRegistry } from './registry-boot';

/** An event encoded for one of the module's declared topics. */
export interface EncodedEvent {
  /** The topic as written (with the module's topicPrefix). */
  topic: string;
  key: string;
  /**
   * The event's bytes, framed as the topic is written (Avro single-object, the registry's, or plain JSON). A promise
   * of them while the registry's answer they need (the schema's id under the topic's subject, or the subject's
   * latest schema) is still being looked up, the first time: it is waited for at most `schemaRegistry.requestTimeoutMs`
   * and rejects with SchemaRegistryError when the registry does not give it (or EventValidationError, for a JSON
   * Schema or Protobuf event, which is checked against the registry's schema). Nothing may be written before it
   * resolves.
   */
  value: Buffer | Promise<Buffer>;
  /** The schema's full name, the record's `event-type`. */
  eventType: string;
}

/**
 * Encodes an event for a topic of the module option `topics`, as both `EventPublisher.publish` and a handler's
 * `ctx.emit` write it: the topic must be declared (UndeclaredTopicError), the key given or derived by the
 * topic's key function (MissingKeyError), and the event valid for the topic's current schema
 * (EventValidationError, naming the fields). Nothing is written when it throws, nor when its `value` rejects.
 */
export function encodeDeclaredEvent(options: Pick<ResolvedOptions, 'topics' | 'topicPrefix' | 'wireFormat'>, registry: SchemaRegistry, topic: string, event: unknown, key: string | undefined): EncodedEvent {
  const declared = options.topics[topic];
  if (!declared) throw new UndeclaredTopicError(topic);
  const recordKey = key ?? declared.key?.(event);
  if (typeof recordKey !== 'string' || recordKey === '') throw new MissingKeyError(topic);
  const written = `${options.topicPrefix}${topic}`;
  const format = declared.format ?? 'avro';
  if (format !== 'avro') return { topic: written, key: recordKey, value: encodeOther(registry, topic, written, format, writesToRegistry(options, topic), event, declared.schema), eventType: format === 'json' ? 'json' : (declared.schema ?? 'protobuf') };
  const schema = registry.current(declared.schema!);
  if (!writesToRegistry(options, topic)) return { topic: written, key: recordKey, value: encodeSingleObject(schema, event), eventType: schema.name };
  // Confluent's framing: the event validated first (an invalid one is the caller's error whatever the registry
  // does), then the schema's id under the topic's subject: cached, or the lookup's, waited for.
  const codec = avroCodec(schema.type);
  const errors = codec.validate(event);
  if (errors.length > 0) throw new EventValidationError(schema.name, errors);
  const remote = registry.remote;
  if (!remote) throw new SchemaRegistryError('unavailable', `topic ${topic} is written in the Schema Registry's framing, and the module has no schemaRegistry option`);
  const body = codec.encode(event);
  const id = remote.idSoon(remote.subjectOf(written, schema.name), schema);
  return { topic: written, key: recordKey, value: typeof id === 'number' ? frameForRegistry(id, body) : quiet(id.then((known) => frameForRegistry(known, body))), eventType: schema.name };
}

/**
 * A promise whose rejection is the awaiting caller's, never an unhandled one (a handler may throw after an emit,
 * before anything awaits its value).
 */
function quiet<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}

/**
 * A JSON or Protobuf event as the topic is written: plain JSON, or in the registry's framing with the latest schema
 * of the topic's subject (registered at deploy time), the event checked against it first: a JSON event by its JSON
 * Schema, a Protobuf event by its message's fields (EventValidationError naming the problems; nothing written).
 */
function encodeOther(registry: SchemaRegistry, topic: string, written: string, format: 'json' | 'protobuf', framed: boolean, event: unknown, message: string | undefined): Buffer | Promise<Buffer> {
  if (!framed) return jsonBytes(topic, event);
  const remote = registry.remote;
  if (!remote) throw new SchemaRegistryError('unavailable', `topic ${topic} is written in the Schema Registry's framing, and the module has no schemaRegistry option`);
  const subject = remote.subjectOf(written, message ?? '');
  const latest = remote.latestSoon(subject);
  if (!(latest instanceof Promise)) return encodeWithLatest(topic, subject, latest, format, event, message);
  return quiet(latest.then((known) => encodeWithLatest(topic, subject, known, format, event, message)));
}

/**
 * A JSON or Protobuf event in the registry's framing with the subject's latest schema, by that schema's codec, the
 * event checked against it first: a JSON event as a reader will check it (the bytes read back, big integers exact).
 */
function encodeWithLatest(topic: string, subject: string, { id, writer }: LatestWriter<WriterCodec>, format: 'json' | 'protobuf', event: unknown, message: string | undefined): Buffer {
  const codec = 'codec' in writer ? writer.codec : undefined;
  if (format === 'json') {
    if (codec?.schemaType !== 'JSON') throw new SchemaRegistryError('incompatible', `topic ${topic} is written as JSON Schema, and the latest schema of subject ${subject} (id ${id}) is not one`, subject);
    const bytes = jsonBytes(topic, event);
    const problems = codec.validate(JSON_CODEC.decode(bytes, { maxBytes: bytes.length + 2, maxDepth: 1000, bigIntegers: 'bigint' }).value);
    if (problems.length > 0) throw new EventValidationError(`JSON Schema id ${id} (subject ${subject})`, problems);
    return frameForRegistry(id, bytes);
  }
  if (codec?.schemaType !== 'PROTOBUF') throw new SchemaRegistryError('incompatible', `topic ${topic} is written as Protobuf, and the latest schema of subject ${subject} (id ${id}) is not a Protobuf schema`, subject);
  return frameForRegistry(id, encoded(codec, event, message, `${message ?? 'the first message'} of Protobuf schema id ${id}`));
}

function jsonBytes(topic: string, event: unknown): Buffer {
  return encoded(JSON_CODEC, event, undefined, `JSON event of ${topic}`);
}

/** The body of `event` by `codec`; EventValidationError, under `what`, with the reason it cannot be written. */
function encoded(codec: FormatCodec, event: unknown, name: string | undefined, what: string): Buffer {
  try {
    return codec.encode(event, name);
  } catch (err) {
    throw new EventValidationError(what, [{ path: '', problem: (err as Error).message }]);
  }
}
