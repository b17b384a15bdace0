import { Logger } from '@nestjs/common';
import { stepClock, type UnitSteps } from './step-log';
import type { KafkaMessage } from '../kafkajs';
import type { DatabasePort, DatabaseSession } from '../database/database.port';
import { lentFor, refuseLentTransactions } from '../database/lent-database';
import { DecodeError } from '../errors/decode.error';
import { HandlerTimeoutError } from '../errors/handler-timeout.error';
import { EventValidationError } from '../errors/event-validation.error';
import { OutputInvalidError } from '../errors/output-invalid.error';
import { RetriableValidationError } from '../errors/retriable-validation.error';
import { Claim, InboxCompletion, InboxRepository, InboxStatus, keyOf, RecordedFailure } from '../inbox/inbox.repository';
import { fromRecordedOutput, OutputRecord, RecordedOutput, toRecordedOutput } from './output-record';
import type { RecordInfo } from '../interfaces/record-info.interface';
import { DEAD_LETTER_HEADERS } from '../kafka-exactly-once.constants';
import { historyPair, mayRetryLater, retryOrigin, tierHeaders, type RetryOrigin } from '../retry/retry-tiers';
import type { HandlerDefinition } from './handler-definition';
import type { ResolvedOptions } from '../options/resolved-options';
import type { SchemaRegistry } from '../formats/avro/schema-registry';
import type { AmbientTransactions } from '../transaction/ambient-transaction';
import { KeyUnresolvedError, OrderingKeyId, orderingKeyBytes, orderingKeyOf } from '../parking/ordering-key';
import { ParkingRepository } from '../parking/parking.repository';
import type { PartitionProducer } from '../transaction/partition-producer';
import { commitChecked, isBusy, pgClientOf, queryWithin, refuseLateStatements, releaseClean, wrapQuery } from './clean-release';
import { failedInAbortedTransaction, isConnectionFault, isFencedError, isOutputTooLarge, isValidationRefusal } from './error-classification';
import type { FaultInjector } from './fault-injector';
import { BatchedInvocation, Invocation, type InvocationDeps, invokeBatchHandler, invokeHandler, OptimisticInvocationFailed, whileHeartbeating } from './handler-invocation';
import type { KafkaExactlyOnceMetrics } from '../metrics/kafka-exactly-once.metrics';
import type { KafkaExactlyOnceTracing } from '../tracing/kafka-exactly-once.tracing';
import { KeyLanes } from './key-lanes';
import { headerPairs, MessageHeaderReader, outputSize, textHeaderPairs, textHeaders, toProduceRequests } from './record-headers';
import { RecordIdentity, storableText } from './record-identity';
import { UnitOfWorkStateMachine } from './unit-of-work.state';
import { DeadlineExceeded, withDeadline } from './deadline';
import type { DeliveredOutputs } from './delivered-outputs';
import { UnitReading } from './record-reading';

/** A record of the chunk with the identity the inbox knows it by. */
export interface ChunkRecord {
  message: KafkaMessage;
  offset: string;
  id: RecordIdentity;
}

/** Why a record went to the dead-letter topic (header `dlq-reason`). */
export type DeadLetterReason =
  | 'decode-failed'
  | 'unknown-schema'
  | 'handler-failed'
  | 'validation-failed'
  /** The handler emitted an event the library cannot write (invalid for its topic's schema, a value its format refuses). */
  | 'output-invalid'
  | 'output-too-large'
  /** @OrderedEvent: an earlier record of the same ordering key is parked; this one waits behind it. */
  | 'key-parked'
  /** @OrderedEvent: the key function threw or returned nothing usable. */
  | 'key-unresolved';

/** What an @OrderedEvent unit of work learned about a claimed record before handling any. */
interface OrderingPrep {
  event?: unknown;
  decodeError?: unknown;
  /** The reads the decode error took (a validator that could not decide, asked again). */
  readAttempts?: number;
  key?: OrderingKeyId;
  keyError?: unknown;
}

export interface UnitOfWorkStats {
  handled: number;
  replayed: number;
  duplicates: number;
  deadLettered: number;
  /** Moved to a retry tier. */
  retried: number;
  /** Handler calls that failed (attempts retried in place included; an attempt carried from the optimistic run too). */
  failedCalls: number;
}

export type UnitOfWorkOutcome =
  | { kind: 'committed'; lastOffset: string; count: number; stats: UnitOfWorkStats; timings: { postgresCommitMs: number; kafkaCommitMs: number } }
  | { kind: 'aborted' | 'outcome-unknown' | 'fenced'; error: unknown }
  /**
   * Run without savepoints, a record failed: nothing of the unit is kept; run it again with `careful`. `carried`:
   * the record whose handler failed, when that failure counts as its first attempt in the careful run.
   */
  | { kind: 'run-carefully'; error: unknown; carried?: CarriedFailure };

/** A record's failed first attempt in an optimistic run, carried into the careful run (see CarriedAttempt). */
export interface CarriedFailure {
  offset: string;
  error: unknown;
}

export interface UnitOfWorkDeps {
  dataSource: DatabasePort;
  inbox: InboxRepository;
  producer: PartitionProducer;
  handler: HandlerDefinition;
  registry: SchemaRegistry;
  options: ResolvedOptions;
  faults: FaultInjector;
  topic: string;
  partition: number;
  /** `max.message.bytes` of the topics outputs and dead letters go to, when known. */
  topicLimits: ReadonlyMap<string, number>;
  /** Keeps the group membership alive during long retries (errors are ignored here). */
  heartbeat: () => Promise<void>;
  /** Where the records come from: 0 the handler's topic, n its retry tier n. */
  stage?: number;
  /** Called once per record moved to a retry tier, after its unit of work committed. */
  onRetry?: (record: ChunkRecord, tier: number, error: RecordedFailure) => void;
  /** Called once per dead letter, after its unit of work committed. */
  onDeadLetter?: (record: ChunkRecord, reason: DeadLetterReason, error: RecordedFailure, parked?: { key: string; parkedNow: boolean }) => void;
  parking?: ParkingRepository;
  /** Handler calls are timed here (kafka_eo_handler_seconds). */
  metrics?: KafkaExactlyOnceMetrics;
  tracing?: KafkaExactlyOnceTracing;
  /**
   * Each handler attempt behind a SAVEPOINT, with the handler's retries in place. Without (the default), the
   * handlers run back to back and the first failure makes the whole unit run again carefully (`run-carefully`).
   */
  careful?: boolean;
  /** Careful run only: this record's first attempt already failed in the optimistic run; it is not made again. */
  carried?: CarriedFailure;
  /** The application's @nestjs-cls/transactional, lent the unit's transaction during each handler call. */
  ambient?: AmbientTransactions;
  /** After the library aborted a hanging transaction of the partition's producer: outputs a replay does not send again (read in the unit's transaction). */
  delivered?: DeliveredOutputs;
  /** When each step ended (operations.stepLog): filled in as the unit goes. */
  steps?: UnitSteps;
}

