import { fromRecordedOutput, OutputRecord, toRecordedOutput, type RecordedOutput } from '../engine/output-record';
import { Logger } from '@nestjs/common';
import type { DatabasePort, DatabaseSession } from '../database/database.port';
import { DEAD_LETTER_HEADER_NAMES } from '../admin/operator-store';
import { commitChecked, queryWithin, refuseLateStatements, releaseClean } from '../engine/clean-release';
import { withDeadline } from '../engine/deadline';
import { isOutputTooLarge } from '../engine/error-classification';
import { invokeHandler } from '../engine/handler-invocation';
import { HeaderPair, textHeaders, toKafkaHeaders, toProduceRequests } from '../engine/record-headers';
import { identify } from '../engine/record-identity';
import { eventIdentityOf, keyedRecord } from '../engine/record-reading';
import type { RecordSchema } from '../interfaces/record-info.interface';
import { retryOrigin, routesOf } from '../retry/retry-tiers';
import type { FaultInjector } from '../engine/fault-injector';
import { describeFailure, reasonOf, unitSessionSettings } from '../engine/unit-of-work';
import { HandlerTimeoutError } from '../errors/handler-timeout.error';
import type { RecordedFailure } from '../inbox/inbox.repository';
import { AUDIT_TABLE, INBOX_TABLE, PARKED_KEYS_TABLE, PARKED_RECORDS_TABLE, REPLAYS_TABLE } from '../kafka-exactly-once.constants';
import type { HandlerDefinition } from '../engine/handler-definition';
import type { ResolvedOptions } from '../options/resolved-options';
import type { SchemaRegistry } from '../formats/avro/schema-registry';
import { SchemaRegistryError } from '../errors/schema-registry.error';
import type { AmbientTransactions } from '../transaction/ambient-transaction';
import type { KafkaExactlyOnceMetrics } from '../metrics/kafka-exactly-once.metrics';
import type { KafkaExactlyOnceTracing } from '../tracing/kafka-exactly-once.tracing';
import { PartitionProducer } from '../transaction/partition-producer';
import { describeRefusal, refusedForGood } from '../publishing/send-refusal';
import { legacyTransactionalIds, replayTransactionalId } from '../transaction/transactional-ids';
import { type CheckedTransaction, type KafkaClient, type KafkaMessage, StableOffsets } from '../kafkajs';

/** Arbitrary constant: the advisory lock class under which one instance of a group carries out operations. */
const OPERATIONS_LOCK = 736_421_191;

interface Operation {
  id: string;
  action: 'release' | 'replay';
  topic: string;
  key_digest: Buffer | null;
  ordering_key: string | null;
  scope: string | null;
  id_digest: Buffer | null;
}

interface Replay {
  seq: string;
  topic: string;
  partition: number;
  outputs: RecordedOutput[];
}

/** The original record a replay runs the handler for. */
interface Original {
  topic: string;
  partition: number;
  offset: string;
  scope: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: HeaderPair[];
  timestamp: string;
}

type StepResult =
  | { kind: 'replayed'; outputs: number }
  | { kind: 'done' }
  | { kind: 'failed'; error: RecordedFailure; at?: Record<string, unknown> }
  /** Not yet: the record's own unit of work has not committed its Kafka transaction; the next round tries again. */
  | { kind: 'wait'; reason: string };

/** The broker refuses a replay's outputs for good (too large): the step fails with nothing committed. */
class RefusedOutputs extends Error {
  constructor(
    readonly failure: RecordedFailure,
    readonly at?: Record<string, unknown>,
  ) {
    super(failure.message);
  }
}

/** The consumer group whose committed offsets mark which replays' Kafka transactions committed. */
export const replayMarkerGroup = (group: string) => `${group}.kafka-eo-replays`;

