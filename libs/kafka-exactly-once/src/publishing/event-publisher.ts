import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { CircuitBreakerPolicy, CircuitState, ConsecutiveBreaker, circuitBreaker, handleWhen } from 'cockatiel';
import { sleep } from '../engine/sleep';
import { uuidv7 } from '../engine/message-ids';
import { InvalidPublishOptionsError } from '../errors/invalid-publish-options.error';
import { PublishError } from '../errors/publish.error';
import { SpoolFullError } from '../errors/spool-full.error';
import { UndeliverableEventError } from '../errors/undeliverable-event.error';
import { HEADERS, KAFKA_CLIENT, RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import type { ResolvedOptions } from '../options/resolved-options';
import { SchemaRegistry } from '../formats/avro/schema-registry';
import { encodeDeclaredEvent } from '../formats/declared-event.encoder';
import { spoolInstanceId } from '../spool/instance-id';
import { Spool } from '../spool/spool';
import type { SpooledRecord } from '../spool/spool-record';
import { withDeadline } from '../engine/deadline';
import { drainBatchSize } from './drain-batch';
import type { PublishAllItem, PublishOptions, PublishResult, PublisherStatus } from './publish.interfaces';
import { estimateRecordBytes, MAX_PRODUCER_RECORD_BYTES } from './record-size';
import { describeRefusal, refusedForGood, UNENCODABLE_RECORD } from './send-refusal';
import { type EventHeaders, fromDurableHeaders, headersProblem, messageIdProblem, toDurableHeaders } from './event-headers';
import { KafkaExactlyOnceMetrics } from '../metrics/kafka-exactly-once.metrics';
import { KafkaExactlyOnceTracing } from '../tracing/kafka-exactly-once.tracing';
import { KafkaAuthenticationError } from '../errors/kafka-authentication.error';
import { TopicFacts, TopicInspector } from './topic-inspector';
import { legacyTransactionalIds, publisherTransactionalId } from '../transaction/transactional-ids';
import { CheckedProducer, CheckedProducerOptions, fenceTransactionalId, type KafkaClient, type Message, type Placement } from '../kafkajs';
import { ProduceIncompleteError } from '../errors/produce-incomplete.error';

/** Caps of one spool drain request: small enough to stay far below request limits, large enough to drain fast. */
const DRAIN_MAX_RECORDS = 500;
const DRAIN_MAX_BYTES = 512 * 1024;
/** How old a topic's facts (existence, max.message.bytes) may be before they are looked up again. */
const TOPIC_FACTS_MAX_AGE_MS = 60000;
/** A refusal based on facts older than this is checked again first: an operator may just have fixed the topic. */
const REFUSAL_RECHECK_AGE_MS = 5000;

/** A publish waiting to go out in the next grouped request. */
interface PendingSend {
  record: SpooledRecord;
  message: Message;
  resolve: (sent: { partition?: number; offset?: string }) => void;
  reject: (failure: GroupedSendFailure) => void;
}

/** Why a grouped request failed; `sent`: it reached Kafka (the topic's facts may be stale). */
interface GroupedSendFailure {
  error: unknown;
  sent: boolean;
}

const BREAKER_STATES: Record<CircuitState, PublisherStatus['breaker']> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half-open',
  [CircuitState.Isolated]: 'isolated',
};

/**
 * Publishes events so that none is ever lost and each key keeps its order: validates against the topic's Avro
 * schema, encodes with single-object encoding, stamps `message-id` and `event-type`, and sends with an
 * idempotent producer (acks all, one request in flight; the publishes made while a request is in flight go out
 * together in the next one). When Kafka fails, the send passes its deadline or the
 * circuit breaker is open, the record is appended to a durable local spool (fsync before `publish` resolves
 * `spooled`), and a drainer replays the spool in order when Kafka is back. While a key has records in the
 * spool, its new records queue behind them. An event Kafka can never take (larger than the topic allows, or
 * for a topic that does not exist) is refused with UndeliverableEventError instead of being acknowledged, and
 * a spooled record the broker refuses for good is moved to the spool's quarantine, so nothing blocks the line.
 *
 * @example
 * const { messageId, status } = await publisher.publish('payments.requested', payment, { key: payment.accountId });
 */