interface HandledRecord {
  status: InboxStatus;
  attempts: number;
  outputs: OutputRecord[];
  deadLetter?: { reason: DeadLetterReason; error: RecordedFailure; parked?: { key: string; parkedNow: boolean } };
  /** Moved to this retry tier. */
  retried?: { tier: number; error: RecordedFailure };
}

/** A unit of work's key lanes: `run` starts a record in its key's lane, `settle` waits for all of them. */
interface KeyLanesRun {
  /** Undefined: not started, the unit's time cap had passed. */
  run(record: ChunkRecord, claim: Claim): Promise<HandledRecord | undefined>;
  /** Starts no further record (the unit is failing). */
  abort(): void;
  /** Waits until every started record has settled; throws the first failure. */
  settle(): Promise<void>;
}

/** A record of a key lane not started because an earlier record of the unit failed (the unit runs again). */
class LaneSkipped extends Error {}

/** A handler in key lanes tried to open a transaction of its own (the unit runs again without lanes). */
export class TransactionInLanesError extends Error {
  constructor(handler: string) {
    super(`${handler} runs in key lanes (@OrderedEvent({ lanes })), where a handler cannot open a transaction of its own; ctx.manager is already in the unit's transaction`);
    this.name = 'TransactionInLanesError';
  }
}

/** Handlers already warned that they open transactions in key lanes (once per handler and process). */
const warnedTransactionInLanes = new WeakSet<object>();

/** Handlers already warned that an ordering key differs from the record key (once per handler and process). */
const warnedMismatch = new WeakSet<object>();

/**
 * A statement of the library's own (claim, inbox bookkeeping) failed. No record's content can make them fail
 * (ids are digests, bytes are base64), so this is the database's or the schema's fault (a missing migration,
 * permissions): an infrastructure fault, retried and shown in health, never blamed on a record.
 */
export class InboxStatementError extends Error {
  constructor(what: string, cause: unknown) {
    super(`${what} failed: ${(cause as Error)?.message ?? cause}`, { cause });
    this.name = 'InboxStatementError';
  }
}

/** A statement of the library's own; it is given up after `timeoutMs` (a server that no longer answers). */
async function ownStatement<T>(what: string, statement: () => Promise<T>, timeoutMs: number): Promise<T> {
  try {
    return await withDeadline(statement(), timeoutMs, 'PostgreSQL');
  } catch (err) {
    throw new InboxStatementError(what, err);
  }
}

/**
 * The settings of a unit of work's session, in one round trip (numbers from the resolved options, no parameters:
 * the simple query protocol): how long a claim waits for another session's row locks, how long any statement may
 * run, and how long the session may sit idle inside its transaction.
 */
export function unitSessionSettings(options: ResolvedOptions): string {
  const { lockTimeoutMs, statementTimeoutMs, idleInTransactionTimeoutMs } = options.inbox;
  return `SET LOCAL lock_timeout = '${lockTimeoutMs}ms'; SET LOCAL statement_timeout = '${statementTimeoutMs}ms'; SET LOCAL idle_in_transaction_session_timeout = '${idleInTransactionTimeoutMs}ms'`;
}

/** An error as recorded on the inbox and in dead-letter headers: text that PostgreSQL and Kafka can hold. */
export function describeFailure(error: unknown, reason: string): RecordedFailure {
  const err = error instanceof Error ? error : new Error(String(error));
  return {
    name: storableText(err.name || err.constructor?.name || 'Error', 200),
    message: storableText(withCause(err), 2000),
    stack: storableText(err.stack ?? '', 4000),
    reason,
  };
}

/**
 * An error's message with what it wraps, when the message does not say it already: a data layer's error often
 * names only the statement ("Failed query: ...") and keeps the reason PostgreSQL or the library gave as its cause.
 */
function withCause(err: Error): string {
  const message = err.message ?? '';
  const cause = (err as { cause?: unknown }).cause;
  if (!(cause instanceof Error) || !cause.message || message.includes(cause.message)) return message;
  return `${message} (caused by ${cause.name || 'Error'}: ${cause.message})`;
}

/** The dead-letter reason an error stands for. */
export function reasonOf(error: unknown): DeadLetterReason {
  if (error instanceof DecodeError) return error.kind === 'unknown-schema' ? 'unknown-schema' : 'decode-failed';
  if (error instanceof OutputInvalidError) return 'output-invalid';
  if (error instanceof EventValidationError || isValidationRefusal(error)) return 'validation-failed';
  if (error instanceof KeyUnresolvedError) return 'key-unresolved';
  if (isOutputTooLarge(error)) return 'output-too-large';
  return 'handler-failed';
}

/**
 * One chunk of consecutive records of one partition, processed by the protocol of docs/protocol.md: claim all
 * records in one statement, handle each newly claimed record in offset order (a SAVEPOINT isolates a failing
 * attempt), replay the recorded outputs of a record whose earlier Kafka transaction did not commit, skip
 * duplicates, then commit PostgreSQL first and the Kafka transaction (outputs + offsets) second. A record
 * that has already failed `isolation.maxFailures` units of work alone is dead-lettered without its handler.
 */
