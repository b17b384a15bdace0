import type { FieldError } from 'kafka-exactly-once';

/** A request body that cannot become an event (answered 400 with the field errors). */
export class InvalidRequestError extends Error {
  constructor(readonly fieldErrors: FieldError[]) {
    super(`Invalid request: ${fieldErrors.map((e) => `${e.path}: ${e.problem}`).join('; ')}`);
    this.name = 'InvalidRequestError';
  }
}
