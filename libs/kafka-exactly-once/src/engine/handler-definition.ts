import type { OrderingKey } from '../decorators/ordered-event.decorator';
import type { BatchContext, BatchEvent, EventContext } from '../interfaces/event-context.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import type { EventReader } from '../formats/event-reader';
import type { EventKeySource } from './event-identity';

/** A discovered @IdempotentHandler, ready to be called by the engine. */
export interface HandlerDefinition {
  /** `Class.method`, for logs and errors. */
  name: string;
  /** Topic as consumed (with the module's topicPrefix). */
  topic: string;
  /** Decodes (by the handler's format) and validates its records' values. */
  reader: EventReader;
  /** Set by `messageIdFrom`: the identity of a record without a `message-id` header comes from its event's key. */
  messageIdFrom?: EventKeySource;
  retry: ResolvedOptions['retry'];
  /** Set by `retryTopics`: the tiers a record that fails its in-place attempts moves through. */
  retryTopics?: RetryTiers;
  /** Set by @OrderedEvent: a record that fails for good parks its ordering key. */
  ordering?: {
    /** The ordering key of an event; undefined: the record key. */
    key?: (event: unknown) => OrderingKey | null | undefined;
    /** Key lanes: ordering keys of one partition handled at once (1: one record after the other). */
    lanes: number;
  };
  /** One event (a batch handler gets it as a batch of one). */
  invoke(event: unknown, ctx: EventContext): Promise<void>;
  /** Set for @IdempotentHandler({ batch: true }): the new events of a unit of work at once. */
  invokeBatch?(events: BatchEvent[], batch: BatchContext): Promise<void>;
}

/** The retry tiers of a handler, resolved at boot. */
export interface RetryTiers {
  /** The topic of each tier, in order: `<topic>.retry.1`, `<topic>.retry.2`... */
  topics: string[];
  /** The delay of each tier, ms. */
  delaysMs: number[];
  /** Errors that skip the tiers (besides those never retried). */
  deadLetterOn: Array<abstract new (...args: any[]) => Error>;
}
