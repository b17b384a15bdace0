import { PublishError } from './publish.error';

/**
 * The spool holds as much as it may: the publish is refused (backpressure), nothing is dropped. `messageId` and
 * `outcome` say what became of the event: `not-sent` (it never left), or `unknown` (its live send failed without
 * an answer before the spool was tried: it may still be in Kafka). Retry later with the same `messageId`.
 */
export class SpoolFullError extends PublishError {
  constructor(
    readonly directory: string,
    readonly backlogBytes: number,
    readonly maxBytes: number,
    event: { messageId: string; outcome: 'not-sent' | 'unknown' },
  ) {
    super(
      `The publish spool ${directory} is full (${backlogBytes} of ${maxBytes} bytes waiting for Kafka): event ${event.messageId} was not spooled` +
        (event.outcome === 'unknown' ? ', and its send to Kafka failed without an answer, so it may be in Kafka already' : ' and not sent') +
        `. Retry later with the same messageId (${event.messageId}) so that consumers deduplicate, or raise publisher.spool.maxBytes`,
      { messageIds: [event.messageId], outcome: event.outcome },
    );
  }
}
