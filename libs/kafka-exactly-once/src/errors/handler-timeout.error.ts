import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * A handler call overran `consumer.handlerTimeoutMs`. Its unit of work is rolled back and its database connection
 * closed (whatever the call writes later is not kept), and the overrun counts as a failure of its record: after
 * `isolation.maxFailures` the record is dead-lettered (reason `handler-failed`), or its key parked. Work the call
 * did outside PostgreSQL meanwhile (an HTTP call) is not undone. Not retried in place.
 */
export class HandlerTimeoutError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly handler: string,
    readonly where: string,
    readonly timeoutMs: number,
  ) {
    super(`${handler} did not finish within ${timeoutMs} ms on ${where}; the unit of work was rolled back and counts as a failure of this record (consumer.handlerTimeoutMs)`);
  }
}
