/**
 * The errors a driver other than KafkaJS throws for what Kafka answered or did not answer, in the shape the
 * library's classification reads (engine/error-classification.ts, publishing/send-refusal.ts): a broker's error
 * code by its Kafka name (`type`) and whether the same request may succeed later (`retriable`), or no answer at all.
 */

/** The broker answered with Kafka error `type` (say NOT_LEADER_OR_FOLLOWER, PRODUCER_FENCED). */
export class KafkaProtocolError extends Error {
  override readonly name = 'KafkaProtocolError';

  constructor(
    readonly type: string,
    readonly code: number,
    readonly retriable: boolean,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${type}: ${message}`, options);
  }
}

/** No answer: the connection could not be made, was lost, or the request timed out (it may have been carried out). */
export class KafkaConnectionError extends Error {
  override readonly name = 'KafkaConnectionError';
  readonly retriable = true;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}