export class UnitOfWork {
  private readonly logger = new Logger(UnitOfWork.name);
  private readonly sm = new UnitOfWorkStateMachine();
  private readonly stats: UnitOfWorkStats = { handled: 0, replayed: 0, duplicates: 0, deadLettered: 0, retried: 0, failedCalls: 0 };
  private readonly moves: Array<{ record: ChunkRecord; tier: number; error: RecordedFailure }> = [];
  private readonly deadLetters: Array<{ record: ChunkRecord; reason: DeadLetterReason; error: RecordedFailure; parked?: { key: string; parkedNow: boolean } }> = [];
  /** @OrderedEvent only: each claimed record's decoded event and ordering key, by offset. */
  private prepared?: Map<string, OrderingPrep>;
  /** @OrderedEvent only: the parked keys among the chunk's, and those this unit parks. */
  private readonly parkedKeys = new Set<string>();
  /** A batch handler run optimistically: the events it gets in one call once every record has been seen. */
  private batch?: BatchedInvocation[];
  /** Each record's value decoded once in this unit, then validated. */
  private readonly reading: UnitReading;

  constructor(
    private readonly deps: UnitOfWorkDeps,
    private readonly records: ChunkRecord[],
  ) {
    this.reading = new UnitReading(deps, this.logger);
  }

  /** A handler overran its deadline and may still use the unit's connection: it is closed, not reused. */
  private tainted = false;

  get state() {
    return this.sm.state;
  }

  /** A statement of the library's own, given up a second after the server's statement_timeout would end it. */
  private own<T>(what: string, statement: () => Promise<T>): Promise<T> {
    return ownStatement(what, statement, this.deps.options.inbox.statementTimeoutMs + 1000);
  }

  /** Whether PostgreSQL answers at all (a fresh connection, a short deadline): tells a slow handler from a dead server. */
  private databaseAnswers(): Promise<boolean> {
    return queryWithin(this.deps.dataSource, 'SELECT 1', [], 2000).then(
      () => true,
      () => false,
    );
  }

  /** Notes when a step ended, when the unit's steps are logged. */
  private step(name: Exclude<keyof UnitSteps, 'fetched' | 'started'>): void {
    if (this.deps.steps) this.deps.steps[name] = stepClock();
  }

