import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** An event for a keyed topic came without a key, and the topic declares no key function. */
export class MissingKeyError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(readonly topic: string) {
    super(
      `An event for topic "${topic}" needs a key: pass { key } or declare topics["${topic}"].key = (event) => ... ` +
        'in the module options. Records of one key keep their order; pick the entity the events are about (an account, a user).',
    );
  }
}
