import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * `client.send()`, or a `@MessagePattern` handler bound to KafkaExactlyOnceServer: request-response over Kafka
 * has no exactly-once meaning (the reply would be a side effect outside the transaction) and is not offered.
 */
export class RequestResponseNotSupportedError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(what: string) {
    super(
      `${what}: kafka-exactly-once carries events, not requests. Publish with client.emit(topic, event) and handle with @EventPattern; ` +
        'a handler that must answer emits a reply event with ctx.emit(topic, event) in its transaction.',
    );
  }
}