  async run(): Promise<UnitOfWorkOutcome> {
    const { dataSource, inbox, producer, options, faults, topic, partition } = this.deps;
    const group = options.groupId;
    let runner: DatabaseSession | undefined;
    let lanes: KeyLanesRun | undefined;
    try {
      // The writer schemas of the records in the Schema Registry's framing, before any transaction: a registry
      // that does not answer fails the unit as an infrastructure fault (retried; nothing dead-lettered).
      await this.deps.registry.remote?.prefetch(this.records.map((r) => r.message.value), `${topic}[${partition}]`);
      // Records without a message id whose handler names their event's key are claimed by that key.
      this.reading.identify(this.records);
      this.sm.transitionTo('claiming');
      const db = (runner = dataSource.createQueryRunner());
      const requests = this.records.map((r) => ({ ...r.id, offset: r.offset }));
      const { claims: claimed, unit } = await this.own('the inbox claim', async () => {
        await db.connect();
        this.unguard = refuseLateStatements(db);
        await db.startTransaction();
        // One round trip for both (numbers from the resolved options, no parameters: the simple query protocol).
        await db.query(unitSessionSettings(options));
        return inbox.claim(db, group, topic, partition, requests);
      });
      this.step('claimed');
      const claimedHere = (r: ChunkRecord) => claimed.get(keyOf(r.id))?.offset === r.offset;
      // The committed rows of the records not claimed now. A record whose id this claim took under another offset
      // (the same id twice in the chunk) is a duplicate of that one: its row is this unit's own, not looked up.
      // Only a row of that very record (a replay) has its outputs read: a duplicate's are never needed.
      const unclaimed = this.records.filter((r) => !claimed.has(keyOf(r.id))).map((r) => ({ ...r.id, offset: r.offset }));
      const existing = await this.own('reading the inbox', () => inbox.find(db, group, unclaimed, { topic, partition }));
      if (this.deps.handler.ordering) await this.prepareOrdering(db, this.records.filter(claimedHere));

      this.sm.transitionTo('handling');
      if (this.deps.handler.invokeBatch && !this.deps.careful) this.batch = [];
      // Each record's outputs in offset order; a batched event's list is filled when the batch handler runs.
      const outputLists: OutputRecord[][] = [];
      // Records whose rows the claim wrote as they ended (processed, one attempt): their outputs go in the unit's
      // one row. The others (another outcome, more attempts, a row taken over) are completed row by row.
      const plain: Array<{ offset: string; outputs: OutputRecord[] }> = [];
      const completions: InboxCompletion[] = [];
      const started = Date.now();
      const middle = Math.floor((this.records.length - 1) / 2);
      const done = new Set<string>();
      // @OrderedEvent({ lanes }) run optimistically: the records of different ordering keys at the same time.
      lanes = this.lanes(runner, started);
      if (!lanes && !this.batch && !this.deps.careful) this.countStatements(runner);
      // Each record's place in the unit, in offset order: handled here (undefined: a record of key lanes not
      // started before the time cap), the outputs of an earlier delivery, or a duplicate.
      const slots: Array<{ index: number } & ({ record: ChunkRecord; claim: Claim; handled: Promise<HandledRecord | undefined> } | { outputs: OutputRecord[] } | { duplicate: true })> = [];
      let count = 0;
      for (const [index, record] of this.records.entries()) {
        const key = keyOf(record.id);
        const claim = claimed.get(key);
        if (claim && claim.offset === record.offset && !done.has(key)) {
          done.add(key);
          const handled = lanes ? lanes.run(record, claim) : this.handleClaimed(runner, record, claim);
          if (!lanes) await handled; // one after the other: the time cap is checked between records
          slots.push({ index, record, claim, handled });
        } else {
          // Claimed before: by an earlier delivery of this very record whose Kafka transaction did not commit
          // (same coordinates: re-send what it emitted), or it is a duplicate publish (other coordinates: skip).
          const row = existing.get(key);
          if (claim) {
            // The same message id earlier in this very chunk: a duplicate publish.
            slots.push({ index, duplicate: true });
          } else if (row && row.status === 'claimed') {
            // A claim committed without its handling can only come from a bug; never treat it as done.
            throw new Error(`inbox row of message ${record.id.displayId} is claimed but was never handled`);
          } else if (row && row.topic === topic && row.partition === partition && row.offset === record.offset) {
            slots.push({ index, outputs: row.outputs });
          } else {
            slots.push({ index, duplicate: true });
          }
        }
        count = index + 1;
        if (this.batch || lanes) continue; // all at once: no time cap between records
        if (index === middle) faults.reach('mid-chunk');
        if (Date.now() - started >= options.chunk.maxMillis) break; // time cap: the rest goes to the next chunk
      }
      if (lanes) {
        await lanes.settle();
        faults.reach('mid-chunk');
        // Key lanes cut by the time cap: the unit ends before its first record not started. Records after it that
        // other lanes did handle are recorded in the inbox now; their offsets are not committed, so the next unit
        // fetches them again and sends their recorded outputs, in offset order (a replay).
        for (const slot of slots) {
          if ('record' in slot && (await slot.handled) === undefined) {
            count = slot.index;
            break;
          }
        }
      }
      const batch = this.batch;
      if (batch) {
        const connection = runner;
        if (batch.length > 0) await this.timed(() => invokeBatchHandler(this.invocationDeps(), connection, batch));
        faults.reach('mid-chunk');
      }
      const released: RecordIdentity[] = [];
      for (const slot of slots) {
        const now = slot.index < count; // in this unit's Kafka transaction, offset committed
        if ('duplicate' in slot) {
          if (now) this.stats.duplicates++;
        } else if ('outputs' in slot) {
          if (now) {
            const { delivered } = this.deps;
            outputLists.push(delivered ? await this.own('leaving out outputs already committed', () => delivered.undelivered(db, this.records[slot.index].offset, slot.outputs)) : slot.outputs);
            this.stats.replayed++;
          }
        } else {
          const handled = await slot.handled;
          if (!handled) {
            released.push(slot.record.id);
            continue;
          }
          if (handled.status === 'processed' && handled.attempts === 1 && !slot.claim.takenOver) {
            plain.push({ offset: slot.record.offset, outputs: handled.outputs });
          } else {
            completions.push({
              scope: slot.record.id.scope,
              digest: slot.record.id.digest,
              status: handled.status,
              attempts: handled.attempts,
              outputs: handled.outputs.map(toRecordedOutput),
              deadLetter: handled.deadLetter && { reason: handled.deadLetter.reason, error: handled.deadLetter.error },
            });
          }
          if (now) outputLists.push(handled.outputs);
          if (handled.deadLetter) {
            this.stats.deadLettered++;
            this.deadLetters.push({ record: slot.record, ...handled.deadLetter });
          } else if (handled.retried) {
            this.stats.retried++;
            this.moves.push({ record: slot.record, ...handled.retried });
          } else this.stats.handled++;
        }
      }
      const outputs = outputLists.flat();
      this.step('handled');
      if (count < this.records.length && !lanes) {
        // Cut by the time cap: the records left for the next chunk were not handled.
        released.push(...this.records.slice(count).filter((r) => claimedHere(r) && !done.has(keyOf(r.id))).map((r) => r.id));
      }
      // Give back the claims of the records not handled, which would otherwise commit as handled and be taken for
      // replays.
      if (released.length > 0) await this.own('giving back claims', () => inbox.release(db, group, released, unit));
      // Every claim is accounted for, as handled plainly, completed or given back: a row written as handled at the
      // claim must never commit for a record whose handler did not run.
      // Either failing would be the library's defect, never a record's: as an inbox statement's failure the unit
      // is retried as a whole and the partition waits (shown in health), rather than records being blamed one by one.
      if (plain.length + completions.length + released.length !== claimed.size) {
        throw new InboxStatementError('accounting for the claims', new Error(`unit of work of ${topic}[${partition}]: ${claimed.size} records claimed, ${plain.length} handled plainly, ${completions.length} completed, ${released.length} given back`));
      }
      if (plain.length > 0) {
        if (unit === undefined) throw new InboxStatementError('the claim', new Error(`unit of work of ${topic}[${partition}]: records were claimed as new, but the claim returned no unit id`));
        await this.own('recording the outputs of the unit', () => inbox.recordUnitOutputs(db, group, topic, partition, unit, plain[plain.length - 1].offset, plain));
      }
      await this.own('recording the outcomes in the inbox', () => inbox.complete(db, group, completions));
      this.step('recorded');

      this.sm.transitionTo('producing');
      const txn = await producer.begin();
      // Several requests of one transaction when the outputs are larger than one produce request.
      for (const request of toProduceRequests(outputs, options.outputs.maxRequestBytes, (t) => this.deps.topicLimits.get(t))) await txn.send(request);
      this.step('produced');

      this.sm.transitionTo('committing-db');
      const lastOffset = this.records[count - 1].offset;
      // The consumer offset goes into the Kafka transaction while PostgreSQL commits: like the outputs, it takes
      // effect only with the transaction's commit, which comes after PostgreSQL's (an abort discards it with them).
      const offsetSent = txn.sendOffsets({
        consumerGroupId: group,
        topics: [{ topic, partitions: [{ partition, offset: (BigInt(lastOffset) + 1n).toString() }] }],
      });
      offsetSent.catch(() => undefined); // awaited below, or settled before the unit aborts the transaction
      const postgresCommitStarted = performance.now();
      // A COMMIT that fails (a deferred constraint) is the record's to answer for, as any statement of a handler's
      // transaction; one that gets no answer is the server's (and its outcome unknown: the inbox tells).
      await withDeadline(commitChecked(runner, this.logger), options.inbox.statementTimeoutMs + 1000, 'PostgreSQL (COMMIT)').catch(async (err) => {
        await offsetSent.catch(() => undefined);
        throw err instanceof DeadlineExceeded ? new InboxStatementError('the PostgreSQL commit', err) : err;
      });
      const kafkaCommitStarted = performance.now();
      this.step('pgCommitted');
      this.sm.transitionTo('committing-kafka');
      faults.reach('after-db-commit');
      if (this.moves.length > 0) faults.reach('after-retry-move-db-commit');
      await offsetSent;
      faults.reach('before-kafka-commit');
      await txn.commit();
      this.step('committed');
      this.sm.transitionTo('committed');
      const timings = { postgresCommitMs: kafkaCommitStarted - postgresCommitStarted, kafkaCommitMs: performance.now() - kafkaCommitStarted };
      for (const d of this.deadLetters) this.deps.onDeadLetter?.(d.record, d.reason, d.error, d.parked);
      for (const m of this.moves) this.deps.onRetry?.(m.record, m.tier, m.error);
      return { kind: 'committed', lastOffset, count, stats: this.stats, timings };
    } catch (err) {
      // Never roll back under a lane still using the connection (its statements would run after the rollback).
      lanes?.abort();
      await lanes?.settle().catch(() => undefined);
      // Without savepoints, anything that went wrong while handling (a handler's failure, or a statement of ours
      // in a transaction a handler left aborted) may have been caused by a record: PostgreSQL rolls the unit back
      // (nothing of it was sent to Kafka yet) and it runs again with savepoints, where records fail one by one.
      // (Our own inbox statements count as infrastructure faults, unless what failed them is not: a transaction
      // a handler left aborted fails them, and that is the record's doing.)
      const cause = err instanceof InboxStatementError ? err.cause : err;
      if (cause instanceof HandlerTimeoutError) {
        // Running it again carefully would only overrun again. Unless PostgreSQL itself stopped answering (then it
        // is the infrastructure's fault), the overrun counts for the record.
        // The call may still use its connection: close it now (not at the end), which also frees it for the probe.
        this.tainted = true;
        if (runner) await releaseClean(runner, true);
        runner = undefined;
        if (!(await this.databaseAnswers())) return this.fail(new InboxStatementError('PostgreSQL, asked after a handler overran', cause));
        return this.fail(err);
      }
      if (!this.deps.careful && this.sm.state === 'handling' && !isConnectionFault(cause)) return { kind: 'run-carefully', error: err, carried: this.carriedFailure(err, lanes !== undefined) };
      return this.fail(err);
    } finally {
      this.uncount?.();
      this.unguard?.();
      // A connection goes back to the pool only outside a transaction: rolled back, or destroyed.
      if (runner) await releaseClean(runner, this.tainted);
    }
  }

