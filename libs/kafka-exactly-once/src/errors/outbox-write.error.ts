import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** Why `Outbox.add` refused an event. */
export type OutboxWriteRefusal = 'not-in-transaction' | 'other-data-source' | 'invalid-message-id' | 'invalid-headers' | 'too-large' | 'not-enabled';

/**
 * `Outbox.add` refused an event before writing anything: the caller's transaction is untouched, and it can
 * still roll back or go on without the event. The message says what to change. (An invalid event, an
 * undeclared topic or a missing key throw EventValidationError, UndeclaredTopicError and MissingKeyError, as
 * for `EventPublisher.publish`.)
 *
 * @example
 * await dataSource.transaction(async (manager) => {
 *   await manager.insert(PaymentRequest, request);
 *   await outbox.add(manager, 'payments.requested', event, { key: event.accountId });
 * });
 */
export class OutboxWriteError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly refusal: OutboxWriteRefusal,
    message: string,
    readonly topic?: string,
  ) {
    super(message);
  }
}
