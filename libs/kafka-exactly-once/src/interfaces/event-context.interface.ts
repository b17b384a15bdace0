import type { EventHeaders } from '../publishing/event-headers';
import type { EntityManager } from 'typeorm';
import type { RecordInfo } from './record-info.interface';

/** The options of `ctx.emit`. */
export interface EmitOptions {
  /** Record key; required unless the topic declares a key function in the module's `topics` option. */
  key?: string;
  /**
   * Headers of the output, beside the library's own: a name to a string (sent as UTF-8) or bytes (Buffer,
   * Uint8Array, sent as they are); an undefined value leaves the header out. Any other value (a number, an object,
   * null) makes `ctx.emit` throw a TypeError naming the header, and nothing is emitted. They are written in the order
   * given, after the handler span's `traceparent` (which a `traceparent` given here replaces) and before the
   * library's `message-id`, `event-type` and `causation-id`, which always win over a header of the same name. They
   * are recorded with the output, so a replay sends them byte for byte.
   *
   * @example
   * ctx.emit('payments.processed', processed, { key: event.accountId, headers: { tenant: ctx.message.headers.tenant, 'schema-hint': Buffer.from([1]) } });
   */
  headers?: EventHeaders;
}

/**
 * What a handler gets besides the decoded event. `Db` is the type of `ctx.db`, the module's data layer bound to
 * the unit of work's transaction: TypeORM's `EntityManager` (the default), a `PrismaClient`, a Drizzle database or
 * a `Kysely<DB>`, as the module's `database` option builds it.
 *
 * @example
 * async handle(event: PaymentRequested, ctx: EventContext<PrismaClient>) {
 *   await ctx.db.account.update({ where: { accountId: event.accountId }, data: { balanceCents: { increment: event.amountCents } } });
 * }
 */
export interface EventContext<Db = EntityManager> {
  /**
   * The module's data layer on the same PostgreSQL transaction as the inbox claim: write through it, and the
   * writes commit exactly once with the record's offset. Its own `transaction()` calls nest as savepoints.
   */
  readonly db: Db;
  /** TypeORM's EntityManager of the unit's transaction (TypeORM data layer only; the same object as `db`). */
  readonly manager: EntityManager;
  readonly message: RecordInfo;
  /**
   * The key to give any system outside this transaction (a payment provider, a mail gateway, an HTTP API) so
   * that a call made again for this record is recognized there: a UUID, the same in every run of the record in
   * this consumer group (in-place retries, re-runs of its unit of work, redeliveries after a crash, every retry
   * tier, dead-letter replays and releases of a parked key), and different for every other record, also for a
   * duplicate publish under another message id and for another group. For two calls in one handler, derive one
   * per call: `${ctx.idempotencyKey}:charge`, `${ctx.idempotencyKey}:receipt`.
   *
   * @example
   * await this.provider.charge({ account: event.accountId, cents: event.amountCents }, { idempotencyKey: ctx.idempotencyKey });
   */
  readonly idempotencyKey: string;
  /**
   * Which call of the handler this is for the record, from 1, within one run of its in-place attempts: 1 on the
   * first call, 2 on the first retry, up to `retry.attempts` (or `retryTopics.maxInPlaceAttempts`); the dead
   * letter's `dlq-attempts` is its last value. A call that failed in a unit run without savepoints counts (the
   * next call is 2). It starts at 1 again on each retry tier, when the record's unit of work runs again after
   * failing as a whole (the handler overran, a connection was cut, an earlier record of the unit failed: the
   * records before it run again, with `attempt` 1), after a redelivery (a crash, a rebalance), in an operator's
   * replay or release, and for each event of a batch handler's batch that failed (then called one by one). A
   * validator's own tries (`RetriableValidationError`) are not counted: `attempt` is 1 on the first call once the
   * event is valid.
   */
  readonly attempt: number;
  /**
   * Set when an operator's action runs the handler: `release` (a parked key's records replayed in order) or
   * `dead-letter` (one dead letter replayed), with the id of the action in the audit table.
   */
  readonly replay?: { kind: 'release' | 'dead-letter'; auditId: string };
  /**
   * Adds an event to the same Kafka transaction as this record's offset commit. It is validated and encoded
   * with the topic's schema (module option `topics`) and gets a deterministic `message-id` and a
   * `causation-id` naming this record; `options.headers` adds headers of your own (`EmitOptions.headers`).
   * Nothing is sent if the handler fails. An event the topic's format cannot hold (invalid for its schema, a
   * `NaN`, a cycle) throws `OutputInvalidError` here; uncaught, the input is dead-lettered `output-invalid`.
   */
  emit(topic: string, event: unknown, options?: EmitOptions): void;
}

/** A method decorated with @IdempotentHandler. */
export type IdempotentHandlerMethod<T = any> = (event: T, ctx: EventContext<any>) => Promise<void> | void;

/** One event of a batch, with its own context: `ctx.emit` adds an output of this event, `ctx.message` is its record. */
export interface BatchEvent<T = any, Db = any> {
  readonly event: T;
  readonly ctx: EventContext<Db>;
}

/** What a batch handler gets besides its events. */
export interface BatchContext<Db = EntityManager> {
  /** The data layer on the unit of work's PostgreSQL transaction (the same as every event's `ctx.db`). */
  readonly db: Db;
  /** EntityManager of the unit of work's PostgreSQL transaction (TypeORM data layer only; the same as `ctx.manager`). */
  readonly manager: EntityManager;
  /** Always 1: a batch is called once; when it fails, its events are called one by one, each from `attempt` 1 (`EventContext.attempt`). */
  readonly attempt: number;
}

/**
 * A method decorated with @IdempotentHandler({ batch: true }): it gets the new events of a unit of work (no
 * duplicates, no replays, none of a parked key), in offset order, for set-based SQL. It runs once per unit of
 * work; when it throws, the unit is rolled back and the events are handled one at a time (a batch of one each),
 * so that only the failing event is retried and dead-lettered or parks its key.
 */
export type IdempotentBatchHandlerMethod<T = any> = (events: ReadonlyArray<BatchEvent<T>>, batch: BatchContext<any>) => Promise<void> | void;
