import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * A record value cannot be decoded. `kind` tells the two cases apart:
 * - `undecodable`: no value, not Avro single-object encoded, or a body that does not read with its writer
 *   schema (truncated, corrupt): no deploy will ever read it. Also a writer version the current reader schema
 *   cannot resolve (an incompatible schema change): a reader schema that resolves it makes it readable.
 * - `unknown-schema`: a well-formed single-object value whose writer schema (by fingerprint) this instance
 *   does not have, as when a producer already writes a newer version during a rolling deploy: it becomes
 *   readable once that schema is deployed, so it is dead-lettered with reason `unknown-schema` and may be
 *   republished later.
 */
export class DecodeError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    message: string,
    options?: { cause?: unknown; kind?: 'undecodable' | 'unknown-schema' },
  ) {
    super(message, options);
    this.kind = options?.kind ?? 'undecodable';
  }

  readonly kind: 'undecodable' | 'unknown-schema';
}