  /**
   * The failure of an optimistic run that the careful run takes as the failing record's first attempt: one
   * handler call's own failure, made on the state the records before it left (as the careful run will make it
   * again), not in key lanes (where records of other keys ran around it), and not a statement refused because
   * the transaction was aborted already (an earlier record swallowed a failed statement: not this record's doing).
   */
  private carriedFailure(err: unknown, inLanes: boolean): CarriedFailure | undefined {
    if (inLanes || !(err instanceof OptimisticInvocationFailed) || err.offset === undefined) return undefined;
    if (failedInAbortedTransaction(err.cause) || this.failedBeforeCall.has(err.offset)) return undefined;
    return { offset: err.offset, error: err.cause };
  }

  private async fail(error: unknown): Promise<UnitOfWorkOutcome> {
    if (this.sm.databaseMayHaveCommitted) {
      // PostgreSQL holds the work; the Kafka transaction may or may not have committed.
      const kind = isFencedError(error) ? 'fenced' : 'outcome-unknown';
      this.sm.transitionTo(kind);
      return { kind, error };
    }
    this.sm.transitionTo('aborting');
    if (isFencedError(error)) {
      this.sm.transitionTo('fenced');
      return { kind: 'fenced', error };
    }
    // PostgreSQL did not commit, so nothing of this unit is durable. Even if the abort fails, the transaction
    // cannot commit: the consumer always starts a new producer after a failed unit, and its InitProducerId
    // aborts whatever this one left open. The outcome is known: classify by the unit's own error.
    await this.deps.producer.abortQuietly();
    this.sm.transitionTo('aborted');
    return { kind: 'aborted', error };
  }

  private async handleClaimed(runner: DatabaseSession, record: ChunkRecord, claim: Claim): Promise<HandledRecord> {
    const prep = this.prepared?.get(record.offset);
    if (prep) return this.handleOrdered(runner, record, claim, prep);
    const { handler, options } = this.deps;
    if (claim.failures >= options.isolation.maxFailures) return this.failedForNow(record, this.isolatedFailure(claim), claim.failures);
    const read = await this.reading.read(record);
    // A validator that could not decide, asked again until the retry policy was spent: a handler's passing failure.
    if (!read.ok) return read.error instanceof RetriableValidationError ? this.failedForNow(record, describeFailure(read.error, reasonOf(read.error)), read.attempts, read.error) : this.deadLetter(record, describeFailure(read.error, reasonOf(read.error)), 1);
    const result = await this.invoke(runner, record, read.event);
    if (result.ok) return { status: 'processed', attempts: result.attempts, outputs: result.outputs };
    return this.failedForNow(record, describeFailure(result.error, reasonOf(result.error)), result.attempts, result.error);
  }

  /**
   * A record whose attempts here failed: moved to the next retry tier when the handler has one left and the
   * failure may pass (`error` undefined: its units of work failed with it alone), else dead-lettered.
   */
  private failedForNow(record: ChunkRecord, failure: RecordedFailure, attempts: number, error?: unknown): HandledRecord {
    const tiers = this.deps.handler.retryTopics;
    const stage = this.deps.stage ?? 0;
    if (!tiers || stage >= tiers.topics.length || !mayRetryLater(tiers, failure, error)) return this.deadLetter(record, failure, attempts);
    const now = Date.now();
    const where = this.coordinates(record);
    const letter: RecordedOutput = {
      topic: tiers.topics[stage],
      key: record.message.key ? record.message.key.toString('base64') : null,
      value: record.message.value ? record.message.value.toString('base64') : null,
      h: tierHeaders(record.message.headers, stage, where, this.origin(record), attempts, failure, now + tiers.delaysMs[stage], now),
    };
    const limit = this.deps.topicLimits.get(letter.topic);
    if (limit !== undefined && outputSize(letter) > limit) {
      this.logger.error(`${this.where(record)}: with its retry headers it is over ${letter.topic}'s max.message.bytes (${limit}); dead-lettering it instead`);
      return this.deadLetter(record, failure, attempts);
    }
    return { status: 'retrying', attempts, outputs: [fromRecordedOutput(letter)], retried: { tier: stage + 1, error: failure } };
  }

