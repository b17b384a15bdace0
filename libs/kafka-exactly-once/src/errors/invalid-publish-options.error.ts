import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * `EventPublisher.publish` or `publishAll` refused the options of an event (a header value Kafka's record format
 * cannot carry, a message id that is not a usable string): nothing was sent or spooled. The message names the
 * header or the field and says what to change.
 *
 * @example
 * await publisher.publish('payments.requested', event, { key, headers: { attempt: String(attempt) } }); // not attempt: 3
 */
export class InvalidPublishOptionsError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly field: 'headers' | 'messageId',
    readonly topic: string,
    problem: string,
  ) {
    super(`publish to topic "${topic}" refused, nothing was sent or spooled: ${problem}`);
  }
}
