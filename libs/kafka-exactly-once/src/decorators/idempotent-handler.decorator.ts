import { applyDecorators, SetMetadata } from '@nestjs/common';
import { IDEMPOTENT_HANDLER_METADATA } from '../kafka-exactly-once.constants';
import type { RetryOptions, RetryTopicsOptions } from '../interfaces/kafka-exactly-once-options.interface';
import type { EventFormat, JsonLimits } from '../interfaces/format-options.interface';
import { EVENT_FORMATS } from '../options/format-defaults';
import { validationProblem, type EventValidation } from '../formats/event-validator';
import { messageIdFromProblem } from '../engine/event-identity';
import type { MessageIdFrom } from '../interfaces/record-info.interface';

export interface IdempotentHandlerOptions {
  /** Topic to consume (the module's `topicPrefix` is prepended). */
  topic: string;
  /**
   * What the topic's values are: `avro`, `json` or `protobuf` (docs/formats.md). Default: the module's
   * `topics[topic].format`, else `avro`.
   */
  format?: EventFormat;
  /** Full name of the Avro record the handler reads (its current version in the schemas directory); format `avro` only, default `topics[topic].schema`. */
  schema?: string;
  /**
   * Validates each event before the handler is called, as Nest's ValidationPipe would: a DTO class with
   * `class-validator` decorators (the handler gets the DTO instance; `class-transformer` builds it when installed),
   * or a Standard Schema (zod, valibot, arktype...: the handler gets the schema's output). An event that fails is
   * dead-lettered with reason `validation-failed` and the problems as its error, never retried; under
   * @OrderedEvent it parks its key. A validator that could not decide now (a service it asks is away) throws
   * RetriableValidationError (or an error with `retriable: true`): the record is retried as a handler's passing
   * failure is (`retry`, then `retryTopics`). Without it, the decoded value is handed over as it is.
   */
  validate?: EventValidation;
  /** JSON reading for this handler (format `json`), over the module's `json` option. */
  json?: Partial<JsonLimits>;
  /**
   * Where a record without a `message-id` header takes its identity from (what Nest's `ClientKafka` writes: no
   * header): a field path of the decoded event (`'paymentId'`, `'order.id'`) or a function `(event, record) => key`,
   * over the module's `topics[topic].messageIdFrom`. A record that carries a `message-id` keeps it. The key is
   * your promise that it names one event: a second record with the same key is skipped as a duplicate, whatever
   * else it carries. A record whose event cannot be decoded, or has no usable key, is known by its coordinates.
   * See docs/guarantees.md, "Records without a message id".
   *
   * @example
   * messageIdFrom: 'paymentId'
   */
  messageIdFrom?: MessageIdFrom;
  /**
   * Format `json` with a `schemaRegistry`: false reads the topic as plain JSON only (a value starting with `00` gets
   * the JSON reader's refusal, never a registry lookup). Default: the topic's `registryFraming`, else true.
   */
  registryFraming?: boolean;
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
 * // JSON as Nest's Kafka transport writes it, validated with a class-validator DTO.
 * @IdempotentHandler({ topic: 'orders.placed', format: 'json', validate: OrderPlacedDto })
 * async onOrderPlaced(order: OrderPlacedDto, ctx: EventContext) { ... }
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
  if (options.format !== undefined && !EVENT_FORMATS.includes(options.format)) {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "format" must be one of ${EVENT_FORMATS.map((f) => `'${f}'`).join(', ')}, got ${JSON.stringify(options.format)}`);
  }
  if (options.schema !== undefined && (typeof options.schema !== 'string' || options.schema.trim() === '')) {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "schema" must be the full name of an Avro record, got ${JSON.stringify(options.schema)}`);
  }
  if (options.validate !== undefined) {
    const problem = validationProblem(options.validate);
    if (problem) throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "validate" ${problem}`);
  }
  if (options.messageIdFrom !== undefined) {
    const problem = messageIdFromProblem(options.messageIdFrom);
    if (problem) throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "messageIdFrom" ${problem}`);
  }
  if (options.registryFraming !== undefined && typeof options.registryFraming !== 'boolean') {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "registryFraming" must be true or false, got ${JSON.stringify(options.registryFraming)}`);
  }
  if (options.batch !== undefined && typeof options.batch !== 'boolean') {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "batch" must be true or false, got ${typeof options.batch}`);
  }
  if (options.retryTopics !== undefined && (options.retryTopics === null || typeof options.retryTopics !== 'object' || !Array.isArray(options.retryTopics.delays))) {
    throw new TypeError(`@IdempotentHandler({ topic: '${options.topic}' }): "retryTopics" needs the delay of each tier, e.g. { delays: ['10s', '1m', '10m'] }`);
  }
  return applyDecorators(SetMetadata(IDEMPOTENT_HANDLER_METADATA, { ...options }));
}
