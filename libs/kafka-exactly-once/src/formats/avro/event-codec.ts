import { HEADERS } from '../../kafka-exactly-once.constants';
import { uuidv7 } from '../../engine/message-ids';
import { DecodeError } from '../../errors/decode.error';
import { fingerprintBytes } from './rabin-fingerprint';
import { SchemaRegistry, type SchemaRegistryOptions } from './schema-registry';
import { decodeSingleObject, encodeSingleObject, readFingerprint } from './single-object.codec';

/** A record as KafkaJS sends it (`producer.send({ topic, messages: [message] })`). */
export interface EncodedMessage {
  key: string;
  /** Avro single-object encoding: `C3 01`, the schema's 8-byte CRC-64-AVRO fingerprint (little-endian), the body. */
  value: Buffer;
  /** `message-id` and `event-type`, after the headers given. */
  headers: Record<string, string>;
}

export interface EncodeOptions {
  /** The record key: the ordering key, and what `@OrderedEvent` parks by default. Required. */
  key: string;
  /**
   * The event's identity, which consumers deduplicate by: give the same id when you send the same event again
   * (a retry after a timeout). Default: a new UUIDv7, so a retry with the default is a new event.
   */
  messageId?: string;
  /** More headers (a `traceparent`, say); `message-id` and `event-type` are the codec's. */
  headers?: Record<string, string>;
}

export interface DecodedEvent<T = unknown> {
  /** The event, read as the current version of its schema in the directory (Avro schema resolution), as a handler gets it. */
  event: T;
  /** The schema's full name. */
  schema: string;
  /** The `.avsc` file (its path in the directory) of the version the record was written with. */
  writtenWith: string;
}

/**
 * The wire format of kafka-exactly-once, for producers and readers outside the library: another service, a
 * script, a test. What it writes is what `EventPublisher.publish` and `ctx.emit` write, and what a handler
 * reads:
 * - the value: the event in Avro single-object encoding with the current version of its schema in the
 *   directory (the same `.avsc` files as the consumers', versions ordered by file name);
 * - the `message-id` header: the event's identity, deduplicated by the consumers (a record without one is
 *   deduplicated by topic, partition and offset only, so a producer's retry would be handled twice);
 * - the `event-type` header: the schema's full name (for people and tools; the consumers read the schema
 *   from the value's fingerprint);
 * - the key: a string, the ordering key.
 * Part of the stable API (unlike `kafka-exactly-once/testing`, which writes deliberately broken records).
 *
 * @example
 * const codec = EventCodec.fromDirectory(join(__dirname, '..', 'schemas'));
 * await producer.send({ topic: 'payments.requested', acks: -1, messages: [
 *   codec.encode('com.example.PaymentRequested', payment, { key: payment.accountId, messageId: payment.paymentId }),
 * ] });
 * const { event } = codec.decode(message.value); // in a plain KafkaJS consumer
 */
export class EventCodec {
  constructor(private readonly registry: SchemaRegistry) {}

  /** A codec of the `.avsc` files in `directory` (searched recursively), as the module loads them. */
  static fromDirectory(directory: string, options: SchemaRegistryOptions = {}): EventCodec {
    return new EventCodec(SchemaRegistry.fromDirectory(directory, options));
  }

  /**
   * The record of `event` with the current version of the schema named `schema` (its full name). Throws,
   * and encodes nothing, for an unknown schema, an invalid event (EventValidationError, naming the fields), a
   * missing key or a message id that is not a non-empty string.
   */
  encode(schema: string, event: unknown, options: EncodeOptions): EncodedMessage {
    if (typeof options?.key !== 'string' || options.key === '') throw new TypeError(`EventCodec.encode(${JSON.stringify(schema)}): "key" must be a non-empty string`);
    const messageId = options.messageId ?? uuidv7();
    if (typeof messageId !== 'string' || messageId === '') throw new TypeError(`EventCodec.encode(${JSON.stringify(schema)}): "messageId" must be a non-empty string`);
    const current = this.registry.current(schema);
    const value = encodeSingleObject(current, event);
    return { key: options.key, value, headers: { ...options.headers, [HEADERS.messageId]: messageId, [HEADERS.eventType]: current.name } };
  }

  /**
   * Reads a record's value as the current version of its schema (or of `schema`, a full name, when given).
   * Throws DecodeError for a value that is not single-object encoded, or written with a schema that is not
   * in the directory (`kind: 'unknown-schema'`).
   */
  decode<T = unknown>(value: Buffer | null, schema?: string): DecodedEvent<T> {
    const fingerprint = readFingerprint(value);
    const writer = this.registry.byFingerprintOf(fingerprint);
    if (!writer) {
      throw new DecodeError(`value was written with a schema that is not in the directory (fingerprint ${fingerprintBytes(fingerprint).toString('hex')})`, { kind: 'unknown-schema' });
    }
    const reader = this.registry.current(schema ?? writer.name);
    return { event: decodeSingleObject(this.registry, reader, value) as T, schema: reader.name, writtenWith: writer.file };
  }
}