@Injectable()
export class EventPublisher implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(EventPublisher.name);
  private producer?: CheckedProducer;
  private transactional?: CheckedProducer;
  private transactionalQueue: Promise<unknown> = Promise.resolve();
  private spool?: Spool;
  private breaker?: CircuitBreakerPolicy;
  private readonly chains = new Map<string, Promise<unknown>>();
  private draining = false;
  private drainer?: Promise<void>;
  private readonly counters = { sent: 0, spooled: 0, drained: 0 };
  /**
   * Names this instance in publishAll's transactional id. Stable across restarts (option or spool directory),
   * so that the next InitProducerId with it settles the transaction a crash left open.
   */
  private instanceId?: string;
  /** Whether the transactional producer has run InitProducerId (which settles an earlier open transaction). */
  private transactionalReady = false;
  /** Whether publishAll's transactional id of versions before 0.3 has been fenced. */
  private legacyFenced = false;
  private settling?: Promise<void>;
  private running = false;
  private isConnected = false;
  private connecting?: Promise<CheckedProducer>;
  private topics?: TopicInspector;
  /** When the drainer first found the topic of its oldest record missing (grace before quarantine). */
  private readonly missingSince = new Map<string, number>();
  /** Publishes waiting for the request in flight to finish: they go out together in the next one. */
  private pendingSends: PendingSend[] = [];
  private sendingGroups = false;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(KAFKA_CLIENT) private readonly kafka: KafkaClient,
    private readonly registry: SchemaRegistry,
    private readonly metrics: KafkaExactlyOnceMetrics,
    private readonly tracing: KafkaExactlyOnceTracing,
  ) {}

  private config() {
    const config = this.options.publisher;
    if (!config) throw new Error('EventPublisher is not enabled: add the "publisher" option to KafkaExactlyOnceModule.forRoot');
    return config;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.publisher) return;
    const config = this.config();
    this.spool = new Spool(config.spool);
    this.instanceId = config.instanceId ?? spoolInstanceId(config.spool.directory);
    this.topics = new TopicInspector(this.kafka, { lookupTimeoutMs: config.sendTimeoutMs });
    // A record the broker refuses for good says nothing about Kafka's health: it must not open the breaker.
    this.breaker = circuitBreaker(
      handleWhen((err) => refusedForGood(err) === undefined),
      { halfOpenAfter: config.breaker.halfOpenAfterMs, breaker: new ConsecutiveBreaker(config.breaker.consecutiveFailures) },
    );
    this.breaker.onStateChange((state) => this.logger.warn(`Kafka circuit breaker is ${BREAKER_STATES[state]}`));
    this.running = true;
    this.metrics.attach({ publisher: () => this.status() });
    // Kafka may be down at boot: the publisher starts anyway, spools, and connects when Kafka is back. Refused
    // credentials are another matter (waiting does not fix them, and everything would go to the spool): the
    // first connection is awaited for up to sendTimeoutMs, and a refusal fails the boot.
    let booted = false;
    const connecting = this.connected().then(
      () => undefined,
      (err: Error) => {
        const refused = KafkaAuthenticationError.from(err, this.options.kafka);
        // Refused after the boot went on (a slow handshake): say so loudly; publishes wait in the spool meanwhile.
        if (refused && booted) this.logger.error(`${refused.message} Publishes go to the spool until this is fixed and the application restarted.`);
        if (refused) return refused;
        this.logger.warn(`Kafka not reachable at start-up (${err.message}); publishing to the spool`);
        return undefined;
      },
    );
    const refused = await withDeadline(connecting, config.sendTimeoutMs, 'Kafka').catch(() => undefined); // not connected yet: spool
    booted = true;
    if (refused) {
      this.running = false;
      await this.producer?.disconnect().catch(() => undefined);
      throw refused;
    }
    // Learn the declared topics' existence and size limits now, so that publishes need not wait for them.
    for (const topic of Object.keys(this.options.topics)) void this.topics.get(`${this.options.topicPrefix}${topic}`, 0);
    this.settling = this.settleEarlierTransaction();
    this.draining = true;
    this.drainer = this.drainLoop();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.running = false;
    this.draining = false;
    await this.drainer;
    await this.settling;
    await Promise.all([...this.chains.values()].map((chain) => chain.catch(() => undefined)));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.spool?.close();
    await this.producer?.disconnect().catch(() => undefined);
    await this.transactional?.disconnect().catch(() => undefined);
  }

  /**
   * Validates, encodes and sends one event, or spools it; resolves only when it is in Kafka or on disk. Throws
   * UndeliverableEventError, having sent and spooled nothing, when Kafka can never take the event: its record is
   * larger than the topic's `max.message.bytes` (or the publisher's own limit), or its topic does not exist.
   */
  async publish(topic: string, event: unknown, options: PublishOptions = {}): Promise<PublishResult> {
    this.config();
    // The record carries the send span's traceparent (OpenTelemetry), unless the caller set headers of its own.
    const span = this.tracing.send(`${this.options.topicPrefix}${topic}`);
    try {
      const { record, ready } = this.prepare(topic, event, options, span.headers);
      // Checked inside the key's chain, so that publishes of a key keep their call order whatever a look-up costs.
      const result = await this.inKeyOrder([record], async () => {
        await ready;
        const undeliverable = await this.undeliverable(record, this.breaker?.state !== CircuitState.Open);
        if (undeliverable) throw undeliverable;
        return this.deliver(record);
      });
      span.end(undefined, { 'messaging.message.id': result.messageId.slice(0, 256), 'kafka_eo.status': result.status });
      return result;
    } catch (err) {
      span.end(err);
      throw err;
    }
  }

  /**
   * Why Kafka can never take this record, from what the cluster said about its topic; undefined when it can,
   * or when the topic has never been verified and cannot be now (Kafka unreachable: the send or the drainer
   * finds out). `lookUp`: ask the cluster when the facts are missing or old (not while the breaker is open).
   */
  private async undeliverable(record: SpooledRecord, lookUp: boolean): Promise<UndeliverableEventError | undefined> {
    const bytes = estimateRecordBytes(record);
    if (bytes > MAX_PRODUCER_RECORD_BYTES) {
      return UndeliverableEventError.tooLarge(record.topic, record.messageId, bytes, MAX_PRODUCER_RECORD_BYTES, "the publisher's own limit, set by its spool");
    }
    const topics = this.topics as TopicInspector;
    let facts = lookUp ? await topics.get(record.topic, TOPIC_FACTS_MAX_AGE_MS) : topics.cached(record.topic);
    if (lookUp && judge(record, bytes, facts) && facts && Date.now() - facts.checkedAt > REFUSAL_RECHECK_AGE_MS) facts = await topics.get(record.topic, 0);
    return trustedRefusal(record, bytes, facts, Date.now());
  }

  /**
   * Runs `task` after every earlier publish of the records' keys has settled, and makes later publishes of
   * those keys wait for it: one chain per topic and key keeps each key's events in order inside this process.
   */
  private inKeyOrder<T>(records: SpooledRecord[], task: () => Promise<T>): Promise<T> {
    const keys = [...new Set(records.map((r) => `${r.topic}\u0000${keyString(r)}`))];
    const previous = Promise.all(keys.map((k) => (this.chains.get(k) ?? Promise.resolve()).catch(() => undefined)));
    const result = previous.then(task);
    for (const key of keys) {
      this.chains.set(key, result);
      void result
        .finally(() => {
          if (this.chains.get(key) === result) this.chains.delete(key);
        })
        .catch(() => undefined);
    }
    return result;
  }

  /**
   * Sends several events atomically in one Kafka transaction: all become visible to read-committed consumers,
   * or none. These are not spooled. On failure throws PublishError, whose `outcome` says whether the events may
   * be visible (`unknown`: retry with the same `messageIds`) or are not (`not-sent`, `aborted`).
   */
  async publishAll(items: PublishAllItem[]): Promise<Array<Required<Pick<PublishResult, 'messageId'>>>> {
    this.config();
    const span = this.tracing.send([...new Set(items.map((item) => `${this.options.topicPrefix}${item.topic}`))].join(','), items.length);
    let prepared: Array<ReturnType<EventPublisher['prepare']>>;
    try {
      prepared = items.map((item) => this.prepare(item.topic, item.event, item, span.headers));
    } catch (err) {
      span.end(err);
      throw err;
    }
    const records = prepared.map((p) => p.record);
    const messageIds = records.map((r) => r.messageId);
    const transactions = this.transactionalQueue.catch(() => undefined);
    const run = this.inKeyOrder(records, async () => {
      await Promise.all(prepared.map((p) => p.ready));
      await transactions; // one open transaction at a time
      for (const record of records) {
        if (this.spool?.hasKey(record.topic, keyString(record))) {
          throw new PublishError(
            `publishAll: key "${keyString(record)}" of ${record.topic} has events waiting in the spool; sending now would overtake them. Retry once the spool has drained.`,
            { messageIds, outcome: 'not-sent' },
          );
        }
      }
      let txn: Awaited<ReturnType<CheckedProducer['transaction']>>;
      try {
        txn = await (await this.readyTransactional()).transaction();
      } catch (err) {
        throw new PublishError(`publishAll: no transaction could be started (${(err as Error).message}); none of the ${records.length} events was sent`, {
          messageIds,
          outcome: 'not-sent',
          cause: err,
        });
      }
      let committing = false;
      try {
        await txn.send(groupByTopic(records));
        committing = true;
        await txn.commit();
      } catch (err) {
        await txn.abort().catch(() => undefined);
        // When a request of the transaction failed in doubt (AddPartitionsToTxn's answer lost, say), the abort
        // may stay local while the broker keeps the transaction open, holding back every read-committed
        // consumer. Replace the producer: the next one, with the same transactional id, runs InitProducerId,
        // which makes the broker abort it (or complete it, if the commit had been decided).
        await this.discardTransactional();
        const reason = (err as Error).message;
        throw committing
          ? new PublishError(
              `publishAll: the commit of ${records.length} events failed (${reason}); they may or may not be visible. Retry with the same message ids so that consumers deduplicate.`,
              { messageIds, outcome: 'unknown', cause: err },
            )
          : new PublishError(`publishAll of ${records.length} events failed and was aborted, none is visible: ${reason}`, {
              messageIds,
              outcome: 'aborted',
              cause: err,
            });
      }
      this.counters.sent += records.length;
      for (const r of records) this.metrics.published(r.topic, 'sent');
      return records.map((r) => ({ messageId: r.messageId }));
    });
    this.transactionalQueue = run;
    run.then(
      () => span.end(),
      (err) => span.end(err),
    );
    return run;
  }

  status(): PublisherStatus {
    const quarantine = this.spool?.quarantine();
    return {
      breaker: this.breaker ? BREAKER_STATES[this.breaker.state] : 'closed',
      spool: this.spool?.backlog() ?? { records: 0, bytes: 0, oldestAgeMs: 0 },
      ...this.counters,
      quarantined: quarantine?.records ?? 0,
      ...(quarantine?.lastReason === undefined ? {} : { lastQuarantineReason: quarantine.lastReason }),
    };
  }

  /** Resolves when the spool is empty (e.g. before a short-lived publisher exits), or rejects after `timeoutMs`. */
  async flush(timeoutMs = 60000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await Promise.all([...this.chains.values()].map((chain) => chain.catch(() => undefined)));
    while (this.spool && !this.spool.isEmpty) {
      if (Date.now() > deadline) throw new Error(`the spool still holds ${this.spool.backlog().records} records after ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  /**
   * The record of an event, checked: what Kafka cannot take (an invalid event, a header value that is neither text
   * nor bytes, a message id that is not a usable string) throws here, before anything is sent or spooled. `ready`,
   * when the record's value waits for the Schema Registry (the first write of a topic whose id is still being looked
   * up), fills it in: awaited in the key's chain before the record is sent or spooled, and rejects as the lookup
   * does (nothing sent or spooled then).
   */
  private prepare(topic: string, event: unknown, options: PublishOptions, traceHeaders: Record<string, string>): { record: SpooledRecord; ready?: Promise<void> } {
    const headerProblem = headersProblem(options.headers);
    if (headerProblem) throw new InvalidPublishOptionsError('headers', topic, headerProblem);
    const idProblem = messageIdProblem(options.messageId);
    if (idProblem) throw new InvalidPublishOptionsError('messageId', topic, idProblem);
    const encoded = encodeDeclaredEvent(this.options, this.registry, topic, event, options.key); // throws: nothing sent or spooled
    const messageId = options.messageId ?? uuidv7();
    const headers: EventHeaders = { ...traceHeaders, ...options.headers, [HEADERS.messageId]: messageId, [HEADERS.eventType]: encoded.eventType };
    const record: SpooledRecord = {
      topic: encoded.topic,
      key: Buffer.from(encoded.key).toString('base64'),
      value: Buffer.isBuffer(encoded.value) ? encoded.value.toString('base64') : '',
      headers: toDurableHeaders(headers),
      messageId,
      spooledAt: 0,
    };
    if (Buffer.isBuffer(encoded.value)) return { record };
    const ready = encoded.value.then((value) => {
      record.value = value.toString('base64');
    });
    ready.catch(() => undefined); // the publish's failure once awaited in the key's chain
    return { record, ready };
  }

  /**
   * The producer, connected. The cluster reconnects a connected producer by itself after a broker restart, but
   * one whose first connect() failed is not reliably usable again: connect a new one instead (one attempt at a
   * time; publishes meanwhile hit their deadline and spool).
   */
  private connected(): Promise<CheckedProducer> {
    if (this.isConnected && this.producer) return Promise.resolve(this.producer);
    this.connecting ??= (async () => {
      const producer = this.producer ?? this.createProducer();
      this.producer = producer;
      try {
        await producer.connect();
      } catch (err) {
        this.producer = undefined;
        await producer.disconnect().catch(() => undefined);
        throw err;
      }
      this.isConnected = true;
      return producer;
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /**
   * Gives up the producer after a failed send: the next send starts on a new one (a new producer id), not behind
   * a call still waiting for the cluster (KafkaJS retries inside it), and the old one starts no request any more.
   * A request of the old one already on its way may still land: a copy the consumers absorb by message id.
   */
  private discard(): void {
    const producer = this.producer;
    this.producer = undefined;
    this.isConnected = false;
    if (producer) void withDeadline(producer.disconnect(), 5000).catch(() => undefined);
  }

  /**
   * The live sends, the drainer and (with a transactional id) publishAll each use a CheckedProducer: idempotent,
   * acks all, one send at a time (the live path and the drainer queue behind each other), no topic
   * auto-creation, every answer checked; a send never starts past its deadline.
   */
  private createProducer(extra: Pick<CheckedProducerOptions, 'transactionalId' | 'transactionTimeout'> = {}): CheckedProducer {
    return new CheckedProducer(this.kafka, { retry: this.options.kafka.retry, ...extra });
  }

  private async deliver(record: SpooledRecord): Promise<PublishResult> {
    const spool = this.spool as Spool;
    const breaker = this.breaker as CircuitBreakerPolicy;
    const open = () => breaker.state === CircuitState.Open;
    if (open()) return this.toSpool(record);
    // Records of this key wait in the spool: this one must not overtake them. While Kafka answers (the breaker is
    // closed), it waits (up to the send timeout) for the drainer to deliver them and then goes out live, so that a
    // key leaves the spool as soon as its backlog is out instead of feeding it for as long as publishes of the key
    // keep coming. While the breaker is not closed, it is spooled at once: a caller never waits on an outage.
    if (spool.hasKey(record.topic, keyString(record))) {
      if (breaker.state !== CircuitState.Closed) return this.toSpool(record);
      if (!(await spool.keyDrained(record.topic, keyString(record), this.config().sendTimeoutMs))) return this.toSpool(record);
    }
    if (open()) return this.toSpool(record);
    try {
      const sent = await this.sendGrouped(record);
      this.counters.sent++;
      this.metrics.published(record.topic, 'sent');
      return { messageId: record.messageId, status: 'sent', partition: sent.partition, offset: sent.offset };
    } catch (failure) {
      const { error: err, sent } = failure as GroupedSendFailure;
      if (sent) (this.topics as TopicInspector).markStale(record.topic);
      const refusal = refusedForGood(err);
      if (refusal) throw UndeliverableEventError.refused(record.topic, record.messageId, describeRefusal(refusal, err), err);
      // Failed, past its deadline, or the breaker is open. A send past its deadline may still land later (its
      // round of requests runs to the end): that copy is a duplicate the consumers absorb by message id.
      this.logger.debug(`send to ${record.topic} failed (${(err as Error).message}); spooling ${record.messageId}`);
      const notWritten = !sent || (err instanceof ProduceIncompleteError && err.outcome === 'not-written');
      return this.toSpool(record, notWritten ? 'not-sent' : 'unknown');
    }
  }

  /**
   * Sends a record together with the publishes made meanwhile: while a request is in flight, new publishes wait
   * and then go out in one request (at most DRAIN_MAX_RECORDS records and DRAIN_MAX_BYTES), acks all, under the
   * breaker and the send deadline. Per-key order holds: a key has at most one publish here at a time (its next
   * one waits in the key's chain for this one's answer), and a request keeps the order it was given.
   */
  private sendGrouped(record: SpooledRecord): Promise<{ partition?: number; offset?: string }> {
    return new Promise((resolve, reject) => {
      this.pendingSends.push({ record, message: toMessage(record), resolve, reject });
      if (this.sendingGroups) return;
      this.sendingGroups = true;
      // The publishes of this turn of the event loop join the first request.
      setImmediate(() => void this.sendGroups());
    });
  }

  private async sendGroups(): Promise<void> {
    try {
      while (this.pendingSends.length > 0) {
        const sized = this.pendingSends.slice(0, DRAIN_MAX_RECORDS).map(({ record }) => ({ topic: record.topic, bytes: estimateRecordBytes(record) }));
        await this.sendGroup(this.pendingSends.splice(0, drainBatchSize(sized, { maxRecords: DRAIN_MAX_RECORDS, maxBytes: DRAIN_MAX_BYTES })));
      }
    } finally {
      this.sendingGroups = false;
    }
  }

  /**
   * One request for a group of publishes; each publish is answered with its own partition and offset. When the
   * broker answered for some partitions only, their publishes are sent and the others fail (or, refused for
   * good, are tried alone, so that only a record Kafka can never take is refused).
   */
  private async sendGroup(group: PendingSend[]): Promise<void> {
    const breaker = this.breaker as CircuitBreakerPolicy;
    const timeoutMs = this.config().sendTimeoutMs;
    // The publishes in the order the request carries them (per topic), so that each gets its own placement.
    const ordered = byTopic(group.map((pending) => ({ topic: pending.record.topic, message: pending }))).flatMap(({ messages }) => messages);
    const request = byTopic(ordered.map((pending) => ({ topic: pending.record.topic, message: pending.message })));
    let sent = false;
    try {
      const placements = await breaker.execute(() => {
        // One deadline for the connection and the send: a send whose time ran out while connecting never starts.
        const deadline = Date.now() + timeoutMs;
        return withDeadline(
          this.connected().then((producer) => {
            sent = true;
            return producer.send(request, { deadline });
          }),
          timeoutMs,
        );
      });
      ordered.forEach((pending, i) => pending.resolve(placed(placements[i])));
    } catch (error) {
      // A record refused before any request (it cannot be encoded) says nothing of the producer: it is kept.
      if (sent && refusedForGood(error) !== UNENCODABLE_RECORD) this.discard();
      const written = error instanceof ProduceIncompleteError ? error.written : [];
      const rest = ordered.filter((pending, i) => {
        if (!written[i]) return true;
        pending.resolve(placed(written[i]));
        return false;
      });
      if (rest.length > 1 && refusedForGood(error)) {
        for (const pending of rest) await this.sendGroup([pending]);
        return;
      }
      for (const pending of rest) pending.reject({ error, sent });
      // Kafka just failed a request: the publishes waiting behind it go to the spool now (the drainer sends
      // them when Kafka is back) rather than each waiting out another request's deadline.
      for (const pending of this.pendingSends.splice(0)) pending.reject({ error, sent: false });
    }
  }

  /**
   * Spools a record and answers `spooled` once it is on disk. When the spool cannot take it (full, or its disk
   * failed), the caller gets a PublishError (SpoolFullError when full) with the message id and what became of
   * the event: `unknown` when its live send had gone out without an answer (it may be in Kafka: retry with the
   * same id), `not-sent` otherwise.
   */
  private async toSpool(record: SpooledRecord, liveSend: 'not-sent' | 'unknown' = 'not-sent'): Promise<PublishResult> {
    try {
      await (this.spool as Spool).append({ ...record, spooledAt: Date.now() });
    } catch (err) {
      if (err instanceof SpoolFullError) throw new SpoolFullError(err.directory, err.backlogBytes, err.maxBytes, { messageId: record.messageId, outcome: liveSend });
      throw new PublishError(
        `event ${record.messageId} for topic "${record.topic}" could not be spooled (${(err as Error).message})` +
          (liveSend === 'unknown' ? ' after its send to Kafka failed without an answer: it may be in Kafka already' : ' and was not sent') +
          `. Retry with the same messageId (${record.messageId}) so that consumers deduplicate.`,
        { messageIds: [record.messageId], outcome: liveSend, cause: err },
      );
    }
    this.counters.spooled++;
    this.metrics.published(record.topic, 'spooled');
    return { messageId: record.messageId, status: 'spooled' };
  }

  /**
   * Replays the spool in order whenever the breaker lets calls through, in requests capped by count and bytes.
   * A record Kafka can never take is moved to the spool's quarantine: at once when the cluster's facts about
   * its topic say so, else when the broker refuses it for good, found by halving the refused request until
   * the one record refused alone.
   */
  private async drainLoop(): Promise<void> {
    const spool = this.spool as Spool;
    const breaker = this.breaker as CircuitBreakerPolicy;
    const topics = this.topics as TopicInspector;
    let failures = 0;
    let maxRecords = DRAIN_MAX_RECORDS;
    while (this.draining) {
      try {
        if (spool.isEmpty) {
          await sleep(100);
          continue;
        }
        // No check of the breaker's state here: an open breaker only turns half-open when a call is attempted
        // after halfOpenAfter, and while it is open execute() fails at once without touching Kafka.
        const peeked = await spool.peek(maxRecords);
        if (peeked.length === 0) {
          await sleep(20);
          continue;
        }
        // A record no version of the publisher could send (an earlier one spooled it unchecked) is set aside at
        // once with its reason, never sent nor retried; one further back ends the request before it.
        const broken = peeked.findIndex((r) => unsendable(r) !== undefined);
        if (broken === 0) {
          this.quarantineOldest(`UNSENDABLE_RECORD: ${unsendable(peeked[0])}`);
          continue;
        }
        const waiting = broken > 0 ? peeked.slice(0, broken) : peeked;
        // What the cluster said about the waiting records' topics (looked up when missing or old, unless the
        // breaker is open): a request never carries more of a topic's records than the topic takes in one batch.
        // Sizes are left to the broker: only its refusal sets a record aside (halving below), never a guess.
        const lookUp = breaker.state !== CircuitState.Open;
        const facts = new Map<string, TopicFacts | undefined>();
        for (const topic of new Set(waiting.map((r) => r.topic))) facts.set(topic, lookUp ? await topics.get(topic, TOPIC_FACTS_MAX_AGE_MS) : topics.cached(topic));
        const head = waiting[0];
        if (this.confirmedMissing(head.topic, lookUp ? await topics.get(head.topic, REFUSAL_RECHECK_AGE_MS) : undefined)) {
          const grace = this.config().missingTopicGraceMs;
          const since = this.missingSince.get(head.topic) ?? Date.now();
          this.missingSince.set(head.topic, since);
          if (Date.now() - since >= grace) {
            this.quarantineOldest(`UNKNOWN_TOPIC_OR_PARTITION: topic ${head.topic} has not existed for ${Math.round((Date.now() - since) / 1000)} s`);
            continue;
          }
          // Held: the topic may be created a moment later, or recreated; acknowledged events wait for it.
          await sleep(1000);
          continue;
        }
        this.missingSince.delete(head.topic);
        let count = drainBatchSize(
          waiting.map((r) => ({ topic: r.topic, bytes: estimateRecordBytes(r) })),
          { maxRecords, maxBytes: DRAIN_MAX_BYTES, topicLimit: (topic) => facts.get(topic)?.maxMessageBytes || undefined },
        );
        // A later record whose topic is confirmed missing ends the request: the ones before it go first.
        for (let i = 1; i < count; i++) {
          if (this.confirmedMissing(waiting[i].topic, facts.get(waiting[i].topic))) count = i;
        }
        const batch = waiting.slice(0, count);
        let sent = false;
        try {
          const timeoutMs = this.config().sendTimeoutMs * 2;
          await breaker.execute(() => {
            const deadline = Date.now() + timeoutMs;
            return withDeadline(
              this.connected().then((producer) => {
                sent = true;
                return producer.send(groupByTopic(batch), { deadline });
              }),
              timeoutMs,
            );
          });
          // Their keys go live at once; the cursor is made durable while the next request goes out.
          void spool.acknowledge(batch.length).catch((err: Error) => this.logger.error(`spool cursor not written (${err.message}); these records may be sent again after a restart`));
          this.counters.drained += batch.length;
          this.metrics.drained(batch.length);
          failures = 0;
          maxRecords = DRAIN_MAX_RECORDS;
          if (spool.isEmpty) this.logger.log(`spool drained: ${this.counters.drained} records delivered to Kafka so far`);
        } catch (err) {
          if (sent && refusedForGood(err) !== UNENCODABLE_RECORD) {
            this.discard();
            // A topic deleted since it was looked up shows only as retries and timeouts: look again.
            for (const topic of new Set(batch.map((r) => r.topic))) topics.markStale(topic);
          }
          const refusal = refusedForGood(err);
          if (refusal && batch.length > 1) {
            // Which record is refused is not in the answer: halve the request until one record is refused alone.
            maxRecords = Math.ceil(batch.length / 2);
            this.logger.debug(`the broker refused a drain request of ${batch.length} records (${refusal}); retrying with ${maxRecords}`);
            continue;
          }
          if (refusal) {
            this.quarantineOldest(describeRefusal(refusal, err));
            maxRecords = DRAIN_MAX_RECORDS;
            continue;
          }
          failures++;
          this.logger.debug(`spool drain failed (${(err as Error).message})`);
          await sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)));
        }
      } catch (err) {
        // The spool's own I/O failed (disk full, permissions): keep the drainer alive and try again.
        this.logger.error(`spool drain: ${(err as Error).message}; retrying in 1 s`);
        await sleep(1000);
      }
    }
  }

  /** The cluster said, in a look-up of the last few seconds, that the topic does not exist. */
  private confirmedMissing(topic: string, facts: TopicFacts | undefined): boolean {
    return facts !== undefined && !facts.exists && Date.now() - facts.checkedAt <= 2 * REFUSAL_RECHECK_AGE_MS;
  }

  private quarantineOldest(reason: string): void {
    const spool = this.spool as Spool;
    const record = spool.quarantineOldest(reason);
    this.logger.warn(
      `quarantined spooled record ${record.messageId} of topic ${record.topic}: it can never be sent (${reason}); ` +
        `kept in ${spool.quarantine().file}, the records behind it move on`,
    );
  }

  /**
   * The transactional producer, after its InitProducerId: that call makes the broker abort (or complete) any
   * transaction an earlier run of this instance left open. Runs at bootstrap too, in settleEarlierTransaction.
   */
  private async readyTransactional(): Promise<CheckedProducer> {
    if (this.transactional && this.transactionalReady) return this.transactional;
    const prefix = this.options.transactionalIdPrefix;
    const instanceId = this.instanceId as string;
    const producer = (this.transactional ??= this.createProducer({
      transactionalId: publisherTransactionalId(prefix, instanceId),
      transactionTimeout: this.options.transactionTimeoutMs,
    }));
    const deadline = Math.max(10000, this.config().sendTimeoutMs * 2);
    try {
      // The id of versions before 0.3 first (a transaction a crash of such a version left open), then the own:
      // connect() runs the transactional InitProducerId.
      if (!this.legacyFenced) {
        await withDeadline(fenceTransactionalId(this.kafka, legacyTransactionalIds.publisher(prefix, instanceId), { transactionTimeout: this.options.transactionTimeoutMs, retry: this.options.kafka.retry }), deadline);
        this.legacyFenced = true;
      }
      await withDeadline(producer.connect(), deadline);
      this.transactionalReady = true;
      return producer;
    } catch (err) {
      await this.discardTransactional();
      throw err;
    }
  }

  private async discardTransactional(): Promise<void> {
    const broken = this.transactional;
    this.transactional = undefined;
    this.transactionalReady = false;
    await withDeadline(broken?.disconnect() ?? Promise.resolve(), 5000).catch(() => undefined);
  }

  /**
   * At bootstrap, and until Kafka answers: run the transactional InitProducerId, so that a publishAll
   * transaction a crash of this instance left open is settled now, not when its timeout expires (until then it
   * holds back every read-committed reader of its partitions).
   */
  private async settleEarlierTransaction(): Promise<void> {
    for (let attempt = 0; this.running && !this.transactionalReady; attempt++) {
      const run = this.transactionalQueue.catch(() => undefined).then(() => this.readyTransactional());
      this.transactionalQueue = run;
      if (await run.then(() => true, () => false)) return;
      const until = Date.now() + Math.min(30000, 500 * 2 ** Math.min(attempt, 6));
      while (this.running && Date.now() < until) await sleep(100);
    }
  }

}

/**
 * The refusal the facts support: only facts of the last few seconds refuse a publish. Older ones (the breaker
 * is open, the cluster cannot be asked again) say what was, maybe not what is: an operator may have created the
 * topic or raised its limit since. The record is spooled then, and the drainer decides when Kafka answers.
 */
export function trustedRefusal(record: SpooledRecord, bytes: number, facts: TopicFacts | undefined, now: number): UndeliverableEventError | undefined {
  const verdict = judge(record, bytes, facts);
  return verdict && facts && now - facts.checkedAt <= REFUSAL_RECHECK_AGE_MS ? verdict : undefined;
}

/** Why Kafka can never take `record`, from the facts about its topic; undefined when it can or they are unknown. */
function judge(record: SpooledRecord, bytes: number, facts: TopicFacts | undefined): UndeliverableEventError | undefined {
  if (!facts) return undefined;
  if (!facts.exists) return UndeliverableEventError.unknownTopic(record.topic, record.messageId);
  // A limit guessed from the broker's default (the topic's own could not be read) refuses nothing: the broker decides.
  if (facts.limitSource === 'topic max.message.bytes' && bytes > facts.maxMessageBytes) {
    return UndeliverableEventError.tooLarge(record.topic, record.messageId, bytes, facts.maxMessageBytes, facts.limitSource);
  }
  return undefined;
}


function keyString(record: SpooledRecord): string {
  return record.key === null ? '' : Buffer.from(record.key, 'base64').toString('utf8');
}

/** The record to send; throws UnsendableHeadersError for headers no version could send (see unsendable). */
function toMessage(record: SpooledRecord): Message {
  return {
    key: record.key === null ? null : Buffer.from(record.key, 'base64'),
    value: Buffer.from(record.value, 'base64'),
    headers: fromDurableHeaders(record.headers),
  };
}

/**
 * Why a spooled record can never be sent, or undefined. The publisher checks every record before it spools it;
 * this finds the ones an earlier version spooled unchecked (a number as a header value, say), or a file edited
 * by hand, so that they are set aside instead of blocking their key and the drainer.
 */
export function unsendable(record: SpooledRecord): string | undefined {
  if (typeof record.topic !== 'string' || record.topic === '') return 'it names no topic';
  if (typeof record.value !== 'string') return 'it has no value';
  if (record.key !== null && typeof record.key !== 'string') return 'its key is neither null nor bytes';
  try {
    fromDurableHeaders(record.headers);
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

function groupByTopic(records: SpooledRecord[]): Array<{ topic: string; messages: Message[] }> {
  return byTopic(records.map((record) => ({ topic: record.topic, message: toMessage(record) })));
}

/** Where a publish was written, as PublishResult tells it. */
function placed(placement: Placement | undefined): { partition?: number; offset?: string } {
  return { partition: placement?.partition, offset: placement?.offset };
}

/** The messages of a request grouped by topic, each topic's in the order given. */
function byTopic<T>(entries: Array<{ topic: string; message: T }>): Array<{ topic: string; messages: T[] }> {
  const topics = new Map<string, T[]>();
  for (const { topic, message } of entries) {
    const messages = topics.get(topic);
    if (messages) messages.push(message);
    else topics.set(topic, [message]);
  }
  return [...topics].map(([topic, messages]) => ({ topic, messages }));
}
