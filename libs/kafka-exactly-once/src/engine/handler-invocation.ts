import type { Logger } from '@nestjs/common';
import type { DatabasePort, DatabaseSession, LentCall } from '../database/database.port';
import { lentFor } from '../database/lent-database';
import { HandlerTimeoutError } from '../errors/handler-timeout.error';
import { OutputTooLargeError } from '../errors/output-too-large.error';
import { EventValidationError } from '../errors/event-validation.error';
import { OutputInvalidError } from '../errors/output-invalid.error';
import type { BatchContext, EmitOptions, EventContext } from '../interfaces/event-context.interface';
import type { RecordInfo } from '../interfaces/record-info.interface';
import { HEADERS } from '../kafka-exactly-once.constants';
import type { HandlerDefinition } from './handler-definition';
import type { ResolvedOptions } from '../options/resolved-options';
import type { SchemaRegistry } from '../formats/avro/schema-registry';
import type { AmbientTransactions } from '../transaction/ambient-transaction';
import { headersProblem } from '../publishing/event-headers';
import { encodeDeclaredEvent } from '../formats/declared-event.encoder';
import { isConnectionFault, isRetriableHandlerError, raisedByHandler } from './error-classification';
import { idempotencyKey, outputMessageId } from './message-ids';
import { OutputRecord, outputRecordSize } from './output-record';
import { TRACING_OFF, type HeaderReader, type KafkaExactlyOnceTracing } from '../tracing/kafka-exactly-once.tracing';
import { outputIdSeed, RecordIdentity } from './record-identity';
import { retryDelay } from './retry-policy';
import { pauseWithHeartbeats } from './sleep';

/** What a handler call needs besides the record. */
export interface InvocationDeps {
  /** The data layer: what a handler is lent of the unit's transaction (`ctx.db`, `ctx.manager`). */
  database: DatabasePort;
  handler: HandlerDefinition;
  registry: SchemaRegistry;
  options: ResolvedOptions;
  /** `max.message.bytes` of the topics outputs go to, when known. */
  topicLimits: ReadonlyMap<string, number>;
  heartbeat: () => Promise<void>;
  logger: Logger;
  /** A span around each record's handling (OpenTelemetry, when the application has it). */
  tracing?: KafkaExactlyOnceTracing;
  /** The application's @nestjs-cls/transactional, lent the unit's transaction during each handler call. */
  ambient?: AmbientTransactions;
}

/**
 * A handler's call with the data layer opened for it (bound to the unit's transaction, and closed once the call is
 * over or has overrun its deadline: a statement the call sends later is refused), and the application's
 * TransactionHost (if any) showing that transaction meanwhile.
 */
async function lent(deps: InvocationDeps, runner: DatabaseSession, where: () => string, call: (db: LentCall) => Promise<unknown>): Promise<void> {
  const db = lentFor(deps.database, runner).open();
  const host = deps.ambient ? () => deps.ambient!.run((db.manager ?? db.db) as never, () => call(db)) : () => call(db);
  let failed = false;
  try {
    await withinHandlerTimeout(deps, where, db.run(host));
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    // A call that left a transaction of its own open fails (its writes undone), unless it failed already.
    await db.close(failed);
  }
}

/** The record a handler is called for. */
export interface InvocationRecord {
  info: RecordInfo;
  id: RecordIdentity;
  /** The record's headers one name at a time, for tracing (else it reads `info.headers`, all of them as text). */
  headers?: HeaderReader;
  /** Set when an operator's release or replay runs the handler (audit id). */
  replay?: { kind: 'release' | 'dead-letter'; auditId: string };
}

/** An event of a batch handler's call, and where its outputs go. */
export interface BatchedInvocation {
  record: InvocationRecord;
  event: unknown;
  /** Filled by the event's `ctx.emit` during the call. */
  emitted: OutputRecord[];
}

export type Invocation = { ok: true; attempts: number; outputs: OutputRecord[] } | { ok: false; attempts: number; error: unknown };

const SAVEPOINT = 'kafka_eo_record';

/**
 * The `causation-id` of an output: the input's message id byte for byte, unless it is longer than 256 bytes
 * (every output would carry it), then its `sha256:` display form.
 */
