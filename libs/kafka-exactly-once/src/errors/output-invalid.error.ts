import { EventValidationError, type FieldError } from './event-validation.error';

/**
 * An event a handler emitted (`ctx.emit`) that the library cannot write to its topic: not valid for the topic's
 * schema, or a value its format cannot hold (a `NaN`, a cycle, a field Protobuf refuses). Its input is dead-lettered
 * with reason `output-invalid` (a bug of the handler, not of the input), never retried; the handler may catch it at
 * the `ctx.emit` call. An EventValidationError, so that code written for that class still catches it.
 */
export class OutputInvalidError extends EventValidationError {
  constructor(
    /** The topic of the emit, as the handler named it. */
    readonly topic: string,
    invalid: EventValidationError,
  ) {
    super(invalid.schemaName, invalid.fieldErrors as FieldError[]);
    this.message = `ctx.emit('${topic}'): ${invalid.message}`;
    this.cause = invalid;
  }
}
