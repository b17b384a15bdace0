import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** A schema file in the schemas directory cannot be read or parsed; thrown at boot. */
export class SchemaLoadError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly file: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(`Avro schema ${file}: ${problem}`, options);
  }
}
