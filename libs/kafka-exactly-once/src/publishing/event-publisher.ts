import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { CircuitBreakerPolicy, CircuitState, ConsecutiveBreaker, circuitBreaker, handleAll } from 'cockatiel';
import { randomUUID } from 'crypto';
import { Kafka, Message, Partitioners, Producer, ProducerConfig } from 'kafkajs';
import { sleep } from '../engine/sleep';
import { uuidv7 } from '../engine/message-ids';
import { MissingKeyError } from '../errors/missing-key.error';
import { PublishError } from '../errors/publish.error';
import { UndeclaredTopicError } from '../errors/undeclared-topic.error';
import { HEADERS, KAFKA_CLIENT, RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import type { ResolvedOptions } from '../options/resolved-options';
import { SchemaRegistry } from '../serde/schema-registry';
import { encodeSingleObject } from '../serde/single-object.codec';
import { Spool } from '../spool/spool';
import type { SpooledRecord } from '../spool/spool-record';
import type { PublishAllItem, PublishOptions, PublishResult, PublisherStatus } from './publish.interfaces';

class DeadlineExceeded extends Error {
  constructor(ms: number) {
    super(`Kafka did not acknowledge within ${ms} ms`);
    this.name = 'DeadlineExceeded';
  }
}

function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([promise, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new DeadlineExceeded(ms)), ms)))]).finally(() =>
    clearTimeout(timer),
  );
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
 * idempotent producer (acks all, one request in flight). When Kafka fails, the send passes its deadline or the
 * circuit breaker is open, the record is appended to a durable local spool (fsync before `publish` resolves
 * `spooled`), and a drainer replays the spool in order when Kafka is back. While a key has records in the
 * spool, its new records queue behind them.
 *
 * @example
 * const { messageId, status } = await publisher.publish('payments.requested', payment, { key: payment.accountId });
 */
