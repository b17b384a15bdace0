import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** A handler cannot be registered (duplicate topic, unknown schema, request scope...); thrown at boot. */
export class HandlerRegistrationError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly handler: string,
    problem: string,
  ) {
    super(`${handler}: ${problem}`);
  }
}
