import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * PostgreSQL did not commit a unit of work's transaction, though asked to: the transaction had failed before the
 * COMMIT (a statement sent on the unit's connection outside the handler's call failed after the library's last
 * one), or PostgreSQL answered the COMMIT with the command tag ROLLBACK (which it does, without an error, for a
 * transaction that failed). Nothing of the unit is kept, its Kafka transaction is aborted, and its records run
 * again: none of its outputs or offsets is committed. Retriable.
 */
export class UnitNotCommittedError extends KafkaExactlyOnceError {
  readonly retriable = true;

  constructor(readonly why: string) {
    super(`PostgreSQL did not commit the unit of work's transaction (${why}); its Kafka transaction is aborted and its records run again. A statement sent on the unit's connection after the handler's call (not awaited, or from a timer) is the usual cause: await every statement inside the handler's call`);
  }
}
