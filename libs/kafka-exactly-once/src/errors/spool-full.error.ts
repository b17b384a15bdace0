import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** The spool holds as much as it may: the publish is refused (backpressure), nothing is dropped. */
export class SpoolFullError extends KafkaExactlyOnceError {
  readonly retriable = true;

  constructor(
    readonly directory: string,
    readonly backlogBytes: number,
    readonly maxBytes: number,
  ) {
    super(`The publish spool ${directory} is full (${backlogBytes} of ${maxBytes} bytes waiting for Kafka): retry later, or raise publisher.spool.maxBytes`);
  }
}
