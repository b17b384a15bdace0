import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** An atomic publishAll failed; its transaction was aborted, so none of its events is visible. */
export class PublishError extends KafkaExactlyOnceError {
  readonly retriable = true;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
