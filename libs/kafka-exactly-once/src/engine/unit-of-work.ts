import { Logger } from '@nestjs/common';
import type { IHeaders, KafkaMessage, Message, Transaction } from 'kafkajs';
import type { DataSource, QueryRunner } from 'typeorm';
import { EventValidationError } from '../errors/event-validation.error';
import { MissingKeyError } from '../errors/missing-key.error';
import { UndeclaredTopicError } from '../errors/undeclared-topic.error';
import { InboxCompletion, InboxRepository, InboxStatus, RecordedOutput } from '../inbox/inbox.repository';
import type { EmitOptions, EventContext, RecordInfo } from '../interfaces/event-context.interface';
import { DEAD_LETTER_HEADERS, HEADERS } from '../kafka-exactly-once.constants';
import type { HandlerDefinition } from '../kafka-exactly-once.explorer';
import type { ResolvedOptions } from '../options/resolved-options';
import type { SchemaRegistry } from '../serde/schema-registry';
import { decodeSingleObject, encodeSingleObject } from '../serde/single-object.codec';
import type { PartitionProducer } from '../transaction/partition-producer';
import { isFencedError, isInfrastructureError, isRetriableHandlerError } from './error-classification';
import type { FaultInjector } from './fault-injector';
import { outputMessageId } from './message-ids';
import { retryDelay } from './retry-policy';
import { pauseWithHeartbeats } from './sleep';
import { UnitOfWorkStateMachine } from './unit-of-work.state';

/** A record of the chunk with the message id the inbox knows it by. */
export interface ChunkRecord {
  message: KafkaMessage;
  offset: string;
  /** The `message-id` header, or `topic/partition/offset` when there is none. */
  messageId: string;
}

export type DeadLetterReason = 'decode-failed' | 'handler-failed' | 'validation-failed';

export interface UnitOfWorkStats {
  handled: number;
  replayed: number;
  duplicates: number;
  deadLettered: number;
}

export type UnitOfWorkOutcome =
  | { kind: 'committed'; lastOffset: string; count: number; stats: UnitOfWorkStats }
  | { kind: 'aborted' | 'outcome-unknown' | 'fenced'; error: unknown };

export interface UnitOfWorkDeps {
  dataSource: DataSource;
  inbox: InboxRepository;
  producer: PartitionProducer;
  handler: HandlerDefinition;
  registry: SchemaRegistry;
  options: ResolvedOptions;
  faults: FaultInjector;
  topic: string;
  partition: number;
  /** Keeps the group membership alive during long retries (errors are ignored here). */
  heartbeat: () => Promise<void>;
}

interface HandledRecord {
  status: InboxStatus;
  attempts: number;
  outputs: RecordedOutput[];
}

const SAVEPOINT = 'kafka_eo_record';

/** The message id of a record: its `message-id` header, else its coordinates. */
export function messageIdOf(topic: string, partition: number, message: KafkaMessage): string {
  const header = headerString(message.headers?.[HEADERS.messageId]);
  return header && header.length > 0 ? header : `${topic}/${partition}/${message.offset}`;
}

function headerString(value: IHeaders[string]): string | undefined {
  if (value === undefined) return undefined;
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined ? undefined : first.toString();
}

function headersOf(message: KafkaMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    const text = headerString(value);
    if (text !== undefined) headers[name] = text;
  }
  return headers;
}

/**
 * One chunk of consecutive records of one partition, processed by the protocol of DESIGN §2: claim all
 * message ids in one statement, handle each newly claimed record in offset order (a SAVEPOINT isolates a
 * failing record), replay the recorded outputs of a record whose earlier Kafka transaction did not commit,
 * skip duplicates, then commit PostgreSQL first and the Kafka transaction (outputs + offsets) second.
 */
export class UnitOfWork {
  private readonly logger = new Logger(UnitOfWork.name);
  private readonly sm = new UnitOfWorkStateMachine();
  private readonly stats: UnitOfWorkStats = { handled: 0, replayed: 0, duplicates: 0, deadLettered: 0 };

  constructor(
    private readonly deps: UnitOfWorkDeps,
    private readonly records: ChunkRecord[],
  ) {}

  get state() {
    return this.sm.state;
  }

