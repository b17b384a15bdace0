import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * Throw from a handler's `validate` (a class-validator constraint, a Standard Schema's refinement) when it could not
 * decide now: a database or a service it asks is away. The record is then retried as a handler's passing failure
 * is (in place with the handler's retry policy, then its retry topics; when those are spent, dead-lettered
 * `handler-failed`), never dead-lettered `validation-failed`. A validator's error with `retriable: true` counts the
 * same. Everything else a validator says (its issues, any other error it throws) means the event is invalid:
 * `validation-failed`, final.
 *
 * @example
 * const Order = z.object({ customerId: z.string() }).refine(async (order) => {
 *   try {
 *     return await customers.exists(order.customerId); // false: invalid, dead-lettered validation-failed
 *   } catch (err) {
 *     throw new RetriableValidationError(`customers service away: ${err.message}`, { cause: err }); // retried
 *   }
 * });
 */
export class RetriableValidationError extends KafkaExactlyOnceError {
  readonly retriable = true;
}