/**
 * Carries out the releases and dead-letter replays operators queue in the audit table (admin REST, CLI): this
 * process has the handlers. One instance of the group at a time (a session advisory lock), one record per
 * step, each step by the consumer's protocol: the handler runs in a PostgreSQL transaction that also marks
 * the record replayed and records its outputs; PostgreSQL commits first; then the outputs are sent in a Kafka
 * transaction that also commits a marker offset (the replay's number + 1, in a consumer group of its own).
 * After a crash between the two commits, the marker tells whether the outputs went out: if not, they are sent
 * again before anything else (`settle`). A release deletes the parked key only after every parked record of
 * it was replayed and its outputs committed, under the key row's lock, so no new record of the key can
 * overtake one still parked.
 */
export class ReplayWorker {
  private readonly logger = new Logger(ReplayWorker.name);
  private readonly handlers: Map<string, HandlerDefinition>;
  private readonly producer: PartitionProducer;
  /** Committed offsets read stable (require_stable): a marker a transaction committed a moment ago is not missed. */
  private readonly offsets: StableOffsets;
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopping = false;
  private readonly waiting = new Set<string>();
  private producerReady = false;

  constructor(
    kafka: KafkaClient,
    private readonly dataSource: DatabasePort,
    private readonly registry: SchemaRegistry,
    private readonly options: ResolvedOptions,
    handlers: HandlerDefinition[],
    private readonly topicLimits: ReadonlyMap<string, number>,
    private readonly faults?: FaultInjector,
    private readonly metrics?: KafkaExactlyOnceMetrics,
    private readonly tracing?: KafkaExactlyOnceTracing,
    private readonly ambient?: AmbientTransactions,
  ) {
    // A dead letter from a retry tier is known by the tier's topic: the same handler.
    this.handlers = new Map([...routesOf(handlers)].map(([topic, route]) => [topic, route.handler]));
    const { transactionalIdPrefix: prefix, groupId } = options;
    this.producer = new PartitionProducer(kafka, replayTransactionalId(prefix, groupId), options.transactionTimeoutMs, options.kafka.retry, legacyTransactionalIds.replay(prefix, groupId));
    this.offsets = new StableOffsets(kafka);
  }

  start(): void {
    if (this.timer) return;
    this.stopping = false;
    this.timer = setInterval(() => void this.poll(), this.options.operations.pollIntervalMs);
    this.timer.unref();
    void this.poll();
  }

