import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** A record value cannot be decoded: not Avro single-object encoded, unknown writer schema, or a corrupt body. */
export class DecodeError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