  async run(): Promise<UnitOfWorkOutcome> {
    const { dataSource, inbox, producer, options, faults, topic, partition } = this.deps;
    const group = options.groupId;
    let runner: QueryRunner | undefined;
    try {
      this.sm.transitionTo('claiming');
      runner = dataSource.createQueryRunner();
      await runner.connect();
      await runner.startTransaction();
      await runner.query(`SET LOCAL lock_timeout = '${options.inbox.lockTimeoutMs}ms'`);
      await runner.query(`SET LOCAL idle_in_transaction_session_timeout = '${options.inbox.idleInTransactionTimeoutMs}ms'`);
      const claimed = await inbox.claim(runner, group, topic, partition, this.records);
      const unclaimed = [...new Set(this.records.filter((r) => claimed.get(r.messageId) !== r.offset).map((r) => r.messageId))];
      const existing = await inbox.find(runner, group, unclaimed);

      this.sm.transitionTo('handling');
      const outputs: RecordedOutput[] = [];
      const completions: InboxCompletion[] = [];
      const started = Date.now();
      const middle = Math.floor((this.records.length - 1) / 2);
      let count = 0;
      for (const [index, record] of this.records.entries()) {
        if (claimed.get(record.messageId) === record.offset) {
          const handled = await this.handleClaimed(runner, record);
          completions.push({ messageId: record.messageId, ...handled });
          outputs.push(...handled.outputs);
          if (handled.status === 'dead-lettered') this.stats.deadLettered++;
          else this.stats.handled++;
        } else {
          // Claimed before: by an earlier delivery of this very record whose Kafka transaction did not commit
          // (same coordinates: re-send what it emitted), or it is a duplicate publish (other coordinates: skip).
          const row = existing.get(record.messageId);
          if (claimed.has(record.messageId)) {
            // The same message id earlier in this very chunk: a duplicate publish.
            this.stats.duplicates++;
          } else if (row && row.status === 'claimed') {
            // A claim committed without its handling can only come from a bug; never treat it as done.
            throw new Error(`inbox row of message ${record.messageId} is claimed but was never handled`);
          } else if (row && row.topic === topic && row.partition === partition && row.offset === record.offset) {
            outputs.push(...row.outputs);
            this.stats.replayed++;
          } else {
            this.stats.duplicates++;
          }
        }
        count = index + 1;
        if (index === middle) faults.reach('mid-chunk');
        if (Date.now() - started >= options.chunk.maxMillis) break; // time cap: the rest goes to the next chunk
      }
      if (count < this.records.length) {
        // Cut by the time cap: release the claims of the records left for the next chunk, which would
        // otherwise commit as claimed-but-never-handled and be taken for replays.
        const released = this.records.slice(count).filter((r) => claimed.get(r.messageId) === r.offset);
        await inbox.release(runner, group, released.map((r) => r.messageId));
      }
      await inbox.complete(runner, group, completions);

      this.sm.transitionTo('producing');
      const txn: Transaction = await producer.begin();
      if (outputs.length > 0) await txn.sendBatch({ topicMessages: toTopicMessages(outputs), acks: -1 });

      this.sm.transitionTo('committing-db');
      await runner.commitTransaction();
      this.sm.transitionTo('committing-kafka');
      faults.reach('after-db-commit');
      const lastOffset = this.records[count - 1].offset;
      await txn.sendOffsets({
        consumerGroupId: group,
        topics: [{ topic, partitions: [{ partition, offset: (BigInt(lastOffset) + 1n).toString() }] }],
      });
      faults.reach('before-kafka-commit');
      await txn.commit();
      this.sm.transitionTo('committed');
      return { kind: 'committed', lastOffset, count, stats: this.stats };
    } catch (err) {
      return this.fail(err, runner);
    } finally {
      await runner?.release().catch(() => undefined);
    }
  }

