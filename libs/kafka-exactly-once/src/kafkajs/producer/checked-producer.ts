import { Logger } from '@nestjs/common';
import type { Message, PartitionMetadata, RetryOptions } from 'kafkajs';
import type { KafkaClient } from '../client';
import { ProduceIncompleteError } from '../../errors/produce-incomplete.error';
import { sleep } from '../../engine/sleep';
import { driverPartsOf } from '../../client/driver-parts';
import { type ProducerCluster, type ProducerDriver, type ProducerParts, type TransactionManager } from '../../client/producer-parts';
import { cacheCoordinators } from './coordinator-cache';
import { createCluster, createEosManager, KafkaJsBroker, KafkaJsCluster, KafkaJsLogger, murmur2, protocolError, sendProduce } from './kafkajs-internals';
import { Placement, ProduceCall, ProduceCallDeps, TopicMessages } from './produce-call';
import { UNENCODABLE_RECORD, unencodablePart } from './produce-encoding';

export interface CheckedProducerOptions {
  /** A transactional producer's id; without it the producer is idempotent. */
  transactionalId?: string;
  /** The transaction timeout the broker holds the producer's transactions to. */
  transactionTimeout?: number;
  /** Waits between the rounds of one send (KafkaJS's retry options, its defaults). */
  retry?: RetryOptions;
  /** How long the broker may wait for the in-sync replicas of one Produce request. */
  ackTimeoutMs?: number;
}

/** @internal What a CheckedProducer drives, for the unit specs (its driver's by default). */
export interface ProducerSeams {
  cluster?: ProducerCluster;
  produce?: ProduceCallDeps['produce'];
}

export interface SendOptions {
  /** No request is started after this time (ms since the epoch); a send whose turn comes later is not sent. */
  deadline?: number;
}

const DEFAULT_RETRY = { retries: 5, initialRetryTime: 300, multiplier: 2, maxRetryTime: 30000, factor: 0.2 };

/**
 * The library's Kafka producer: KafkaJS 2.2.4's cluster, connections and eosManager, with a send path of its own
 * (ProduceCall) that counts a send written only when the broker answered for every partition it placed records
 * on, and that never reuses a sequence number. KafkaJS's own producer can answer "sent" for records it never
 * wrote, or write them twice, when partition leaders move (docs/guarantees.md, "A client's yes is checked").
 *
 * One send at a time per producer (live sends, a spool drain and a transaction's sends queue behind each
 * other): sequence numbers are per producer and partition, and a second batch in flight would be judged
 * against the first. A send that ends with records in doubt makes the producer take a new producer id (an
 * idempotent producer) or the next epoch of its transactional id (which aborts its open transaction, and fences
 * any request of the old epoch still on the way) before its next send; a disconnected producer starts no request.
 */
export class CheckedProducer {
  private readonly logger = new Logger(CheckedProducer.name);
  private readonly parts: ProducerParts;
  private readonly cluster: ProducerCluster;
  private eos: TransactionManager;
  private queue: Promise<unknown> = Promise.resolve();
  /** A send or the end of a transaction failed: a new producer id or epoch before the producer is used again. */
  private renewBeforeNextUse = false;
  private stopped = false;
  private open?: CheckedTransaction;
  private readonly retry: ProduceCallDeps['retry'];

  private readonly sendProduce: ProduceCallDeps['produce'];

  constructor(
    kafka: KafkaClient,
    private readonly options: CheckedProducerOptions = {},
    seams: ProducerSeams = {},
  ) {
    this.retry = { ...DEFAULT_RETRY, ...stripUndefined(options.retry ?? {}) } as ProduceCallDeps['retry'];
    // A seam's cluster (the unit specs') runs KafkaJS's eosManager over it.
    const driver = (seams.cluster ? undefined : driverPartsOf(kafka)?.producers) ?? kafkaJsProducer(kafka, seams.cluster);
    const parts = driver({ transactionalId: options.transactionalId, transactionTimeout: options.transactionTimeout, retry: this.retry, stopped: () => this.stopped });
    this.parts = { ...parts, produce: seams.produce ?? parts.produce };
    this.cluster = this.parts.cluster;
    this.sendProduce = this.parts.produce;
    this.eos = this.parts.newTransactionManager();
  }

  get transactionalId(): string | undefined {
    return this.options.transactionalId;
  }

