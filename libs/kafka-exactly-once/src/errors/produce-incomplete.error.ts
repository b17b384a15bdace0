import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** Where a record of a send was written, when the broker answered for its partition. */
export interface WrittenRecord {
  topic: string;
  partition: number;
  /** Unknown when the broker answered "duplicate" (the record was written before). */
  offset?: string;
}

/**
 * A send to Kafka ended without the broker's answer for every partition its records were placed on. `outcome`
 * says what became of the records: `not-written` (none is in Kafka), `partly-written` (those in `written` are,
 * the others are not), or `unknown` (some went out without an answer and may be in Kafka). `written[i]` is the
 * i-th record's place, in the order the records were given, or undefined. A transactional send that fails this
 * way is aborted by its caller; the producer takes a new epoch (or producer id) before its next send.
 */
export class ProduceIncompleteError extends KafkaExactlyOnceError {
  readonly retriable: boolean;
  readonly outcome: 'not-written' | 'partly-written' | 'unknown';
  readonly written: Array<WrittenRecord | undefined>;
  /** The partition whose records the broker refused for good, when it did. */
  readonly refused?: { topic: string; partition: number };

  constructor(message: string, options: { outcome: ProduceIncompleteError['outcome']; written: Array<WrittenRecord | undefined>; cause?: unknown; refused?: { topic: string; partition: number } }) {
    super(message, { cause: options.cause });
    this.outcome = options.outcome;
    this.written = options.written;
    this.refused = options.refused;
    this.retriable = (options.cause as { retriable?: unknown } | undefined)?.retriable !== false;
  }
}
