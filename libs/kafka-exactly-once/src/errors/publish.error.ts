import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * An atomic publishAll failed. `outcome` says what became of its events: `not-sent` or `aborted` (none is
 * visible), or `unknown` (the commit's answer was lost: retry with the same `messageIds`, so that consumers
 * deduplicate a second copy).
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
}