  private coordinates(record: ChunkRecord): RetryOrigin {
    return { topic: this.deps.topic, partition: this.deps.partition, offset: record.offset };
  }

  /** Where the record was first consumed: here, or for a record of a retry tier what its headers say. */
  private origin(record: ChunkRecord): RetryOrigin {
    if (!this.deps.stage) return this.coordinates(record);
    return retryOrigin(record.message.headers, this.deps.handler.topic) ?? this.coordinates(record);
  }

  /**
   * @OrderedEvent: a record of a parked key is parked behind it, unhandled. A record that fails for good is
   * dead-lettered and parks its key, so that no later record of the key overtakes it. A record without an
   * ordering key is dead-lettered (`key-unresolved`) and parks nothing.
   */
  private async handleOrdered(runner: DatabaseSession, record: ChunkRecord, claim: Claim, prep: OrderingPrep): Promise<HandledRecord> {
    const { options } = this.deps;
    if (prep.key && this.parkedKeys.has(prep.key.digest)) {
      const failure = { name: 'KeyParked', message: `ordering key ${prep.key.display} is parked; this record waits for its release`, stack: '', reason: 'key-parked' };
      return this.park(runner, record, prep.key, failure, 0, false);
    }
    let failure: RecordedFailure | undefined;
    let attempts = 1;
    if (claim.failures >= options.isolation.maxFailures) {
      failure = this.isolatedFailure(claim);
      attempts = claim.failures;
    } else if (prep.decodeError !== undefined) {
      failure = describeFailure(prep.decodeError, reasonOf(prep.decodeError));
      attempts = prep.readAttempts ?? 1;
    } else if (prep.keyError !== undefined) {
      return this.deadLetter(record, describeFailure(prep.keyError, 'key-unresolved'), 1);
    } else {
      const result = await this.invoke(runner, record, prep.event);
      if (result.ok) return { status: 'processed', attempts: result.attempts, outputs: result.outputs };
      failure = describeFailure(result.error, reasonOf(result.error));
      attempts = result.attempts;
    }
    if (!prep.key) return this.deadLetter(record, failure, attempts);
    return this.park(runner, record, prep.key, failure, attempts, true);
  }

  /**
   * Key lanes, when the handler asks for them (`@OrderedEvent({ lanes })`) and the unit runs optimistically: a
   * lane per ordering key, so records of different keys are handled at the same time and each key in offset
   * order. While lanes run, the unit's statements go to PostgreSQL one after the other in the order they are
   * issued (a queue of our own: node-postgres's own queue is deprecated), and a handler cannot open a
   * transaction of its own (TypeORM's savepoints of concurrent handlers would interleave). After the first
   * failure no record is started any more; `settle` waits for those in flight (nothing may still use the
   * connection when the unit rolls back) and throws that failure, and the unit runs again carefully, one record
   * after the other.
   */
  private lanes(runner: DatabaseSession, unitStarted: number): KeyLanesRun | undefined {
    const limit = this.deps.handler.ordering?.lanes ?? 1;
    if (limit <= 1 || this.deps.careful || this.batch) return undefined;
    const lanes = new KeyLanes(limit);
    const started: Array<Promise<HandledRecord | undefined>> = [];
    let failure: { error: unknown } | undefined;
    let startedAny = false;
    const restore = this.guardRunnerForLanes(runner);
    return {
      run: (record, claim) => {
        // A record without an ordering key is dead-lettered without its handler: a lane of its own.
        const lane = this.prepared?.get(record.offset)?.key?.digest ?? `offset ${record.offset}`;
        const handled = lanes.run(lane, async () => {
          if (failure) throw new LaneSkipped();
          // The time cap: past chunk.maxMillis no record is started (the first always is: the unit progresses).
          if (startedAny && Date.now() - unitStarted >= this.deps.options.chunk.maxMillis) return undefined;
          startedAny = true;
          try {
            return await this.handleClaimed(runner, record, claim);
          } catch (err) {
            failure ??= { error: err };
            throw err;
          }
        });
        started.push(handled);
        return handled;
      },
      abort: () => {
        failure ??= { error: new LaneSkipped() };
      },
      settle: async () => {
        let results: PromiseSettledResult<HandledRecord | undefined>[];
        try {
          results = await whileHeartbeating(this.deps, () => Promise.allSettled(started));
        } finally {
          restore();
        }
        const errors = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected' && !(r.reason instanceof LaneSkipped)).map((r) => r.reason);
        if (errors.length === 0) return;
        // A lost connection wins (the unit is retried as an infrastructure fault); else the first failure in time
        // (the others may only be "current transaction is aborted" after it).
        const cause = (e: unknown) => (e instanceof OptimisticInvocationFailed ? e.cause : e);
        const error = errors.find((e) => isConnectionFault(cause(e))) ?? (failure && errors.includes(failure.error) ? failure.error : errors[0]);
        if (cause(error) instanceof TransactionInLanesError) this.warnTransactionInLanes();
        throw error;
      },
    };
  }

  /** For the time of the lanes: statements queued in the order issued, and no transaction of a handler's own. */
  private guardRunnerForLanes(runner: DatabaseSession): () => void {
    const guarded = runner as DatabaseSession & Record<'query' | 'startTransaction', unknown>;
    const own = { query: runner.query, startTransaction: runner.startTransaction };
    // One lane: each statement starts when the one before it has settled.
    const statements = new KeyLanes(1);
    guarded.query = (...args: Parameters<DatabaseSession['query']>) => statements.run('statements', () => own.query.apply(runner, args));
    guarded.startTransaction = () => Promise.reject(new TransactionInLanesError(this.deps.handler.name));
    // Other data layers send on the unit's connection itself (node-postgres runs its statements in the order
    // issued): their own transactions are refused there.
    lentFor(this.deps.dataSource, runner);
    refuseLentTransactions(runner, () => new TransactionInLanesError(this.deps.handler.name));
    return () => {
      guarded.query = own.query;
      guarded.startTransaction = own.startTransaction;
      refuseLentTransactions(runner, undefined);
    };
  }