  /** Connects, and runs InitProducerId (a transactional id's: settles what an earlier owner of the id left open). */
  async connect(): Promise<void> {
    this.stopped = false;
    await this.cluster.connect();
    if (!this.eos.isInitialized() || this.renewBeforeNextUse) await this.renew();
  }

  /** Starts no further request; a send in progress ends with its current round. */
  async disconnect(): Promise<void> {
    this.stopped = true;
    await this.cluster.disconnect();
  }

  /**
   * Sends records with the idempotent producer, after the sends before it: resolves with each record's place
   * (in the order given) once the broker answered for every partition; throws ProduceIncompleteError otherwise.
   */
  send(topicMessages: TopicMessages[], options: SendOptions = {}): Promise<Placement[]> {
    if (this.options.transactionalId) return Promise.reject(new Error(`producer ${this.options.transactionalId} is transactional: send inside transaction()`));
    return this.exclusive(async () => {
      if (this.stopped) throw notSent('the producer is disconnected');
      if (options.deadline !== undefined && Date.now() >= options.deadline) throw notSent('the send deadline passed before its turn came');
      if (this.renewBeforeNextUse) await this.renew();
      return this.produce(topicMessages, options.deadline);
    });
  }

  /** Opens the producer's transaction (one at a time), after a new epoch if the last one ended in doubt. */
  async transaction(): Promise<CheckedTransaction> {
    if (!this.options.transactionalId) throw new Error('an idempotent producer has no transactions: give it a transactionalId');
    if (this.open?.isActive()) throw new Error(`producer ${this.options.transactionalId} already has an open transaction`);
    if (this.stopped) throw notSent('the producer is disconnected');
    if (this.renewBeforeNextUse || !this.eos.isInitialized()) await this.renew();
    this.eos.beginTransaction();
    this.open = new CheckedTransaction(this, this.eos);
    return this.open;
  }

  /** @internal The sends of a transaction queue like any other. */
  exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.catch(() => undefined).then(task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** @internal */
  async produce(topicMessages: TopicMessages[], deadline?: number): Promise<Placement[]> {
    for (const { topic, messages } of topicMessages) {
      if (!topic) throw notSent('a send names no topic');
      if (messages.some((m) => m.value === undefined)) throw notSent(`a record for ${topic} has no value (null is a tombstone; undefined is not allowed)`);
      for (const message of messages) {
        const part = unencodablePart(message);
        if (part) throw unencodable(`a record for ${topic} cannot be encoded: ${part} (a key, value or header value must be a Buffer, a string or null)`);
      }
    }
    const call = new ProduceCall(
      {
        cluster: this.cluster,
        eos: this.eos,
        partition: partitionOf,
        produce: this.sendProduce,
        protocolError: this.parts.protocolError,
        retry: this.retry,
        ackTimeoutMs: this.options.ackTimeoutMs ?? 30000,
        stopped: () => this.stopped,
        deadline,
        log: (message) => this.logger.debug(`${this.options.transactionalId ?? 'idempotent producer'}: ${message}`),
        sleep,
      },
      topicMessages,
    );
    try {
      return await call.run();
    } finally {
      if (call.inDoubt) this.renewBeforeNextUse = true;
    }
  }

  /** @internal */
  markCommitted(groupId: string, topics: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>): void {
    for (const { topic, partitions } of topics) for (const { partition, offset } of partitions) this.cluster.markOffsetAsCommitted({ groupId, topic, partition, offset });
  }

  /** @internal The end of a transaction failed: its state is unknown to this producer. */
  endFailed(): void {
    this.renewBeforeNextUse = true;
  }

  /** @internal Whether a send ended in doubt: the next use takes a new producer id or epoch first. */
  get inDoubt(): boolean {
    return this.renewBeforeNextUse;
  }

  /**
   * @internal Ends a transaction whose sends are in doubt by taking the next epoch at once: the coordinator aborts
   * the open transaction under the new epoch, which fences a request of the old one still on its way (with an
   * abort under the old epoch, such a request could land after the markers and leave a hanging transaction).
   */
  async abortByRenewing(): Promise<void> {
    await this.renew();
  }

  /** A new producer id (idempotent) or the transactional id's next epoch, with sequences from 0. */
  private async renew(): Promise<void> {
    const eos = this.parts.newTransactionManager();
    await eos.initProducerId();
    this.eos = eos;
    this.renewBeforeNextUse = false;
  }
}

/** A transaction of a CheckedProducer: its sends, the consumer offsets it commits, and its end. */
export class CheckedTransaction {
  private ended = false;
  private failed?: unknown;