  private async fail(error: unknown, runner: QueryRunner | undefined): Promise<UnitOfWorkOutcome> {
    if (this.sm.databaseMayHaveCommitted) {
      // PostgreSQL holds the work; the Kafka transaction may or may not have committed.
      const kind = isFencedError(error) ? 'fenced' : 'outcome-unknown';
      this.sm.transitionTo(kind);
      return { kind, error };
    }
    if (runner?.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
    this.sm.transitionTo('aborting');
    if (isFencedError(error)) {
      this.sm.transitionTo('fenced');
      return { kind: 'fenced', error };
    }
    const aborted = await this.deps.producer.abortQuietly();
    this.sm.transitionTo(aborted ? 'aborted' : 'outcome-unknown');
    return { kind: aborted ? 'aborted' : 'outcome-unknown', error };
  }

  private async handleClaimed(runner: QueryRunner, record: ChunkRecord): Promise<HandledRecord> {
    const { handler, registry } = this.deps;
    let event: unknown;
    try {
      event = decodeSingleObject(registry, handler.schema, record.message.value);
    } catch (err) {
      return this.deadLetter(record, err, 'decode-failed', 1);
    }
    for (let attempt = 1; ; attempt++) {
      await runner.query(`SAVEPOINT ${SAVEPOINT}`);
      const emitted: RecordedOutput[] = [];
      try {
        await handler.invoke(event, this.context(runner, record, attempt, emitted));
        await runner.query(`RELEASE SAVEPOINT ${SAVEPOINT}`);
        return { status: 'processed', attempts: attempt, outputs: emitted };
      } catch (err) {
        // If the connection is gone this throws, and the whole unit of work is rolled back and retried.
        await runner.query(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`);
        if (isInfrastructureError(err)) throw err;
        if (!isRetriableHandlerError(err) || attempt >= handler.retry.attempts) {
          return this.deadLetter(record, err, err instanceof EventValidationError ? 'validation-failed' : 'handler-failed', attempt);
        }
        this.logger.warn(`${handler.name} failed on ${this.where(record)} (attempt ${attempt}/${handler.retry.attempts}): ${(err as Error)?.message}`);
        await pauseWithHeartbeats(retryDelay(handler.retry, attempt), this.deps.options.consumer.heartbeatInterval, this.deps.heartbeat);
      }
    }
  }

  private context(runner: QueryRunner, record: ChunkRecord, attempt: number, emitted: RecordedOutput[]): EventContext {
    const { options, registry, topic, partition } = this.deps;
    const message: RecordInfo = {
      topic,
      partition,
      offset: record.offset,
      key: record.message.key?.toString() ?? null,
      headers: headersOf(record.message),
      messageId: record.messageId,
      timestamp: record.message.timestamp,
    };
    return {
      manager: runner.manager,
      message,
      attempt,
      emit: (target: string, event: unknown, emitOptions: EmitOptions = {}) => {
        const declared = options.topics[target];
        if (!declared) throw new UndeclaredTopicError(target);
        const key = emitOptions.key ?? declared.key?.(event);
        if (typeof key !== 'string' || key === '') throw new MissingKeyError(target);
        const schema = registry.current(declared.schema);
        const value = encodeSingleObject(schema, event);
        emitted.push({
          topic: `${options.topicPrefix}${target}`,
          key: Buffer.from(key).toString('base64'),
          value: value.toString('base64'),
          headers: {
            ...emitOptions.headers,
            [HEADERS.messageId]: outputMessageId(options.groupId, record.messageId, emitted.length),
            [HEADERS.eventType]: schema.name,
            [HEADERS.causationId]: record.messageId,
          },
        });
      },
    };
  }

  private deadLetter(record: ChunkRecord, error: unknown, reason: DeadLetterReason, attempts: number): HandledRecord {
    const { options, topic, partition, handler } = this.deps;
    const err = error instanceof Error ? error : new Error(String(error));
    this.logger.error(`${handler.name}: dead-lettering ${this.where(record)} (${reason} after ${attempts} attempt(s)): ${err.message}`);
    const headers: Record<string, string> = {
      ...headersOf(record.message),
      [HEADERS.messageId]: record.messageId,
      [DEAD_LETTER_HEADERS.originalTopic]: topic,
      [DEAD_LETTER_HEADERS.originalPartition]: String(partition),
      [DEAD_LETTER_HEADERS.originalOffset]: record.offset,
      [DEAD_LETTER_HEADERS.consumerGroup]: options.groupId,
      [DEAD_LETTER_HEADERS.errorClass]: err.name || err.constructor?.name || 'Error',
      [DEAD_LETTER_HEADERS.errorMessage]: err.message.slice(0, 2000),
      [DEAD_LETTER_HEADERS.errorStack]: (err.stack ?? '').slice(0, 4000),
      [DEAD_LETTER_HEADERS.attempts]: String(attempts),
      [DEAD_LETTER_HEADERS.reason]: reason,
    };
    return {
      status: 'dead-lettered',
      attempts,
      outputs: [
        {
          topic: `${topic}${options.deadLetter.topicSuffix}`,
          key: record.message.key ? record.message.key.toString('base64') : null,
          value: record.message.value ? record.message.value.toString('base64') : null,
          headers,
        },
      ],
    };
  }

  private where(record: ChunkRecord): string {
    return `${this.deps.topic}[${this.deps.partition}]@${record.offset} (message ${record.messageId})`;
  }
}

function toTopicMessages(outputs: RecordedOutput[]): Array<{ topic: string; messages: Message[] }> {
  const byTopic = new Map<string, Message[]>();
  for (const output of outputs) {
    const messages = byTopic.get(output.topic) ?? [];
    messages.push({
      key: output.key === null ? null : Buffer.from(output.key, 'base64'),
      value: output.value === null ? null : Buffer.from(output.value, 'base64'),
      headers: output.headers,
    });
    byTopic.set(output.topic, messages);
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}