  private warnTransactionInLanes(): void {
    if (warnedTransactionInLanes.has(this.deps.handler)) return;
    warnedTransactionInLanes.add(this.deps.handler);
    this.logger.warn(
      `${this.deps.handler.name} opened a transaction of its own (manager.transaction) in key lanes, which cannot be: each of its units of work that does so runs again one record after the other, without lanes. Use ctx.manager directly (it is already in the unit's transaction), or leave lanes out.`,
    );
  }

  /**
   * Runs the handler for one record; a batch handler run optimistically only takes the event into its batch
   * (it cannot fail here: if the batch call fails, the whole unit runs again carefully, one event at a time).
   */
  private async invoke(runner: DatabaseSession, record: ChunkRecord, event: unknown): Promise<Invocation> {
    const invocation = { info: this.recordInfo(record), id: record.id, headers: new MessageHeaderReader(record.message) };
    if (this.batch) {
      const emitted: OutputRecord[] = [];
      this.batch.push({ record: invocation, event, emitted });
      return { ok: true, attempts: 1, outputs: emitted };
    }
    const carried = this.deps.careful && this.deps.carried?.offset === record.offset ? { error: this.deps.carried.error } : undefined;
    const statementsBefore = this.statements;
    // A transaction an earlier record left failed (it swallowed a failed statement): whatever this call does then
    // is not this record's own doing (carriedFailure).
    if (!this.deps.careful && pgClientOf(runner)?.getTransactionStatus?.() === 'E') this.failedBeforeCall.add(record.offset);
    let result: Invocation;
    try {
      result = await this.timed(() => invokeHandler(this.invocationDeps(), runner, invocation, event, { savepoints: this.deps.careful === true, carried }));
    } catch (err) {
      // Failed without a savepoint. When the call sent no statement on the unit's connection (the common case of a
      // downstream that fails: the call to it comes before the handler's writes), the transaction is exactly as the
      // records before it left it: the unit goes on, this record's further attempts behind savepoints, its failed
      // call counted as attempt 1. Nothing of the unit is rolled back, and no other record is called again.
      if (!(err instanceof OptimisticInvocationFailed) || !this.untouchedSince(runner, statementsBefore)) throw err;
      this.stats.failedCalls++;
      result = await this.timed(() => invokeHandler(this.invocationDeps(), runner, invocation, event, { savepoints: true, carried: { error: err.cause } }));
      this.stats.failedCalls += result.ok ? result.attempts - 2 : result.attempts - 1;
      return result;
    }
    this.stats.failedCalls += result.ok ? result.attempts - 1 : result.attempts;
    return result;
  }

  /** Records whose call (optimistic run) began in a transaction that had failed already. */
  private readonly failedBeforeCall = new Set<string>();

  /** Statements sent on the unit's connection so far (undefined: not counted, see countStatements). */
  private statements?: number;

  /**
   * Counts the statements sent on the unit's connection (TypeORM's EntityManager and repositories, and raw
   * queries, all go through the query runner's `query` and `stream`), so that a handler call that failed without
   * sending any can be told apart: the transaction is untouched by it (invoke). Optimistic units of a handler
   * called record by record only.
   */
  private countStatements(runner: DatabaseSession): void {
    // On the node-postgres client itself: TypeORM's query and stream, and a handler's own use of the client
    // (pg-cursor, COPY streams) all send through its `query`.
    if (!pgClientOf(runner)) return;
    this.statements = 0;
    const count = () => this.statements!++;
    // The client goes back to the pool after the unit: without the count.
    this.uncount = wrapQuery(pgClientOf(runner)!, (own) =>
      function (this: unknown, ...args: unknown[]) {
        count();
        return own.apply(this, args as [string]);
      },
    );
  }

  /** Takes the statement count off the unit's connection (see countStatements). */
  private uncount?: () => void;

  /** Takes the refusal of late statements off the unit's connection (see refuseLateStatements). */
  private unguard?: () => void;

  /**
   * Whether the unit's transaction is as good as before a handler call that failed without a savepoint: the call
   * sent no statement, none of anyone's still waits on the connection, and the transaction has not failed.
   */
  private untouchedSince(runner: DatabaseSession, statementsBefore: number | undefined): boolean {
    const client = pgClientOf(runner);
    if (statementsBefore === undefined || !client || this.statements !== statementsBefore || isBusy(client)) return false;
    return client.getTransactionStatus?.() === 'T';
  }

  private async timed<T>(call: () => Promise<T>): Promise<T> {
    if (!this.deps.metrics) return call();
    const started = performance.now();
    try {
      return await call();
    } finally {
      this.deps.metrics?.handlerTime(this.deps.topic, performance.now() - started);
    }
  }

  /** Dead-letters the record and parks it (with its key, when `parkKey`) in the unit's transaction. */
  private async park(runner: DatabaseSession, record: ChunkRecord, key: OrderingKeyId, failure: RecordedFailure, attempts: number, parkKey: boolean): Promise<HandledRecord> {
    const { options, topic, partition } = this.deps;
    const handled = this.deadLetter(record, failure, attempts, key);
    const parked = {
      topic,
      partition,
      offset: record.offset,
      id: record.id,
      key,
      recordKey: record.message.key ?? null,
      value: record.message.value ?? null,
      headers: headerPairs(record.message.headers),
      timestamp: record.message.timestamp,
      reason: failure.reason,
      error: failure,
    };
    const parking = this.deps.parking!;
    await this.own('parking a record', () => (parkKey ? parking.parkKey(runner, options.groupId, parked) : parking.parkRecord(runner, options.groupId, parked)));
    this.parkedKeys.add(key.digest);
    handled.deadLetter!.parked = { key: key.display, parkedNow: parkKey };
    return handled;
  }

