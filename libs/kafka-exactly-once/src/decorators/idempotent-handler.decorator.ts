import { applyDecorators, SetMetadata } from '@nestjs/common';
import { IDEMPOTENT_HANDLER_METADATA } from '../kafka-exactly-once.constants';
import type { RetryOptions } from '../interfaces/kafka-exactly-once-options.interface';

export interface IdempotentHandlerOptions {
  /** Topic to consume (the module's `topicPrefix` is prepended). */
  topic: string;
  /** Full name of the Avro record the handler reads (its current version in the schemas directory). */
  schema: string;
  /** Overrides the module's retry policy for this handler. */
  retry?: RetryOptions;
}

/**
 * Makes a provider method the exactly-once handler of a topic. Each record is handled once: the method's
 * database writes through `ctx.manager` and its `ctx.emit()` events commit together with the consumer offset,
 * or not at all.
 *
 * @example
 * @IdempotentHandler({ topic: 'payments.requested', schema: 'com.example.PaymentRequested' })
 * async onPaymentRequested(event: PaymentRequested, ctx: EventContext) { ... }
 */
export function IdempotentHandler(options: IdempotentHandlerOptions): MethodDecorator {
  if (!options || typeof options.topic !== 'string' || options.topic.trim() === '') {
    throw new TypeError("@IdempotentHandler needs a topic, e.g. @IdempotentHandler({ topic: 'payments.requested', schema: 'com.example.PaymentRequested' })");
  }
  if (typeof options.schema !== 'string' || options.schema.trim() === '') {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }) needs the full name of its Avro schema in "schema"`);
  }
  return applyDecorators(SetMetadata(IDEMPOTENT_HANDLER_METADATA, { ...options }));
}
