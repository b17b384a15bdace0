import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * The outbox relay cannot go on without an operator: its name is not the one the database's outbox is relayed
 * under, its checkpoint in Kafka is behind what the database knows was relayed (the checkpoint topic was deleted,
 * or the relay points at another cluster) or ahead of the batches the database gave out (a database restored
 * from a backup), or its checkpoint topic is missing and cannot be created, or is not compacted. Relaying
 * anyway could send events a second time, so the relay waits (and tries again every minute) until it is fixed;
 * health names the cause. docs/outbox.md, "Operations", says what to do for each.
 */
export class OutboxRelayError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly problem: 'name-mismatch' | 'checkpoint-behind' | 'checkpoint-ahead' | 'checkpoint-topic' | 'checkpoint-unreadable',
    message: string,
  ) {
    super(message);
  }
}
