import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** A module option is missing or wrong; thrown at boot. `field` is the option's path, e.g. `consumer.sessionTimeout`. */
export class InvalidOptionsError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly field: string,
    /** What is wrong with it, without the option's name. */
    readonly problem: string,
  ) {
    super(`KafkaExactlyOnceModule option "${field}" ${problem}`);
  }
}
