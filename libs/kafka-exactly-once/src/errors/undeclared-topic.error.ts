import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** An event was emitted or published to a topic whose schema the module does not know. */
export class UndeclaredTopicError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(readonly topic: string) {
    super(`Topic "${topic}" is not declared: add topics: { '${topic}': { schema: '<namespace.Record>' } } to the KafkaExactlyOnceModule options`);
  }
}
