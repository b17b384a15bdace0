import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** Why Kafka can never take an event: it is larger than the topic (or the producer) allows, or its topic does not exist. */
export type UndeliverableReason = 'too-large' | 'unknown-topic' | 'refused';

/**
 * An event that Kafka can never accept, so `publish` refused it at once: it was neither sent nor spooled (a
 * spooled copy would block its key forever). Retrying the same event cannot help; the message says what can.
 *
 * @example
 * try {
 *   await publisher.publish('documents.uploaded', event, { key });
 * } catch (err) {
 *   if (err instanceof UndeliverableEventError && err.reason === 'too-large') storeElsewhereAndPublishAReference(event);
 *   else throw err;
 * }
 */
export class UndeliverableEventError extends KafkaExactlyOnceError {
  readonly retriable = false;

  private constructor(
    readonly reason: UndeliverableReason,
    readonly topic: string,
    readonly messageId: string,
    message: string,
    readonly recordBytes?: number,
    readonly limitBytes?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The encoded record (key, value, headers and framing) is larger than the topic's or the producer's limit. */
  static tooLarge(topic: string, messageId: string, recordBytes: number, limitBytes: number, limitName: string): UndeliverableEventError {
    return new UndeliverableEventError(
      'too-large',
      topic,
      messageId,
      `Event ${messageId} for topic "${topic}" is ${recordBytes} bytes as a Kafka record (key, value, headers and framing), ` +
        `over the limit of ${limitBytes} bytes (${limitName}); Kafka would never accept it, so it was neither sent nor spooled. ` +
        `Make the event smaller (keep large payloads elsewhere and publish a reference), or raise the topic's max.message.bytes.`,
      recordBytes,
      limitBytes,
    );
  }

  /** The topic does not exist on the cluster (the publisher never creates topics). */
  static unknownTopic(topic: string, messageId: string): UndeliverableEventError {
    return new UndeliverableEventError(
      'unknown-topic',
      topic,
      messageId,
      `Topic "${topic}" does not exist on the Kafka cluster, so event ${messageId} was neither sent nor spooled (the publisher never creates topics). ` +
        'Create the topic (with its partitions and retention), or check the module option topicPrefix, then publish again.',
    );
  }

  /** The broker refused the record for good (e.g. INVALID_RECORD, MESSAGE_TOO_LARGE). */
  static refused(topic: string, messageId: string, why: string, cause: unknown): UndeliverableEventError {
    return new UndeliverableEventError(
      'refused',
      topic,
      messageId,
      `Kafka refused event ${messageId} for topic "${topic}" for good (${why}); it was neither sent nor spooled. ` +
        'Fix what the broker names (topic ACLs, record contents), then publish again.',
      undefined,
      undefined,
      { cause },
    );
  }
}