  /** Decodes the claimed records and derives their ordering keys; reads which of those keys are parked. */
  private async prepareOrdering(runner: DatabaseSession, records: ChunkRecord[]): Promise<void> {
    const { handler, options, topic } = this.deps;
    const keyOfEvent = handler.ordering!.key;
    this.prepared = new Map();
    for (const record of records) {
      const prep: OrderingPrep = {};
      const read = await this.reading.read(record);
      if (read.ok) prep.event = read.event;
      else Object.assign(prep, { decodeError: read.error, readAttempts: read.attempts });
      const recordKey = record.message.key && record.message.key.length > 0 ? record.message.key : undefined;
      try {
        if (keyOfEvent && prep.decodeError === undefined) {
          let value;
          try {
            value = keyOfEvent(prep.event);
          } catch (err) {
            throw new KeyUnresolvedError(`the @OrderedEvent key function of ${handler.name} threw: ${(err as Error)?.message ?? err}`, { cause: err });
          }
          prep.key = orderingKeyOf(orderingKeyBytes(value));
          if (recordKey && !prep.key.bytes.equals(recordKey)) this.warnKeyMismatch(record, prep.key);
        } else if (recordKey) {
          // The record key: the ordering key by default, and the best guess for an event that cannot be read.
          prep.key = orderingKeyOf(recordKey);
        } else {
          throw new KeyUnresolvedError('the record has no key, and @OrderedEvent orders by the record key (or the event could not be decoded to derive one)');
        }
      } catch (err) {
        prep.keyError = err;
      }
      this.prepared.set(record.offset, prep);
    }
    const digests = [...this.prepared.values()].flatMap((p) => (p.key ? [p.key.digest] : []));
    const parked = await this.own('reading parked keys', () => this.deps.parking!.parkedAmong(runner, options.groupId, topic, digests));
    for (const digest of parked) this.parkedKeys.add(digest);
  }

  private warnKeyMismatch(record: ChunkRecord, key: OrderingKeyId): void {
    if (warnedMismatch.has(this.deps.handler)) return;
    warnedMismatch.add(this.deps.handler);
    this.logger.warn(
      `${this.where(record)}: its ordering key (${key.display}) is not its record key; records of one ordering key on different partitions are not ordered against each other. Key records by the ordering key when producing to keep them on one partition.`,
    );
  }

  private isolatedFailure(claim: Claim): RecordedFailure {
    // Its units of work failed this often with the record alone: the record is the cause.
    return claim.lastError ?? describeFailure(new Error('unit of work failed with this record alone'), 'handler-failed');
  }

  /** What each handler call of the unit needs besides its record: one object for the unit's calls. */
  private invocationDeps(): InvocationDeps {
    if (this.invocation) return this.invocation;
    const { dataSource: database, handler, registry, options, topicLimits, heartbeat, tracing, ambient } = this.deps;
    return (this.invocation = { database, handler, registry, options, topicLimits, heartbeat, logger: this.logger, tracing, ambient });
  }

  private invocation: InvocationDeps | undefined;

  private recordInfo(record: ChunkRecord): RecordInfo {
    const info = {
      topic: this.deps.topic,
      partition: this.deps.partition,
      offset: record.offset,
      key: record.message.key?.toString() ?? null,
      messageId: record.id.displayId,
      timestamp: record.message.timestamp,
      schema: this.reading.schemaOf(record),
    } as RecordInfo;
    // The headers as text only when a handler (or tracing) reads them: most handlers never do.
    let headers: Record<string, string> | undefined;
    Object.defineProperty(info, 'headers', {
      enumerable: true,
      configurable: true,
      get: () => (headers ??= textHeaders(record.message)),
      set: (value: Record<string, string>) => (headers = value),
    });
    return info;
  }

  private deadLetter(record: ChunkRecord, failure: RecordedFailure, attempts: number, parkedKey?: OrderingKeyId): HandledRecord {
    const { options, handler } = this.deps;
    const reason = failure.reason as DeadLetterReason;
    // From a retry tier: the topic's dead-letter topic, naming where the record was first consumed, with the
    // history of every stage (the tiers' entries are on the record already; this one is added).
    const origin = this.origin(record);
    const headers = [
      ...headerPairs(record.message.headers),
      ...(this.deps.stage ? [historyPair(this.deps.stage, this.coordinates(record), attempts, failure, Date.now())] : []),
      ...textHeaderPairs({
        [DEAD_LETTER_HEADERS.originalTopic]: origin.topic,
        [DEAD_LETTER_HEADERS.originalPartition]: String(origin.partition),
        [DEAD_LETTER_HEADERS.originalOffset]: origin.offset,
        [DEAD_LETTER_HEADERS.consumerGroup]: options.groupId,
        [DEAD_LETTER_HEADERS.errorClass]: failure.name,
        [DEAD_LETTER_HEADERS.errorMessage]: failure.message,
        [DEAD_LETTER_HEADERS.errorStack]: failure.stack,
        [DEAD_LETTER_HEADERS.attempts]: String(attempts),
        [DEAD_LETTER_HEADERS.reason]: reason,
        ...(parkedKey ? { [DEAD_LETTER_HEADERS.parkedKey]: parkedKey.display } : {}),
      }),
    ];
    const letter: RecordedOutput = {
      topic: `${handler.topic}${options.deadLetter.topicSuffix}`,
      key: record.message.key ? record.message.key.toString('base64') : null,
      value: record.message.value ? record.message.value.toString('base64') : null,
      h: headers,
    };
    const limit = this.deps.topicLimits.get(letter.topic);
    if (limit !== undefined && outputSize(letter) > limit) {
      // It would be refused, and the partition would wait behind it for good. The original stays readable at
      // its coordinates (dlq-original-*) for the input topic's retention; the dead letter says so.
      this.logger.error(`${this.where(record)}: its dead letter is over ${letter.topic}'s max.message.bytes (${limit}); sending it without the value`);
      letter.value = null;
      letter.h = [...headers, ...textHeaderPairs({ [DEAD_LETTER_HEADERS.valueOmitted]: `${record.message.value?.length ?? 0} bytes, over max.message.bytes of ${letter.topic}` })];
    }
    return {
      // A record of a schema deployed later can be republished and handled then; any other dead letter is final.
      status: parkedKey ? 'parked' : reason === 'unknown-schema' ? 'deferred' : 'dead-lettered',
      attempts,
      deadLetter: { reason, error: failure },
      outputs: [fromRecordedOutput(letter)],
    };
  }

  private where(record: ChunkRecord): string {
    return `${this.deps.topic}[${this.deps.partition}]@${record.offset} (message ${record.id.displayId})`;
  }
}
