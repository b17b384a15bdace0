import { applyDecorators, SetMetadata } from '@nestjs/common';
import { IDEMPOTENT_HANDLER_METADATA } from '../kafka-exactly-once.constants';
import type { RetryOptions, RetryTopicsOptions } from '../interfaces/kafka-exactly-once-options.interface';

export interface IdempotentHandlerOptions {
  /** Topic to consume (the module's `topicPrefix` is prepended). */
  topic: string;
  /** Full name of the Avro record the handler reads (its current version in the schemas directory). */
  schema: string;
  /** Overrides the module's retry policy for this handler. */
  retry?: RetryOptions;
  /**
   * Non-blocking retries: after its in-place attempts, a failing record moves to `<topic>.retry.<n>` and comes
   * back after each tier's delay while the partition moves on; after the last tier, the dead-letter topic.
   * Exactly once across the tiers. Not with @OrderedEvent. See docs/retries.md.
   *
   * @example
   * retryTopics: { delays: ['10s', '1m', '10m'], maxInPlaceAttempts: 2 }
   */
  retryTopics?: RetryTopicsOptions;
  /**
   * The method takes the unit of work's new events at once: `(events: BatchEvent<T>[], batch: BatchContext)`,
   * for set-based SQL (one statement for many events). Same guarantees; when it throws, the events are handled
   * one by one (each a batch of one) to find the failing one. Default false: one call per event.
   */
  batch?: boolean;
}

/**
 * Makes a provider method the exactly-once handler of a topic. Each record is handled once: the method's
 * database writes through `ctx.manager` and its `ctx.emit()` events commit together with the consumer offset,
 * or not at all.
 *
 * @example
 * @IdempotentHandler({ topic: 'payments.requested', schema: 'com.example.PaymentRequested' })
 * async onPaymentRequested(event: PaymentRequested, ctx: EventContext) { ... }
 *
 * @example
 * // A batch handler: the new events of a unit of work at once, in offset order.
 * @IdempotentHandler({ topic: 'payments.requested', schema: 'com.example.PaymentRequested', batch: true })
 * async onPaymentsRequested(events: BatchEvent<PaymentRequested>[], batch: BatchContext) { ... }
 */
export function IdempotentHandler(options: IdempotentHandlerOptions): MethodDecorator {
  if (!options || typeof options.topic !== 'string' || options.topic.trim() === '') {
    throw new TypeError("@IdempotentHandler needs a topic, e.g. @IdempotentHandler({ topic: 'payments.requested', schema: 'com.example.PaymentRequested' })");
  }
  if (typeof options.schema !== 'string' || options.schema.trim() === '') {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }) needs the full name of its Avro schema in "schema"`);
  }
  if (options.batch !== undefined && typeof options.batch !== 'boolean') {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "batch" must be true or false, got ${typeof options.batch}`);
  }
  if (options.retryTopics !== undefined && (options.retryTopics === null || typeof options.retryTopics !== 'object' || !Array.isArray(options.retryTopics.delays))) {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "retryTopics" needs the delay of each tier, e.g. { delays: ['10s', '1m', '10m'] }`);
  }
  return applyDecorators(SetMetadata(IDEMPOTENT_HANDLER_METADATA, { ...options }));
}
