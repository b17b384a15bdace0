import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** Why an operator's request (admin REST, CLI) is refused: 400 bad input, 404 nothing there, 409 not now. */
export type OperatorErrorKind = 'invalid' | 'not-found' | 'conflict';

/** An operator's request that cannot be carried out, with the field or the state that says why. */
export class OperatorRequestError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly kind: OperatorErrorKind,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }

  get status(): 400 | 404 | 409 {
    return this.kind === 'invalid' ? 400 : this.kind === 'not-found' ? 404 : 409;
  }
}
