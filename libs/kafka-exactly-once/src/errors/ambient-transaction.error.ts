import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * Why a unit of work could not lend its transaction to the application's `@nestjs-cls/transactional`:
 * - `other-data-source`: the TransactionHost's adapter is for another DataSource than the module's;
 * - `unknown-host`: the TransactionHost is not one the library knows how to join (not 3.x);
 * - `join-not-taken`: after the join, `TransactionHost.tx` was not the unit's transaction.
 */
export type AmbientTransactionProblem = 'other-data-source' | 'unknown-host' | 'join-not-taken';

/**
 * A unit of work was refused before its handler ran: the application's `@nestjs-cls/transactional` does not
 * show the unit's transaction, so a service the handler calls through `TransactionHost` (`@Transactional()`)
 * would commit in a transaction of its own, outside the unit, and again on every redelivery. A fault of the
 * application's set-up, not of the record: the unit is rolled back and retried (the partition shows stalled in
 * health with this message) until the set-up is fixed and the application restarted. The message names the fix.
 */
export class AmbientTransactionError extends KafkaExactlyOnceError {
  readonly retriable = true;

  constructor(
    readonly problem: AmbientTransactionProblem,
    message: string,
  ) {
    super(message);
  }
}
