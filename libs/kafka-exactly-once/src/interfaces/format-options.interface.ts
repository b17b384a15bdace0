/**
 * What a topic's values are: `avro` (Avro single-object encoding, or Avro in a Schema Registry's framing),
 * `json` (plain JSON, as Nest's Kafka transport and most Node services write it, or JSON Schema in a registry's
 * framing) or `protobuf` (Protobuf in a registry's framing).
 */
export type EventFormat = 'avro' | 'json' | 'protobuf';

/**
 * What `parseJsonValue` is willing to read. A record value comes from any producer, so each bound is a refusal
 * with a message rather than memory, stack or precision quietly lost.
 */
export interface JsonLimits {
  /** Largest value read, bytes. Default 1 MiB (1_048_576). */
  maxBytes: number;
  /** Deepest nesting of objects and arrays read. Default 64. */
  maxDepth: number;
  /** An integer outside ±(2^53-1): 'reject' (default: DecodeError naming the path and the digits), 'bigint' (read as a JS bigint, exact), 'string' (read as its decimal digits, a string). */
  bigIntegers: 'reject' | 'bigint' | 'string';
}
