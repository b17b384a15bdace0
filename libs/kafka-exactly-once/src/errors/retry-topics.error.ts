import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * A handler's retry topics cannot be used: missing and the application may not create them, or configured so
 * that records would be lost (compacted, or kept for less than the tier's delay). Thrown at boot.
 */
export class RetryTopicsError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly topics: string[],
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(problem, options);
  }
}
