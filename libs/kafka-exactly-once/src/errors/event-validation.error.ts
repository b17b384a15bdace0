import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

export interface FieldError {
  /** Dotted path of the field in the event, e.g. `amountCents` or `items.2.sku`. */
  path: string;
  /** What is wrong with it. */
  problem: string;
}

/** An event does not match its Avro schema. Nothing was sent. */
export class EventValidationError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly schemaName: string,
    readonly fieldErrors: FieldError[],
  ) {
    super(`Event is not a valid ${schemaName}: ${fieldErrors.map((e) => `${e.path || '(root)'}: ${e.problem}`).join('; ')}`);
  }
}