export function causationId(id: RecordIdentity): Buffer {
  return id.raw.length <= 256 ? id.raw : Buffer.from(id.displayId, 'utf8');
}

/**
 * Thrown by an optimistic invocation (no savepoint) whose handler failed: the caller's transaction may hold the
 * failed attempt's writes or be aborted, so the whole unit of work is rolled back and run again with savepoints.
 */
export class OptimisticInvocationFailed extends Error {
  constructor(
    handlerError: unknown,
    /** The record whose handler failed (undefined: a batch handler's call, for several records). */
    readonly offset?: string,
  ) {
    super(`handler failed without a savepoint (${(handlerError as Error)?.message ?? handlerError}); the unit of work runs again with savepoints`, { cause: handlerError });
    this.name = 'OptimisticInvocationFailed';
  }
}

/**
 * A record's first attempt, made in an optimistic run of its unit of work and failed there, carried into the
 * careful run: it counts as attempt 1, so that the record is not called once more than its retry policy says.
 */
export interface CarriedAttempt {
  error: unknown;
}

/**
 * Runs the handler for one decoded event inside the caller's transaction, each attempt behind a SAVEPOINT, with
 * the handler's retry policy. A connection fault is thrown (the caller's whole transaction is gone); any other
 * failure that is final comes back as `{ ok: false }` with the database as it was before the first attempt.
 *
 * With `savepoints: false` (the common case of a unit of work: no record has failed in it yet) the handler runs
 * once, without the two round trips of a savepoint, and any failure is thrown as OptimisticInvocationFailed for
 * the caller to roll back and run the unit again with savepoints.
 */
export async function invokeHandler(
  deps: InvocationDeps,
  runner: DatabaseSession,
  record: InvocationRecord,
  event: unknown,
  { savepoints = true, carried }: { savepoints?: boolean; carried?: CarriedAttempt } = {},
): Promise<Invocation> {
  const span = (deps.tracing ?? TRACING_OFF).process(record.info, deps.handler.name, record.headers);
  try {
    const result = await span.run(() => attempts(deps, runner, record, event, savepoints, span.headers, carried));
    span.end(result.ok ? undefined : result.error, { 'kafka_eo.attempts': result.attempts });
    return result;
  } catch (err) {
    span.end(err);
    throw err;
  }
}

