import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * A publish was not acknowledged: an atomic `publishAll` failed, or a `publish` could neither be sent nor spooled.
 * `outcome` says what became of its events: `not-sent` or `aborted` (none is visible), or `unknown` (a request
 * went out without an answer, or a commit's answer was lost: the events may be in Kafka). Retry with the same
 * `messageIds` (`publish(..., { messageId })`), so that consumers deduplicate a second copy; a retry with a new id
 * may make two events.
 */
export class PublishError extends KafkaExactlyOnceError {
  readonly retriable = true;
  readonly messageIds: string[];
  readonly outcome: 'not-sent' | 'aborted' | 'unknown';

  constructor(message: string, options: { messageIds: string[]; outcome: 'not-sent' | 'aborted' | 'unknown'; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.messageIds = options.messageIds;
    this.outcome = options.outcome;
  }

  /** The message id of a single `publish` (undefined for a `publishAll` of several events). */
  get messageId(): string | undefined {
    return this.messageIds.length === 1 ? this.messageIds[0] : undefined;
  }
}
