import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import type { EntityManager, QueryRunner } from 'typeorm';
import type { KafkaClient } from '../kafkajs';
import { uuidv7 } from '../engine/message-ids';
import { OutboxWriteError } from '../errors/outbox-write.error';
import { runInboxMigrations } from '../inbox/inbox-migrator';
import { HEADERS, KAFKA_CLIENT, OUTBOX_TABLE, RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { KafkaExactlyOnceMetrics } from '../metrics/kafka-exactly-once.metrics';
import type { ResolvedOptions } from '../options/resolved-options';
import { type EventHeaders, headersProblem, messageIdProblem, toDurableHeaders } from '../publishing/event-headers';
import { estimateRecordBytes, MAX_PRODUCER_RECORD_BYTES } from '../publishing/record-size';
import { TopicInspector } from '../publishing/topic-inspector';
import { encodeDeclaredEvent } from '../formats/declared-event.encoder';
import { SchemaRegistry } from '../formats/avro/schema-registry';
import { encodeHeaders, keyLockId, lockedPosition } from './outbox-event';
import { OutboxRelay, type OutboxRelayStatus, type PgPool } from './outbox-relay';

/**
 * The caller's transaction, as its data layer has it: TypeORM's EntityManager of a transaction or a QueryRunner
 * with one started; Prisma's interactive transaction client; a Drizzle transaction; a Kysely transaction; or
 * what a handler was lent as `ctx.db` (the unit of work's transaction).
 */
export type OutboxTransaction = EntityManager | QueryRunner | object;

export interface OutboxAddOptions {
  /** Record key; required unless the topic declares a key function (module option `topics`). */
  key?: string;
  /** Headers of the record, as `EventPublisher.publish` takes them: strings (UTF-8) or bytes (Buffer, Uint8Array). */
  headers?: EventHeaders;
  /**
   * The event's message id, which consumers deduplicate by; a UUIDv7 when omitted. One taken from a client (an
   * HTTP `Idempotency-Key`) must be scoped to that client: see docs/outbox.md.
   */
  messageId?: string;
}

export interface OutboxAddResult {
  /** The event's `message-id` header, known before the caller commits (return it to an HTTP caller). */
  messageId: string;
  /** The event's place in the outbox: events of one key reach Kafka in this order, their writers' commit order. */
  position: string;
}

/** How long a topic's size limit, once learnt, is trusted by `add` before it is looked up again (in the background). */
const TOPIC_FACTS_MAX_AGE_MS = 60000;

/**
 * The transactional outbox (docs/outbox.md). `add` writes an event in the caller's own PostgreSQL transaction,
 * beside the caller's rows: the event reaches Kafka if and only if that transaction commits, exactly once for
 * read-committed readers, and the events of one key in the order their transactions committed. The relay (in
 * this application unless `outbox.relay` is false, or `kafka-eo outbox relay`) moves committed events to Kafka
 * in Kafka transactions that also carry its checkpoint.
 *
 * @example
 * await this.dataSource.transaction(async (manager) => {
 *   await manager.query('INSERT INTO payment_requests (payment_id, account_id, amount_cents) VALUES ($1, $2, $3)', [id, account, cents]);
 *   const { messageId } = await this.outbox.add(manager, 'payments.requested', event, { key: account });
 * });
 */
@Injectable()
export class Outbox implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(Outbox.name);
  private topics?: TopicInspector;
  private relay?: OutboxRelay;
  private ready = false;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(KAFKA_CLIENT) private readonly kafka: KafkaClient,
    private readonly registry: SchemaRegistry,
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
    private readonly metrics: KafkaExactlyOnceMetrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const config = this.options.outbox;
    if (!config) return;
    const database = this.lifecycle.getDatabase();
    if (this.options.inbox.runMigrations) await runInboxMigrations(database);
    this.ready = true;
    this.topics = new TopicInspector(this.kafka, { lookupTimeoutMs: 5000 });
    // Learn the declared topics' size limits in the background: Kafka may be down at boot, writes go on.
    for (const topic of Object.keys(this.options.topics)) void this.topics.get(`${this.options.topicPrefix}${topic}`, 0);
    if (config.relay) {
      const pool = database.pgPool() as PgPool | undefined;
      if (!pool) throw new OutboxWriteError('other-data-source', "the outbox relay needs the module's data layer to run on node-postgres (TypeORM: type 'postgres')");
      this.relay = new OutboxRelay(this.kafka, pool, { ...config, transactionalIdPrefix: this.options.transactionalIdPrefix, transactionTimeoutMs: this.options.transactionTimeoutMs, abortHangingTransactions: this.options.abortHangingTransactions, retry: this.options.kafka.retry, declaredTopics: Object.keys(this.options.topics).map((t) => `${this.options.topicPrefix}${t}`) }, this.metrics);
      this.relay.start();
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.relay?.stop();
  }

  /** The relay of this application (undefined when `outbox.relay` is false). */
  relayStatus(): OutboxRelayStatus | undefined {
    return this.relay?.status();
  }

  /**
   * Writes an event to the outbox in the transaction `manager`: your open transaction as the module's data layer
   * has it (TypeORM: an EntityManager of `dataSource.transaction`, or a QueryRunner with a transaction started;
   * Prisma, Drizzle, Kysely: the transaction's client, `tx` or `trx`; in a handler, `ctx.db`). Validates and encodes it at once against the topic's Avro
   * schema, as `EventPublisher.publish` does: an invalid event, an undeclared topic, a missing key or a record
   * over the topic's size limit throws here, before the caller commits, and nothing is written. The writers of
   * one key wait for each other's commit here (the key's lock), so that their events keep their commit order:
   * in one transaction, add the events of several keys in the same key order everywhere (or PostgreSQL may end
   * one transaction as a deadlock).
   */
  async add(manager: OutboxTransaction, topic: string, event: unknown, options?: OutboxAddOptions): Promise<OutboxAddResult>;
  /**
   * Writes an event to the outbox in the transaction the application's `@nestjs-cls/transactional` has open here
   * (`@Transactional()`, `TransactionHost.withTransaction`), beside the service's own writes through
   * `TransactionHost.tx`. Outside one it throws OutboxWriteError (`not-in-transaction`) and writes nothing: an
   * event in a transaction of its own would not commit or roll back with the caller's rows.
   *
   * @example
   * @Transactional()
   * async requestPayment(request: PaymentRequest) {
   *   await this.txHost.tx.insert(PaymentRequestRow, request);
   *   return this.outbox.add('payments.requested', request, { key: request.accountId });
   * }
   */
  async add(topic: string, event: unknown, options?: OutboxAddOptions): Promise<OutboxAddResult>;
  async add(...args: [OutboxTransaction, string, unknown, OutboxAddOptions?] | [string, unknown, OutboxAddOptions?]): Promise<OutboxAddResult> {
    if (!this.options.outbox) throw new OutboxWriteError('not-enabled', 'the outbox is not enabled: add the "outbox" option ({} for the defaults) to KafkaExactlyOnceModule.forRoot');
    const [manager, topic, event, options = {}] = typeof args[0] === 'string' ? [this.ambientManager(), ...(args as [string, unknown, OutboxAddOptions?])] : (args as [OutboxTransaction, string, unknown, OutboxAddOptions?]);
    const runner = this.transactionOf(manager);
    const encoded = encodeDeclaredEvent(this.options, this.registry, topic, event, options.key); // throws: nothing written
    const idProblem = messageIdProblem(options.messageId);
    if (idProblem) throw new OutboxWriteError('invalid-message-id', idProblem, topic);
    const headerProblem = headersProblem(options.headers);
    if (headerProblem) throw new OutboxWriteError('invalid-headers', headerProblem, topic);
    // The first write of a registry topic may wait for its id, still being looked up (rejects: nothing written).
    const value = await encoded.value;
    const messageId = options.messageId ?? uuidv7();
    const headers = toDurableHeaders({ ...options.headers, [HEADERS.messageId]: messageId, [HEADERS.eventType]: encoded.eventType });
    const key = Buffer.from(encoded.key, 'utf8');
    const bytes = estimateRecordBytes({ key: key.toString('base64'), value: value.toString('base64'), headers });
    const limit = this.sizeLimit(encoded.topic);
    if (bytes > limit.bytes) {
      throw new OutboxWriteError(
        'too-large',
        `event ${messageId} for topic "${encoded.topic}" is ${bytes} bytes as a Kafka record (key, value, headers and framing), over the limit of ${limit.bytes} bytes (${limit.source}); Kafka would never accept it, so it was not written. Make the event smaller (keep large payloads elsewhere and publish a reference), or raise the topic's max.message.bytes.`,
        encoded.topic,
      );
    }
    // The key's lock comes before the row's position (a sequence value), in one statement: the writers of a key
    // get their positions in the order of their commits. The notification reaches the relay at commit.
    const { position, from } = lockedPosition('$1');
    const rows = await runner.query(
      `INSERT INTO ${OUTBOX_TABLE} (position, id, aggregatetype, aggregateid, type, payload, headers)
       SELECT ${position}, $2, $3, $4, $5, $6, $7 FROM ${from}
       RETURNING position::text AS position`,
      [keyLockId(encoded.topic, key), messageId, encoded.topic, key, encoded.eventType, value, encodeHeaders(headers)],
    );
    return { messageId, position: rows[0].position };
  }

  /** The EntityManager of the transaction @nestjs-cls/transactional has open in this async context. */
  private ambientManager(): EntityManager {
    if (!this.ready) throw new OutboxWriteError('not-enabled', 'the outbox is not ready: Outbox.add is for after the application has started (its migrations run at bootstrap)');
    const ambient = this.lifecycle.ambientTransactions();
    const manager = ambient?.active();
    if (!manager) {
      const refusal = ambient?.refusal;
      throw new OutboxWriteError(
        'not-in-transaction',
        refusal
          ? `Outbox.add without an EntityManager cannot join @nestjs-cls/transactional: ${refusal} Otherwise pass the EntityManager of your transaction: outbox.add(manager, topic, event)`
          : ambient
          ? 'Outbox.add without an EntityManager needs a transaction of @nestjs-cls/transactional open here (a @Transactional() method, or TransactionHost.withTransaction); nothing was written: an event in a transaction of its own would not commit with your rows'
          : `Outbox.add without an EntityManager needs @nestjs-cls/transactional (ClsPluginTransactional with the TypeORM adapter) for the module's DataSource${this.options.ambientTransactions ? '' : ', and ambientTransactions not false'}; otherwise pass the EntityManager of your transaction: outbox.add(manager, topic, event)`,
      );
    }
    return manager;
  }

  /** Where the row is written: the caller's transaction, as the module's data layer knows it. */
  private transactionOf(transaction: OutboxTransaction): { query(sql: string, params?: unknown[]): Promise<any> } {
    const database = this.lifecycle.getDatabase();
    const session = database.sessionOf(transaction);
    if (!session || !session.inTransaction) {
      throw new OutboxWriteError(
        'not-in-transaction',
        `Outbox.add needs ${database.transactionName}: written outside one, the event would not commit with your rows`,
      );
    }
    if (!session.sameDatabase) {
      throw new OutboxWriteError(
        'other-data-source',
        `the transaction is of another DataSource than the module's (dataSourceName ${JSON.stringify(this.options.dataSourceName ?? 'default')}): the relay reads the outbox of the module's DataSource only`,
      );
    }
    if (!this.ready) throw new OutboxWriteError('not-enabled', 'the outbox is not ready: Outbox.add is for after the application has started (its migrations run at bootstrap)');
    return session;
  }


  /** The record size Kafka takes for a topic: its max.message.bytes once learnt, never more than the library's own limit. */
  private sizeLimit(topic: string): { bytes: number; source: string } {
    const facts = this.topics?.cached(topic);
    if (!facts || Date.now() - facts.checkedAt > TOPIC_FACTS_MAX_AGE_MS) void this.topics?.get(topic, TOPIC_FACTS_MAX_AGE_MS);
    if (facts?.exists && facts.maxMessageBytes < MAX_PRODUCER_RECORD_BYTES) return { bytes: facts.maxMessageBytes, source: facts.limitSource };
    return { bytes: MAX_PRODUCER_RECORD_BYTES, source: "the library's own limit" };
  }
}