async function attempts(
  deps: InvocationDeps,
  runner: DatabaseSession,
  record: InvocationRecord,
  event: unknown,
  savepoints: boolean,
  traceHeaders: Record<string, string>,
  carried?: CarriedAttempt,
): Promise<Invocation> {
  const { handler, options } = deps;
  const where = () => `${record.info.topic}[${record.info.partition}]@${record.info.offset} (message ${record.id.displayId})`;
  if (!savepoints) {
    const emitted: OutputRecord[] = [];
    const waiting: WaitingEmits = [];
    try {
      await lent(deps, runner, where, (db) => handler.invoke(event, eventContext(deps, db, record, 1, emitted, traceHeaders, waiting)));
      if (waiting.length > 0) await Promise.all(waiting);
    } catch (err) {
      throw optimisticFailure(err, record.info.offset);
    }
    return { ok: true, attempts: 1, outputs: emitted };
  }
  let first = 1;
  if (carried) {
    // Attempt 1 was made (and failed) in the optimistic run of this unit, on the same state of the database.
    if (!isRetriableHandlerError(carried.error) || handler.retry.attempts <= 1) return { ok: false, attempts: 1, error: carried.error };
    logAttemptFailure(deps, record, 1, carried.error);
    await pauseWithHeartbeats(retryDelay(handler.retry, 1), options.consumer.heartbeatInterval, deps.heartbeat);
    first = 2;
  }
  for (let attempt = first; ; attempt++) {
    await runner.query(`SAVEPOINT ${SAVEPOINT}`);
    const emitted: OutputRecord[] = [];
    const waiting: WaitingEmits = [];
    try {
      await lent(deps, runner, where, (db) => handler.invoke(event, eventContext(deps, db, record, attempt, emitted, traceHeaders, waiting)));
      await Promise.all(waiting);
      await runner.query(`RELEASE SAVEPOINT ${SAVEPOINT}`);
      return { ok: true, attempts: attempt, outputs: emitted };
    } catch (err) {
      // The call may still be running on this connection: the unit of work ends here, and closes it.
      if (err instanceof HandlerTimeoutError) throw err;
      // If the connection is gone this throws, and the whole transaction is rolled back and retried.
      await runner.query(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`);
      if (isConnectionFault(err)) throw raisedByHandler(err);
      if (!isRetriableHandlerError(err) || attempt >= handler.retry.attempts) return { ok: false, attempts: attempt, error: err };
      logAttemptFailure(deps, record, attempt, err);
      await pauseWithHeartbeats(retryDelay(handler.retry, attempt), options.consumer.heartbeatInterval, deps.heartbeat);
    }
  }
}

function logAttemptFailure(deps: InvocationDeps, record: InvocationRecord, attempt: number, err: unknown): void {
  const { topic, partition, offset } = record.info;
  // The display id and a bounded message: both can carry a record's bytes, of any length.
  const message = String((err as Error)?.message ?? err).slice(0, 300);
  deps.logger.warn(`${deps.handler.name} failed on ${topic}[${partition}]@${offset} (message ${record.id.displayId}) (attempt ${attempt}/${deps.handler.retry.attempts}): ${message}`);
}

/**
 * Runs a batch handler once for a unit of work's new events, without a savepoint (the optimistic case): any
 * failure but a connection fault is thrown as OptimisticInvocationFailed, and the unit of work runs again with
 * every event alone (a batch of one) behind its savepoint.
 */
export async function invokeBatchHandler(deps: InvocationDeps, runner: DatabaseSession, items: BatchedInvocation[]): Promise<void> {
  // A span per event (each the child of its record's trace), so that each event's outputs continue its trace.
  const spans = items.map((item) => (deps.tracing ?? TRACING_OFF).process(item.record.info, deps.handler.name, item.record.headers));
  const waiting: WaitingEmits = [];
  const where = () => `${items[0].record.info.topic}[${items[0].record.info.partition}]@${items[0].record.info.offset}..${items[items.length - 1].record.info.offset} (${items.length} events)`;
  try {
    await whileHeartbeating(deps, () =>
      optimistically(async () => {
        await lent(deps, runner, where, (db) => {
          const events = items.map((item, i) => ({ event: item.event, ctx: eventContext(deps, db, item.record, 1, item.emitted, spans[i].headers, waiting) }));
          return deps.handler.invokeBatch!(events, batchContext(deps, db));
        });
        await Promise.all(waiting);
      }),
    );
  } catch (err) {
    for (const span of spans) span.end(err);
    throw err;
  }
  for (const span of spans) span.end(undefined, { 'messaging.batch.message_count': items.length });
}

/**
 * Handling up to a whole chunk in one go (a batch handler's call, key lanes): keeps the group membership alive
 * meanwhile (KafkaJS heartbeats on its own only between batches), or a long unit would cost the partition in
 * a rebalance.
 */
export async function whileHeartbeating<T>(deps: Pick<InvocationDeps, 'heartbeat' | 'options'>, call: () => Promise<T>): Promise<T> {
  const heartbeats = setInterval(() => void deps.heartbeat().catch(() => undefined), deps.options.consumer.heartbeatInterval);
  try {
    return await call();
  } finally {
    clearInterval(heartbeats);
  }
}

/**
 * A handler call without a savepoint: a connection fault as it is (marked as the handler's), an overrun as it is,
 * any other failure as OptimisticInvocationFailed.
 */
async function optimistically(call: () => Promise<void>, offset?: string): Promise<void> {
  try {
    await call();
  } catch (err) {
    throw optimisticFailure(err, offset);
  }
}

/** What a handler call without a savepoint that failed with `err` throws (see optimistically). */
function optimisticFailure(err: unknown, offset?: string): unknown {
  if (err instanceof HandlerTimeoutError) return err;
  if (isConnectionFault(err)) return raisedByHandler(err);
  return new OptimisticInvocationFailed(err, offset);
}

/** The handler's call, or HandlerTimeoutError once it has run `consumer.handlerTimeoutMs` (the call itself runs on). */
function withinHandlerTimeout(deps: InvocationDeps, where: () => string, call: Promise<unknown>): Promise<void> {
  const ms = deps.options.consumer.handlerTimeoutMs;
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new HandlerTimeoutError(deps.handler.name, where(), ms)), ms);
    call.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** TypeORM's EntityManager of the unit (`ctx.manager`): other data layers have `ctx.db` only. */
function managerOf(deps: InvocationDeps, db: { manager?: unknown }): any {
  if (db.manager === undefined) {
    throw new TypeError(`ctx.manager is TypeORM's EntityManager, and this module's data layer is ${deps.database.kind}: write through ctx.db (it is in the unit's transaction)`);
  }
  return db.manager;
}

function batchContext(deps: InvocationDeps, db: LentCall): BatchContext {
  return {
    get db() {
      return db.db as any;
    },
    get manager() {
      return managerOf(deps, db);
    },
    attempt: 1,
  };
}

/** An emitted event the library cannot write: the handler's output is invalid (`output-invalid`), not its input. */
function asOutputInvalid(topic: string, err: unknown): unknown {
  return err instanceof EventValidationError && !(err instanceof OutputInvalidError) ? new OutputInvalidError(topic, err) : err;
}

/**
 * The emits of a handler call whose value waits for the Schema Registry (the first write of a topic whose id, or
 * latest schema, is still being looked up: see EncodedEvent.value), each filling its output in. The call is done
 * once all are: awaited after the handler returns, before its outputs are used, each failing as the emit would have
 * failed had it thrown (SchemaRegistryError: an infrastructure fault; OutputTooLargeError, EventValidationError).
 */
type WaitingEmits = Array<Promise<void>>;

/**
 * `traceHeaders`: the handler span's `traceparent`, which every output carries (unless the handler sets its own).
 * `waiting`: where an emit whose value waits for the registry puts its wait.
 */
function eventContext(deps: InvocationDeps, db: LentCall, record: InvocationRecord, attempt: number, emitted: OutputRecord[], traceHeaders: Record<string, string>, waiting: WaitingEmits): EventContext {
  const { options, registry, topicLimits } = deps;
  let key: string | undefined;
  return {
    // Read when the handler does: a data layer may build what it lends at the first use (TypeORM's EntityManager).
    get db() {
      return db.db as any;
    },
    get manager() {
      return managerOf(deps, db);
    },
    message: record.info,
    // Computed when a handler reads it (a SHA-256 per record otherwise, for handlers that call nothing outside).
    get idempotencyKey() {
      return (key ??= idempotencyKey(options.groupId, record.id.scope, record.id.digest));
    },
    attempt,
    replay: record.replay,
    emit: (target: string, event: unknown, emitOptions: EmitOptions = {}) => {
      const headerProblem = headersProblem(emitOptions.headers);
      if (headerProblem) throw new TypeError(`ctx.emit('${target}'): ${headerProblem}`);
      let encoded: ReturnType<typeof encodeDeclaredEvent>;
      try {
        encoded = encodeDeclaredEvent(options, registry, target, event, emitOptions.key);
      } catch (err) {
        throw asOutputInvalid(target, err);
      }
      const named: Record<string, string | Uint8Array | undefined> = {
        ...traceHeaders,
        ...emitOptions.headers,
        [HEADERS.messageId]: outputMessageId(options.groupId, outputIdSeed(record.id), emitted.length),
        [HEADERS.eventType]: encoded.eventType,
        [HEADERS.causationId]: causationId(record.id),
      };
      const headers: OutputRecord['headers'] = [];
      for (const name of Object.keys(named)) {
        const value = named[name];
        if (value === undefined) continue;
        headers.push([name, typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength)]);
      }
      const output: OutputRecord = { topic: encoded.topic, key: Buffer.from(encoded.key, 'utf8'), value: null, headers };
      const limit = topicLimits.get(output.topic);
      const fill = (value: Buffer) => {
        output.value = value;
        const size = outputRecordSize(output);
        if (limit !== undefined && size > limit) throw new OutputTooLargeError(output.topic, size, limit);
      };
      if (Buffer.isBuffer(encoded.value)) {
        fill(encoded.value);
        emitted.push(output);
        return;
      }
      // The output keeps its place (its message id is its index) while its value waits for the registry.
      const filled = encoded.value.then(fill, (err) => {
        throw asOutputInvalid(target, err);
      });
      filled.catch(() => undefined); // the call's failure once awaited (the handler may throw before that)
      waiting.push(filled);
      emitted.push(output);
    },
  };
}