@Injectable()
export class EventPublisher implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(EventPublisher.name);
  private producer?: Producer;
  private transactional?: Producer;
  private transactionalQueue: Promise<unknown> = Promise.resolve();
  private spool?: Spool;
  private breaker?: CircuitBreakerPolicy;
  private readonly chains = new Map<string, Promise<unknown>>();
  private draining = false;
  private drainer?: Promise<void>;
  private readonly counters = { sent: 0, spooled: 0, drained: 0 };
  /** One transactional id per publisher instance, so that a replacement producer settles what a broken one left open. */
  private readonly instanceId = randomUUID();
  private isConnected = false;
  private connecting?: Promise<Producer>;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(KAFKA_CLIENT) private readonly kafka: Kafka,
    private readonly registry: SchemaRegistry,
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
    this.breaker = circuitBreaker(handleAll, {
      halfOpenAfter: config.breaker.halfOpenAfterMs,
      breaker: new ConsecutiveBreaker(config.breaker.consecutiveFailures),
    });
    this.breaker.onStateChange((state) => this.logger.warn(`Kafka circuit breaker is ${BREAKER_STATES[state]}`));
    // Kafka may be down at boot: the publisher starts anyway, spools, and connects when Kafka is back.
    void this.connected().catch((err) => this.logger.warn(`Kafka not reachable at start-up (${err.message}); publishing to the spool`));
    this.draining = true;
    this.drainer = this.drainLoop();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.draining = false;
    await this.drainer;
    await Promise.all([...this.chains.values()].map((chain) => chain.catch(() => undefined)));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.spool?.close();
    await this.producer?.disconnect().catch(() => undefined);
    await this.transactional?.disconnect().catch(() => undefined);
  }

  /** Validates, encodes and sends one event, or spools it; resolves only when it is in Kafka or on disk. */
  async publish(topic: string, event: unknown, options: PublishOptions = {}): Promise<PublishResult> {
    this.config();
    const record = this.prepare(topic, event, options);
    return this.inKeyOrder([record], () => this.deliver(record));
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
    const records = items.map((item) => this.prepare(item.topic, item.event, item));
    const messageIds = records.map((r) => r.messageId);
    const transactions = this.transactionalQueue.catch(() => undefined);
    const run = this.inKeyOrder(records, async () => {
      await transactions; // one open transaction at a time
      for (const record of records) {
        if (this.spool?.hasKey(record.topic, keyString(record))) {
          throw new PublishError(
            `publishAll: key "${keyString(record)}" of ${record.topic} has events waiting in the spool; sending now would overtake them. Retry once the spool has drained.`,
            { messageIds, outcome: 'not-sent' },
          );
        }
      }
      this.transactional ??= await this.connectTransactional();
      const txn = await this.transactional.transaction();
      let committing = false;
      try {
        await txn.sendBatch({ topicMessages: groupByTopic(records), acks: -1 });
        committing = true;
        await txn.commit();
      } catch (err) {
        await txn.abort().catch(() => undefined);
        // NOTE: when a batch fails part-way (one partition accepted, another refused), KafkaJS may not know that
        // the accepted partition joined the transaction, and its abort() then stays local while the broker
        // keeps the transaction open, holding back every read-committed consumer. Replace the producer: the
        // next one, with the same transactional id, runs InitProducerId, which makes the broker abort it (or
        // complete it, if the commit had been decided).
        const broken = this.transactional;
        this.transactional = undefined;
        await broken?.disconnect().catch(() => undefined);
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
      return records.map((r) => ({ messageId: r.messageId }));
    });
    this.transactionalQueue = run;
    return run;
  }

  status(): PublisherStatus {
    return {
      breaker: this.breaker ? BREAKER_STATES[this.breaker.state] : 'closed',
      spool: this.spool?.backlog() ?? { records: 0, bytes: 0, oldestAgeMs: 0 },
      ...this.counters,
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

  private prepare(topic: string, event: unknown, options: PublishOptions): SpooledRecord {
    const declared = this.options.topics[topic];
    if (!declared) throw new UndeclaredTopicError(topic);
    const key = options.key ?? declared.key?.(event);
    if (typeof key !== 'string' || key === '') throw new MissingKeyError(topic);
    const schema = this.registry.current(declared.schema);
    const value = encodeSingleObject(schema, event); // throws EventValidationError: nothing sent or spooled
    const messageId = options.messageId ?? uuidv7();
    return {
      topic: `${this.options.topicPrefix}${topic}`,
      key: Buffer.from(key).toString('base64'),
      value: value.toString('base64'),
      headers: { ...options.headers, [HEADERS.messageId]: messageId, [HEADERS.eventType]: schema.name },
      messageId,
      spooledAt: 0,
    };
  }

  /**
   * The producer, connected. KafkaJS reconnects a connected producer by itself after a broker restart, but a
   * producer whose first connect() failed is not reliably usable again: connect a new one instead (one attempt
   * at a time; publishes meanwhile hit their deadline and spool).
   */
  private connected(): Promise<Producer> {
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

  /** The enforced settings: idempotent, one request in flight (order), no topic auto-creation. */
  private createProducer(extra: Omit<ProducerConfig, 'idempotent' | 'maxInFlightRequests'> = {}): Producer {
    return this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      createPartitioner: Partitioners.DefaultPartitioner,
      ...extra,
    });
  }

  private async deliver(record: SpooledRecord): Promise<PublishResult> {
    const spool = this.spool as Spool;
    const breaker = this.breaker as CircuitBreakerPolicy;
    if (spool.hasKey(record.topic, keyString(record)) || breaker.state === CircuitState.Open) return this.toSpool(record);
    try {
      const [meta] = await breaker.execute(() =>
        withDeadline(
          this.connected().then((producer) => producer.send({ topic: record.topic, messages: [toMessage(record)], acks: -1 })),
          this.config().sendTimeoutMs,
        ),
      );
      this.counters.sent++;
      return { messageId: record.messageId, status: 'sent', partition: meta?.partition, offset: meta?.baseOffset };
    } catch (err) {
      // Failed, past its deadline, or the breaker is open. A send past its deadline may still land later
      // (KafkaJS retries it): that copy is a duplicate the consumers absorb by message id.
      this.logger.debug(`send to ${record.topic} failed (${(err as Error).message}); spooling ${record.messageId}`);
      return this.toSpool(record);
    }
  }

  private async toSpool(record: SpooledRecord): Promise<PublishResult> {
    await (this.spool as Spool).append({ ...record, spooledAt: Date.now() });
    this.counters.spooled++;
    return { messageId: record.messageId, status: 'spooled' };
  }

  /** Replays the spool in order whenever the breaker lets calls through. */
  private async drainLoop(): Promise<void> {
    const spool = this.spool as Spool;
    const breaker = this.breaker as CircuitBreakerPolicy;
    let failures = 0;
    while (this.draining) {
      if (spool.isEmpty) {
        await sleep(100);
        continue;
      }
      // No check of the breaker's state here: an open breaker only turns half-open when a call is attempted
      // after halfOpenAfter, and while it is open execute() fails at once without touching Kafka.
      const batch = await spool.peek(500);
      if (batch.length === 0) {
        await sleep(20);
        continue;
      }
      try {
        await breaker.execute(() =>
          withDeadline(
            this.connected().then((producer) => producer.sendBatch({ topicMessages: groupByTopic(batch), acks: -1 })),
            this.config().sendTimeoutMs * 2,
          ),
        );
        spool.acknowledge(batch.length);
        this.counters.drained += batch.length;
        failures = 0;
        if (spool.isEmpty) this.logger.log(`spool drained: ${this.counters.drained} records delivered to Kafka so far`);
      } catch (err) {
        failures++;
        this.logger.debug(`spool drain failed (${(err as Error).message})`);
        await sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)));
      }
    }
  }

  private async connectTransactional(): Promise<Producer> {
    const producer = this.createProducer({
      transactionalId: `${this.options.transactionalIdPrefix}.publisher.${this.instanceId}`,
      retry: { retries: 3 },
    });
    await producer.connect();
    return producer;
  }
}

function keyString(record: SpooledRecord): string {
  return record.key === null ? '' : Buffer.from(record.key, 'base64').toString('utf8');
}

function toMessage(record: SpooledRecord): Message {
  return {
    key: record.key === null ? null : Buffer.from(record.key, 'base64'),
    value: Buffer.from(record.value, 'base64'),
    headers: record.headers,
  };
}

function groupByTopic(records: SpooledRecord[]): Array<{ topic: string; messages: Message[] }> {
  const byTopic = new Map<string, Message[]>();
  for (const record of records) byTopic.set(record.topic, [...(byTopic.get(record.topic) ?? []), toMessage(record)]);
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}