  constructor(
    private readonly producer: CheckedProducer,
    private readonly eos: TransactionManager,
  ) {}

  isActive(): boolean {
    return !this.ended && this.eos.isInTransaction();
  }

  /** Sends records in the transaction; a failure leaves it only to be aborted. */
  send(topicMessages: TopicMessages[]): Promise<Placement[]> {
    return this.producer.exclusive(async () => {
      this.guard();
      if (this.failed) throw new Error(`a request of this transaction failed (${(this.failed as Error)?.message ?? this.failed}): it can only be aborted`, { cause: this.failed });
      try {
        return await this.producer.produce(topicMessages);
      } catch (err) {
        this.failed ??= err;
        throw err;
      }
    });
  }

  /** Commits these consumer offsets with the transaction (TxnOffsetCommit). */
  async sendOffsets(args: { consumerGroupId: string; topics: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }> }): Promise<void> {
    this.guard();
    try {
      await this.eos.sendOffsets(args);
    } catch (err) {
      this.failed ??= err;
      throw err;
    }
    this.producer.markCommitted(args.consumerGroupId, args.topics);
  }

  async commit(): Promise<void> {
    this.guard();
    if (this.failed) throw new Error(`a request of this transaction failed (${(this.failed as Error)?.message ?? this.failed}): it can only be aborted`, { cause: this.failed });
    await this.end(() => this.eos.commit());
  }

  async abort(): Promise<void> {
    this.guard();
    if (this.producer.inDoubt) {
      this.ended = true;
      await this.producer.abortByRenewing().catch((err) => {
        this.producer.endFailed();
        throw err;
      });
      return;
    }
    await this.end(() => this.eos.abort());
  }

  private async end(end: () => Promise<void>): Promise<void> {
    this.ended = true;
    try {
      await end();
    } catch (err) {
      this.producer.endFailed();
      throw err;
    }
  }

  private guard(): void {
    if (!this.isActive()) throw new Error('the transaction has ended');
  }
}

/**
 * KafkaJS 2.2.4's cluster, connections and eosManager under a CheckedProducer (the `kafkajs` driver): a cluster of
 * the library's client (its coordinators cached), and KafkaJS's Produce request with the body written by the library.
 */
function kafkaJsProducer(kafka: KafkaClient, given?: ProducerCluster): ProducerDriver {
  return ({ transactionalId, transactionTimeout, stopped }) => {
    const cluster = (given as KafkaJsCluster | undefined) ?? cacheCoordinators(createCluster(kafka, { allowAutoTopicCreation: false, maxInFlightRequests: 1 }), { stopped });
    const logger = (kafka.logger() as unknown as KafkaJsLogger).namespace('Producer');
    return {
      cluster,
      newTransactionManager: () => createEosManager({ logger, cluster, transactionTimeout, transactional: transactionalId !== undefined, transactionalId }),
      produce: (broker, args) => sendProduce(broker as KafkaJsBroker, args),
      protocolError,
    };
  };
}

/**
 * Runs InitProducerId for a transactional id and lets it go: a producer still using it (a stalled instance) is
 * fenced, and the transaction it left open is aborted (or completed, if its commit was decided).
 */
export async function fenceTransactionalId(kafka: KafkaClient, transactionalId: string, options: Omit<CheckedProducerOptions, 'transactionalId'> = {}): Promise<void> {
  const producer = new CheckedProducer(kafka, { ...options, transactionalId });
  try {
    await producer.connect();
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
}

/**
 * A record's partition: the Java client's (and KafkaJS's) murmur2 of its key; a record without a key by the
 * same hash of its value, so that the partition of a record never depends on when or how often it is sent.
 */
export function partitionOf(_topic: string, partitions: PartitionMetadata[], message: Message): number {
  if (message.partition !== undefined && message.partition !== null) return message.partition;
  const bytes = message.key ?? message.value ?? '';
  return (murmur2(bytes as Buffer | string) & 0x7fffffff) % partitions.length;
}

/** A record refused before any request carried it: not written, and refused for good (UNENCODABLE_RECORD). */
function unencodable(why: string): ProduceIncompleteError {
  const cause = Object.assign(new TypeError(why), { type: UNENCODABLE_RECORD, retriable: false });
  return new ProduceIncompleteError(`send not started: ${why}`, { outcome: 'not-written', written: [], cause });
}

function notSent(why: string): ProduceIncompleteError {
  return new ProduceIncompleteError(`send not started: ${why}`, { outcome: 'not-written', written: [] });
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