  /** Stops polling and waits for the step in flight (an operation left running is resumed by the next worker). */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
    await this.producer.close();
    this.producerReady = false;
    await this.offsets.disconnect();
  }

  /** One round: settles unsettled replays and carries out the open operations (resolves when done). */
  poll(): Promise<void> {
    this.running ??= this.round()
      .catch((err) => {
        this.logger.warn(`operations of group ${this.options.groupId}: ${(err as Error).message}; trying again in ${this.options.operations.pollIntervalMs} ms`);
        this.producerReady = false;
        return this.producer.close();
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }

  private async round(): Promise<void> {
    const group = this.options.groupId;
    const [work] = await this.sql(
      `SELECT EXISTS (SELECT 1 FROM ${AUDIT_TABLE} WHERE consumer_group = $1 AND state IN ('pending', 'running') AND action IN ('release', 'replay'))
           OR EXISTS (SELECT 1 FROM ${REPLAYS_TABLE} WHERE consumer_group = $1 AND NOT settled) AS open`,
      [group],
    );
    if (!work?.open || this.stopping) return;
    const lock = this.dataSource.createQueryRunner();
    try {
      await lock.connect();
      const [{ locked }] = await withDeadline(lock.query(`SELECT pg_try_advisory_lock($1, hashtext($2)) AS locked`, [OPERATIONS_LOCK, group]), this.options.inbox.statementTimeoutMs + 1000, 'PostgreSQL');
      if (!locked) return; // another instance of the group is at it
      try {
        if (!this.producerReady) {
          await this.producer.start();
          this.producerReady = true;
        }
        await this.settle();
        const operations: Operation[] = await this.sql(
          `SELECT a.id::text AS id, action, topic, key_digest, ordering_key, scope, id_digest FROM ${AUDIT_TABLE} a
           WHERE consumer_group = $1 AND state IN ('pending', 'running') AND action IN ('release', 'replay') ORDER BY a.id`,
          [group],
        );
        for (const operation of operations) {
          if (this.stopping) return;
          await this.carryOut(operation);
        }
      } finally {
        // The producer lives for one round: another instance may hold the lock next, with the same transactional id.
        await this.producer.close();
        this.producerReady = false;
        // Unanswered, the lock's connection is closed (releaseClean), which ends its session and the lock with it.
        await withDeadline(lock.query(`SELECT pg_advisory_unlock($1, hashtext($2))`, [OPERATIONS_LOCK, group]), this.options.inbox.statementTimeoutMs + 1000, 'PostgreSQL').catch(() => undefined);
      }
    } finally {
      await releaseClean(lock);
    }
  }

  private async carryOut(operation: Operation): Promise<void> {
    await this.sql(`UPDATE ${AUDIT_TABLE} SET state = 'running' WHERE id = $1 AND state = 'pending'`, [operation.id]);
    const handler = this.handlers.get(operation.topic);
    if (!handler) return this.finish(operation, 'failed', { error: { name: 'NoHandler', message: `no @IdempotentHandler for ${operation.topic} in group ${this.options.groupId}` } });
    if (operation.action === 'replay') {
      const result = await this.replayStep(operation, handler);
      if (result.kind === 'wait') return this.waitFor(operation, result.reason);
      if (result.kind === 'failed') return this.finish(operation, 'failed', { error: { name: result.error.name, message: result.error.message }, ...result.at });
      return this.finish(operation, 'done', { replayed: 1, outputs: result.kind === 'replayed' ? result.outputs : 0 });
    }
    for (;;) {
      if (this.stopping) return; // left running: the next worker goes on from the next parked record
      const result = await this.releaseStep(operation, handler);
      if (result.kind === 'replayed') continue;
      if (result.kind === 'wait') return this.waitFor(operation, result.reason);
      const previous = await this.previousReplays(operation.id);
      if (result.kind === 'failed') {
        this.logger.error(`release of key ${operation.ordering_key} of ${operation.topic} failed at a parked record (${result.error.message}); the key stays parked there`);
        return this.finish(operation, 'failed', { replayed: previous, error: { name: result.error.name, message: result.error.message }, ...result.at });
      }
      this.logger.log(`key released ${JSON.stringify({ group: this.options.groupId, topic: operation.topic, key: operation.ordering_key, replayed: previous, audit: operation.id })}: its parked records were replayed in order`);
      this.metrics?.keyReleased(operation.topic);
      return this.finish(operation, 'done', { replayed: previous });
    }
  }

  private waitFor(operation: Operation, reason: string): void {
    if (this.waiting.has(operation.id)) return; // said once per operation
    this.waiting.add(operation.id);
    this.logger.log(`operation ${operation.id} (${operation.action} on ${operation.topic}) waits: ${reason}`);
  }

  private async previousReplays(auditId: string): Promise<number> {
    const [row] = await this.sql(`SELECT count(*)::int AS n FROM ${REPLAYS_TABLE} WHERE audit_id = $1`, [auditId]);
    return row.n;
  }

  private async finish(operation: Operation, state: 'done' | 'failed', result: Record<string, unknown>): Promise<void> {
    await this.sql(`UPDATE ${AUDIT_TABLE} SET state = $2, result = $3::jsonb, finished_at = now() WHERE id = $1`, [operation.id, state, JSON.stringify(result)]);
  }

  /** Replays the first parked record of the key, or unparks the key when none is left. */
  private async releaseStep(operation: Operation, handler: HandlerDefinition): Promise<StepResult> {
    const group = this.options.groupId;
    let seq: string | undefined;
    return this.step(
      async (runner, send) => {
        const [key] = await runner.query(`SELECT 1 FROM ${PARKED_KEYS_TABLE} WHERE consumer_group = $1 AND topic = $2 AND key_digest = $3 FOR UPDATE`, [group, operation.topic, operation.key_digest]);
        if (!key) return { kind: 'done' };
        const [record] = await runner.query(
          `SELECT seq::text AS seq, partition, "offset"::text AS "offset", scope, record_key, value, headers, record_timestamp FROM ${PARKED_RECORDS_TABLE} p
           WHERE consumer_group = $1 AND topic = $2 AND key_digest = $3 AND state = 'parked' ORDER BY p.seq LIMIT 1 FOR UPDATE`,
          [group, operation.topic, operation.key_digest],
        );
        if (!record) {
          // Every parked record is replayed, and its outputs committed (each step commits them before the next).
          await runner.query(`DELETE FROM ${PARKED_KEYS_TABLE} WHERE consumer_group = $1 AND topic = $2 AND key_digest = $3`, [group, operation.topic, operation.key_digest]);
          return { kind: 'done' };
        }
        seq = record.seq;
        if (!(await this.consumed(operation.topic, record.partition, record.offset))) {
          return { kind: 'wait', reason: `the unit of work that parked ${operation.topic}[${record.partition}]@${record.offset} has not committed its Kafka transaction yet` };
        }
        const original: Original = {
          topic: operation.topic,
          partition: record.partition,
          offset: record.offset,
          scope: record.scope,
          key: record.record_key,
          value: record.value,
          headers: record.headers,
          timestamp: record.record_timestamp ?? '0',
        };
        const at = { partition: record.partition, offset: record.offset, seq: record.seq };
        const result = await this.runHandler(runner, handler, original, { kind: 'release', auditId: operation.id });
        if (!result.ok) {
          await this.countReleaseFailure(runner, record.seq, result.error);
          return { kind: 'failed', error: result.error, at };
        }
        await runner.query(`UPDATE ${PARKED_RECORDS_TABLE} SET state = 'replayed', resolved_at = now() WHERE seq = $1`, [record.seq]);
        await runner.query(`UPDATE ${INBOX_TABLE} SET status = 'replayed', replayed_at = now() WHERE consumer_group = $1 AND scope = $2 AND id_digest = $3 AND status = 'parked'`, [group, record.scope, result.digest]);
        return send(await this.recordReplay(runner, operation, original, result.outputs), at);
      },
      // Outputs the broker refuses for good (too large): nothing of the step is committed; the key stays parked there.
      async (error) => {
        if (seq) await this.sql(`UPDATE ${PARKED_RECORDS_TABLE} SET release_failures = release_failures + 1, last_release_error = $2::jsonb WHERE seq = $1`, [seq, JSON.stringify(error)]);
      },
    );
  }

  /** Runs the handler once for a dead letter (its bytes as recorded on the inbox row). */
  private async replayStep(operation: Operation, handler: HandlerDefinition): Promise<StepResult> {
    const group = this.options.groupId;
    return this.step(async (runner, send) => {
      const [row] = await runner.query(
        `SELECT topic, partition, "offset"::text AS "offset", scope, status, outputs FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND scope = $2 AND id_digest = $3 FOR UPDATE`,
        [group, operation.scope, operation.id_digest],
      );
      const refuse = (message: string): StepResult => ({ kind: 'failed', error: { name: 'ReplayRefused', message, stack: '', reason: 'replay-refused' } });
      if (!row) return refuse('the dead letter is no longer in the inbox (inbox retention?)');
      if (row.status === 'replayed') {
        // Replayed by this very operation before a crash or a lost reply: done, not a second replay.
        const [mine] = await runner.query(`SELECT jsonb_array_length(outputs) AS outputs FROM ${REPLAYS_TABLE} WHERE audit_id = $1`, [operation.id]);
        return mine ? { kind: 'replayed', outputs: mine.outputs } : refuse('replayed already; a dead letter is replayed once');
      }
      if (row.status !== 'dead-lettered' && row.status !== 'deferred') return refuse(`the record is ${row.status}, not a dead letter`);
      const letter: RecordedOutput | undefined = row.outputs?.[0];
      if (!letter?.value) return refuse(`its dead letter was sent without the value (over max.message.bytes); the original is at ${row.topic}[${row.partition}]@${row.offset}`);
      if (!(await this.consumed(row.topic, row.partition, row.offset))) return { kind: 'wait', reason: `the unit of work that dead-lettered ${row.topic}[${row.partition}]@${row.offset} has not committed its Kafka transaction yet` };
      const original: Original = {
        topic: row.topic,
        partition: row.partition,
        offset: row.offset,
        scope: row.scope,
        key: letter.key === null ? null : Buffer.from(letter.key, 'base64'),
        value: Buffer.from(letter.value, 'base64'),
        headers: (letter.h ?? []).filter(([name]) => !DEAD_LETTER_HEADER_NAMES.has(Buffer.from(name, 'base64').toString('utf8'))),
        timestamp: '0',
      };
      const result = await this.runHandler(runner, handler, original, { kind: 'dead-letter', auditId: operation.id });
      if (!result.ok) return { kind: 'failed', error: result.error };
      await runner.query(`UPDATE ${INBOX_TABLE} SET status = 'replayed', replayed_at = now() WHERE consumer_group = $1 AND scope = $2 AND id_digest = $3`, [group, row.scope, operation.id_digest]);
      return send(await this.recordReplay(runner, operation, original, result.outputs));
    });
  }

  /**
   * One step by the consumer's protocol: the handler and the bookkeeping in a PostgreSQL transaction, the
   * outputs sent in a Kafka transaction before PostgreSQL commits (a refusal of the outputs fails the step with
   * nothing committed), PostgreSQL committed, then the marker offset and the Kafka commit.
   */
  private async step(
    work: (runner: DatabaseSession, send: (replay: Replay, at?: Record<string, unknown>) => Promise<StepResult>) => Promise<StepResult>,
    onRefused?: (error: RecordedFailure) => Promise<void>,
  ): Promise<StepResult> {
    let sent: Replay | undefined;
    const send = async (replay: Replay, at?: Record<string, unknown>): Promise<StepResult> => {
      if (replay.outputs.length > 0) {
        const txn = await this.producer.begin();
        // Before the first request: a step that fails part-way must abort what it sent.
        sent = replay;
        try {
          for (const request of toProduceRequests(replay.outputs.map(fromRecordedOutput), this.options.outputs.maxRequestBytes, (t) => this.topicLimits.get(t))) await txn.send(request);
        } catch (err) {
          if (!isOutputTooLarge(err)) throw err;
          throw new RefusedOutputs(describeFailure(err, 'output-too-large'), at);
        }
      }
      return { kind: 'replayed', outputs: replay.outputs.length };
    };
    let result: StepResult;
    try {
      result = await this.inTransaction((runner) => work(runner, send));
    } catch (err) {
      // PostgreSQL did not commit: nothing sent may commit either.
      if (sent) await this.producer.abortQuietly();
      // A handler that overran fails the step (and the operation) for good: running it again would overrun again.
      if (err instanceof HandlerTimeoutError) return { kind: 'failed', error: describeFailure(err, 'handler-failed') };
      if (!(err instanceof RefusedOutputs)) throw err;
      await onRefused?.(err.failure);
      return { kind: 'failed', error: err.failure, at: err.at };
    }
    if (result.kind === 'replayed') this.faults?.reach('after-replay-db-commit');
    if (sent) await this.commitReplays(await this.producer.begin(), [sent]);
    return result;
  }

  /** Whether the group committed its offset past this record (the unit of work that parked it is done in Kafka too). */
  private async consumed(topic: string, partition: number, offset: string): Promise<boolean> {
    return (await this.offsets.committed(this.options.groupId, topic, partition)) > BigInt(offset);
  }

  private async countReleaseFailure(runner: DatabaseSession, seq: string, error: RecordedFailure): Promise<void> {
    await runner.query(`UPDATE ${PARKED_RECORDS_TABLE} SET release_failures = release_failures + 1, last_release_error = $2::jsonb WHERE seq = $1`, [seq, JSON.stringify(error)]);
  }

  private async runHandler(
    runner: DatabaseSession,
    handler: HandlerDefinition,
    original: Original,
    replay: { kind: 'release' | 'dead-letter'; auditId: string },
  ): Promise<{ ok: true; outputs: OutputRecord[]; digest: Buffer } | { ok: false; error: RecordedFailure }> {
    const headers = toKafkaHeaders({ topic: original.topic, key: null, value: null, h: original.headers });
    const base = original.topic === handler.topic ? undefined : handler.topic;
    let id = identify(original.topic, original.partition, { headers, offset: original.offset }, original.scope === '' ? 'group' : 'topic', base === undefined ? undefined : { base, origin: retryOrigin(headers, base) });
    let event: unknown;
    let schema: RecordSchema | undefined;
    await this.registry.remote?.prefetch([original.value]); // a registry away: the step fails and is tried again
    try {
      const decoded = handler.reader.decode(original.value);
      schema = decoded.schema;
      // Known by its event's key when its handler names one (as the consumer knew it).
      const message = { key: original.key, value: original.value, headers, offset: original.offset, timestamp: original.timestamp } as KafkaMessage;
      id = eventIdentityOf(handler, id, decoded.event, () => keyedRecord(original.topic, original.partition, message)).id;
      event = await handler.reader.validate(decoded.event);
    } catch (err) {
      if (err instanceof SchemaRegistryError) throw err;
      return { ok: false, error: describeFailure(err, reasonOf(err)) };
    }
    const info = {
      topic: original.topic,
      partition: original.partition,
      offset: original.offset,
      key: original.key?.toString() ?? null,
      headers: textHeaders({ headers } as never),
      messageId: id.displayId,
      timestamp: original.timestamp,
      schema,
    };
    // One attempt: a step holds its key's lock while the handler runs (the consumer waits on it), and the
    // operator is there to try again.
    const once = { ...handler, retry: { ...handler.retry, attempts: 1 } };
    const deps = { database: this.dataSource, handler: once, registry: this.registry, options: this.options, topicLimits: this.topicLimits, heartbeat: async () => undefined, logger: this.logger, tracing: this.tracing, ambient: this.ambient };
    const result = await invokeHandler(deps, runner, { info, id, replay }, event);
    if (!result.ok) return { ok: false, error: describeFailure(result.error, reasonOf(result.error)) };
    return { ok: true, outputs: result.outputs, digest: Buffer.from(id.digest, 'hex') };
  }

  private async recordReplay(runner: DatabaseSession, operation: Operation, original: Original, emitted: OutputRecord[]): Promise<Replay> {
    const outputs = emitted.map(toRecordedOutput);
    const [row] = await runner.query(
      `INSERT INTO ${REPLAYS_TABLE} (consumer_group, topic, partition, audit_id, outputs, settled) VALUES ($1, $2, $3, $4, $5::jsonb, $6) RETURNING seq::text AS seq`,
      [this.options.groupId, original.topic, original.partition, operation.id, JSON.stringify(outputs), outputs.length === 0],
    );
    return { seq: row.seq, topic: original.topic, partition: original.partition, outputs };
  }

  /**
   * Commits the marker offsets of replays whose outputs are in the open transaction, then marks them settled. A
   * failure here leaves them unsettled: the next round settles them before anything else.
   */
  private async commitReplays(txn: CheckedTransaction, replays: Replay[]): Promise<void> {
    try {
      const byTopic = new Map<string, Map<number, bigint>>();
      for (const r of replays) {
        const partitions = byTopic.get(r.topic) ?? new Map<number, bigint>();
        partitions.set(r.partition, BigInt(r.seq) + 1n > (partitions.get(r.partition) ?? 0n) ? BigInt(r.seq) + 1n : partitions.get(r.partition)!);
        byTopic.set(r.topic, partitions);
      }
      await txn.sendOffsets({
        consumerGroupId: replayMarkerGroup(this.options.groupId),
        topics: [...byTopic].map(([topic, partitions]) => ({ topic, partitions: [...partitions].map(([partition, offset]) => ({ partition, offset: offset.toString() })) })),
      });
      await txn.commit();
    } catch (err) {
      this.producerReady = false; // outcome unknown: a new producer's InitProducerId settles it, and so does the marker
      throw err;
    }
    await this.sql(`UPDATE ${REPLAYS_TABLE} SET settled = true WHERE seq = ANY($1::bigint[])`, [replays.map((r) => r.seq)]);
  }

  /** Sends replays' outputs again in one Kafka transaction with their marker offsets. */
  private async publish(replays: Replay[]): Promise<void> {
    const txn = await this.producer.begin();
    try {
      for (const request of toProduceRequests(replays.flatMap((r) => r.outputs.map(fromRecordedOutput)), this.options.outputs.maxRequestBytes, (t) => this.topicLimits.get(t))) await txn.send(request);
    } catch (err) {
      this.producerReady = false;
      throw err;
    }
    await this.commitReplays(txn, replays);
  }

  /** Replays whose PostgreSQL transaction committed but whose Kafka transaction may not have. */
  private async settle(): Promise<void> {
    const rows: Replay[] = await this.sql(
      `SELECT seq::text AS seq, topic, partition, outputs FROM ${REPLAYS_TABLE} r WHERE consumer_group = $1 AND NOT settled ORDER BY r.seq`,
      [this.options.groupId],
    );
    if (rows.length === 0) return;
    // Read stable (require_stable): a marker whose transaction committed a moment ago may not be applied by the
    // group coordinator yet, and read unstable it looks missing; the outputs would go out a second time.
    const markers = new Map<string, Map<number, bigint>>();
    for (const topic of new Set(rows.map((r) => r.topic))) {
      const partitions = [...new Set(rows.filter((r) => r.topic === topic).map((r) => r.partition))];
      markers.set(topic, await this.offsets.committedOffsets(replayMarkerGroup(this.options.groupId), topic, partitions));
    }
    const marker = (r: Replay) => markers.get(r.topic)?.get(r.partition) ?? -1n;
    const done = rows.filter((r) => marker(r) > BigInt(r.seq));
    const pending = rows.filter((r) => marker(r) <= BigInt(r.seq));
    if (done.length > 0) await this.sql(`UPDATE ${REPLAYS_TABLE} SET settled = true WHERE seq = ANY($1::bigint[])`, [done.map((r) => r.seq)]);
    if (pending.length > 0) {
      this.logger.warn(`sending the outputs of ${pending.length} replay(s) whose Kafka transaction did not commit`);
      try {
        await this.publish(pending);
      } catch (err) {
        const refusal = refusedForGood(err);
        if (!refusal) throw err;
        // Refused for good, they block every operation of the group: say which, and the operator's way out.
        const outputTopic = (err as { refused?: { topic: string } }).refused?.topic ?? '<topic>';
        throw new Error(
          `the outputs of replay(s) ${pending.map((r) => r.seq).join(', ')} are refused by Kafka for good (${describeRefusal(refusal, err)}); releases and replays of group ${this.options.groupId} wait until an operator diverts them: kafka-eo outputs divert --replay <seq> --group ${this.options.groupId} --output-topic ${outputTopic} --reason "..." (docs/operations.md)`,
          { cause: err },
        );
      }
    }
  }

  /** A statement of the worker's own on a connection of its own, given up a second after the statement timeout. */
  private sql<T = any>(query: string, params: unknown[] = []): Promise<T> {
    return queryWithin<T>(this.dataSource, query, params, this.options.inbox.statementTimeoutMs + 1000);
  }

  private async inTransaction<T>(work: (runner: DatabaseSession) => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    let overran = false;
    let unguard: (() => void) | undefined;
    try {
      await runner.connect();
      unguard = refuseLateStatements(runner);
      await runner.startTransaction();
      await runner.query(unitSessionSettings(this.options));
      const result = await work(runner);
      // A handler's replay ran in this transaction: checked as a unit's commit is (see commitChecked).
      await commitChecked(runner, this.logger);
      return result;
    } catch (err) {
      // A handler that overran may still be using the connection: it is closed, not reused.
      overran = err instanceof HandlerTimeoutError;
      throw err;
    } finally {
      unguard?.();
      await releaseClean(runner, overran);
    }
  }
}
