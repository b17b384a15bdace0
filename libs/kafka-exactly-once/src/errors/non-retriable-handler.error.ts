import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * Throw from a handler when trying again cannot help (the event breaks a business rule that will not change):
 * the record is dead-lettered at once instead of being retried.
 *
 * @example
 * if (!account) throw new NonRetriableHandlerError(`account ${event.accountId} does not exist`);
 */
export class NonRetriableHandlerError extends KafkaExactlyOnceError {
  readonly retriable = false;
}
