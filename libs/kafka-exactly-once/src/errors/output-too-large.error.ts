import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * A handler emitted an event larger than its topic accepts (`max.message.bytes`): the input record is
 * dead-lettered with reason `output-too-large`, since no retry can make the output smaller.
 */
export class OutputTooLargeError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly topic: string,
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`the event emitted to ${topic} is ${bytes} bytes, over the topic's max.message.bytes of ${limit}: emit a smaller event, or raise the topic's max.message.bytes`);
  }
}
