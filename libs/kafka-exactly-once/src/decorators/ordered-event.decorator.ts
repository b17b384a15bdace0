import { applyDecorators, SetMetadata } from '@nestjs/common';
import { ORDERED_EVENT_METADATA } from '../kafka-exactly-once.constants';

/**
 * What an ordering key may be: text, a number, or bytes. `null`, `undefined` and an empty value mean the key
 * cannot be derived (the record is dead-lettered with reason `key-unresolved`).
 */
export type OrderingKey = string | number | bigint | Buffer;

export interface OrderedEventOptions<T = any> {
  /**
   * The ordering key of an event. Default: the record's Kafka key. Records of one ordering key are handled in
   * partition order, and a record of it that fails for good parks the key.
   */
  key?: (event: T) => OrderingKey | null | undefined;
  /**
   * Key lanes: how many ordering keys of one partition are handled at the same time (default 1: one record
   * after the other). Each key stays strictly in partition order, and a unit of work still commits its records
   * atomically in one PostgreSQL and one Kafka transaction. The handlers share the unit's connection, so lanes
   * speed up handlers that wait on something besides PostgreSQL (a lookup, a remote call). They also share its
   * transaction: a handler in lanes may write only rows of its own ordering key, or shared rows in single
   * statements (a read-then-write of a row another key's handler writes can lose an update). A handler that
   * opens a transaction of its own (`manager.transaction`) makes its units run without lanes. Not for batch
   * handlers.
   */
  lanes?: number;
}

/** The most key lanes a handler may ask for. */
export const MAX_KEY_LANES = 256;

/**
 * Promises per-key order even under failure, on an @IdempotentHandler method: when a record of ordering key
 * K is dead-lettered, K is parked (durably, in the same transaction as the dead letter), and the later
 * records of K are parked in order, with a copy on the dead-letter topic (reason `key-parked`), until an
 * operator releases K. Releasing replays the parked records through the handler in their original order,
 * exactly once. Other keys keep flowing. See docs/operations.md.
 *
 * @example
 * @IdempotentHandler({ topic: 'payments.requested', schema: 'com.example.PaymentRequested' })
 * @OrderedEvent({ key: (e: PaymentRequested) => e.accountId })
 * async onPaymentRequested(event: PaymentRequested, ctx: EventContext) { ... }
 */
export function OrderedEvent<T = any>(options: OrderedEventOptions<T> = {}): MethodDecorator {
  if (options === null || typeof options !== 'object') throw new TypeError('@OrderedEvent takes an options object, e.g. @OrderedEvent({ key: (e) => e.accountId })');
  if (options.key !== undefined && typeof options.key !== 'function') {
    throw new TypeError('@OrderedEvent({ key }) needs a function of the event, e.g. (e) => e.accountId; leave it out to order by the record key');
  }
  if (options.lanes !== undefined && !(Number.isInteger(options.lanes) && options.lanes >= 1 && options.lanes <= MAX_KEY_LANES)) {
    throw new TypeError(`@OrderedEvent({ lanes }) needs a whole number from 1 to ${MAX_KEY_LANES} (the ordering keys of a partition handled at once), got ${String(options.lanes)}`);
  }
  return applyDecorators(SetMetadata(ORDERED_EVENT_METADATA, { ...options }));
}
