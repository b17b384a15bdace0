import { Logger } from '@nestjs/common';
import type { PartitionMetadata } from 'kafkajs';
import type { KafkaConnectionOptions } from '../client/drivers';
import { KafkaConnectionError, KafkaProtocolError } from '../client/kafka-errors';
import type { ProduceBroker, ProducerCluster, ProducerDriver, ProducerPartsOptions, TransactionManager } from '../client/producer-parts';
import { sleep } from '../engine/sleep';
import type { ProduceAnswer, ProduceArgs } from '../kafkajs/producer/kafkajs-internals';
import { delay } from '../kafkajs/producer/produce-call';
import { encodeProduceBody } from '../kafkajs/producer/produce-encoding';
import { connectionOptions, platformaticKafka, type PlatformaticKafka } from './load';

/** A broker as the metadata names it. */
interface Node extends ProduceBroker {
  host: string;
  port: number;
}

type Connection = PlatformaticKafka.Connection;

/** Coordinator types of FindCoordinator. */
const GROUP = 0;
const TRANSACTION = 1;

/** Answers after which the coordinator is looked up again. */
const STALE_COORDINATOR = new Set(['NOT_COORDINATOR', 'COORDINATOR_NOT_AVAILABLE']);
/** Answers of the transaction coordinator that say "again, in a moment" (a transaction still ending, a coordinator loading). */
const AGAIN = new Set(['CONCURRENT_TRANSACTIONS', 'COORDINATOR_LOAD_IN_PROGRESS', 'NOT_COORDINATOR', 'COORDINATOR_NOT_AVAILABLE', 'UNKNOWN_TOPIC_OR_PARTITION', 'REQUEST_TIMED_OUT']);

/** The Produce version the library's encoder writes (3 to 8 share the body) and both Kafka 3.9 and 4.x accept. */
const PRODUCE_VERSION = 8;
/** KafkaJS's (and the Java client's) default transaction timeout. */
const DEFAULT_TRANSACTION_TIMEOUT = 60000;
const INT32_MAX = 2 ** 31 - 1;

/**
 * The library's producers on @platformatic/kafka (the `platformatic` driver): the same CheckedProducer and ProduceCall
 * as on KafkaJS (each Produce answer checked, sequences never reused, a producer in doubt renewed), over the client's
 * connections and protocol functions (Metadata v12, FindCoordinator v4, InitProducerId v4, AddPartitionsToTxn v3,
 * AddOffsetsToTxn v3, TxnOffsetCommit v3, EndTxn v3) instead of KafkaJS's cluster and eosManager. Its own Producer
 * class is not used: it sends InitProducerId with producer id 0 for a transactional id used before (refused as
 * PRODUCER_FENCED; here -1/-1, a new producer's), waits a second after every commit, and its send path is not the
 * library's (docs/drivers.md).
 */
export function platformaticProducers(connection: KafkaConnectionOptions): ProducerDriver {
  const options = connectionOptions(connection);
  return (producer) => {
    const cluster = new PlatformaticProducerCluster(options, producer);
    return {
      cluster,
      newTransactionManager: () => new PlatformaticTransactions(cluster, producer),
      produce: (broker, args) => cluster.produce(broker as Node, args),
      protocolError,
    };
  };
}

/** A Kafka error code as the library's classification reads it (its name, whether a retry may succeed). */
export function protocolError(code: number): KafkaProtocolError {
  const { protocolErrors, protocolErrorsCodesById } = platformaticKafka() as unknown as {
    protocolErrors: Record<string, { id: string; code: number; message: string; canRetry: boolean }>;
    protocolErrorsCodesById: Record<number, string>;
  };
  const known = protocolErrors[protocolErrorsCodesById[code]];
  return known ? new KafkaProtocolError(known.id, code, known.canRetry, known.message) : new KafkaProtocolError(`UNKNOWN_ERROR_CODE_${code}`, code, false, `Kafka error code ${code}`);
}

/**
 * The client's failure as the library's: a broker's error code (the first that is not OPERATION_NOT_ATTEMPTED, which
 * only says another one stopped the request) as KafkaProtocolError; no answer (a connection refused, lost or timed
 * out) as KafkaConnectionError; anything else (a refusal of the credentials, a bug) as it is.
 */
export function kafkaError(err: unknown): Error {
  const inner = innermost(err);
  // A broker's error codes: ProtocolErrors, alone or inside a ResponseError.
  const protocol = inner.filter((e): e is ClientProtocolError => typeof e.apiId === 'string' && typeof e.apiCode === 'number');
  if (protocol.length > 0) {
    const first = protocol.find((p) => p.apiId !== 'OPERATION_NOT_ATTEMPTED') ?? protocol[0];
    return new KafkaProtocolError(first.apiId, first.apiCode, first.canRetry === true, first.message ?? first.apiId, { cause: err });
  }
  // The broker refused the credentials (SASL): a refusal to report, not an absence to wait out. The client reports
  // it as the cause of the connection's NetworkError.
  const refused = inner.map((e) => causeWithCode(e, 'PLT_KFK_AUTHENTICATION')).find((e) => e !== undefined);
  if (refused) return new KafkaSaslAuthenticationError(refused.message ?? 'SASL authentication failed', { cause: refused });
  // No broker answered (every one of the list, in the pool's MultipleErrors): a connection fault. Its cause is the
  // first failure itself (a TLS handshake's error code is read there).
  const unanswered = (e: { code?: string }) => e.code === 'PLT_KFK_NETWORK' || e.code === 'PLT_KFK_TIMEOUT' || /^E[A-Z]+$/.test(String(e.code ?? ''));
  if (inner.length > 0 && inner.every(unanswered)) {
    const first = inner[0] as { message?: string; cause?: unknown };
    return new KafkaConnectionError((err as Error)?.message ?? first.message ?? String(err), { cause: first.cause ?? first });
  }
  return err instanceof Error ? err : new Error(String(err));
}

/** `err` or the first error of its cause chain with the client's error `code`. */
function causeWithCode(err: { code?: string; message?: string; cause?: unknown }, code: string): { message?: string } | undefined {
  for (let e: typeof err | undefined = err, depth = 0; e && typeof e === 'object' && depth < 6; e = e.cause as typeof err | undefined, depth++) if (e.code === code) return e;
  return undefined;
}

/** One of the client's errors as kafkaError reads it. */
interface ClientError {
  code?: string;
  message?: string;
  apiId?: string;
  apiCode?: number;
  canRetry?: boolean;
}
type ClientProtocolError = ClientError & { apiId: string; apiCode: number };

/** The client's errors inside `err` (a MultipleErrors' or ResponseError's `errors`, each in turn), or `err` itself. */
function innermost(err: unknown, depth = 0): ClientError[] {
  const e = err as (ClientError & { errors?: unknown[] }) | undefined;
  if (!e || typeof e !== 'object') return [];
  if (Array.isArray(e.errors) && e.errors.length > 0 && depth < 4) return e.errors.flatMap((inner) => innermost(inner, depth + 1));
  return [e];
}

/** The broker refused this client's SASL credentials (read by KafkaAuthenticationError.from). */
export class KafkaSaslAuthenticationError extends Error {
  override readonly name = 'KafkaSASLAuthenticationError';
  readonly retriable = false;
}

/** A `host:port` of the bootstrap list. */
function bootstrapNode(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
}

/**
 * One producer's view of the cluster: its own connections (one per broker, one request at a time, as KafkaJS's
 * cluster for the library's producers), the metadata of the topics it writes, and the coordinators it was told.
 */
export class PlatformaticProducerCluster implements ProducerCluster {
  private pool?: PlatformaticKafka.ConnectionPool;
  private readonly brokers = new Map<number, Node>();
  private readonly partitions = new Map<string, PartitionMetadata[]>();
  private readonly targets = new Set<string>();
  private readonly coordinators = new Map<string, Node>();
  private fetchedAt = 0;
  private refreshing?: Promise<void>;
  private connecting?: Promise<void>;

  constructor(
    private readonly options: ReturnType<typeof connectionOptions>,
    private readonly producer: Pick<ProducerPartsOptions, 'stopped'>,
  ) {}

  async connect(): Promise<void> {
    if (!this.pool) {
      const { ConnectionPool } = platformaticKafka();
      const { clientId, tls, sasl, connectTimeout, requestTimeout } = this.options;
      this.pool = new ConnectionPool(clientId, { tls, sasl, connectTimeout, requestTimeout, maxInflights: 1 });
    }
    await this.refreshMetadata();
  }

  /** Connects once (for the library's own requests); a failed connection is tried again at the next call, as after a disconnect. */
  connectOnce(): Promise<void> {
    this.connecting ??= this.connect().catch((err: unknown) => {
      this.connecting = undefined;
      throw err;
    });
    return this.connecting;
  }

  async disconnect(): Promise<void> {
    this.connecting = undefined;
    const pool = this.pool;
    this.pool = undefined;
    this.brokers.clear();
    this.coordinators.clear();
    this.fetchedAt = 0;
    await pool?.close().catch(() => undefined);
  }

  isConnected(): boolean {
    return this.pool !== undefined && this.brokers.size > 0;
  }

  /**
   * Adds topics to those whose metadata is kept. A topic the cluster does not know fails the call and is not kept
   * (as KafkaJS's cluster): the metadata of the others is still asked for next time.
   */
  async addMultipleTargetTopics(topics: string[]): Promise<void> {
    const added = [...new Set(topics)].filter((t) => !this.targets.has(t));
    if (added.length === 0) {
      // Added by another caller whose metadata is still on its way: its answer, not none.
      if (this.refreshing && topics.some((t) => !this.partitions.has(t))) await this.refreshing;
      return;
    }
    for (const topic of added) this.targets.add(topic);
    try {
      await this.refreshMetadata();
      // A refresh that began before they were added: once more, with them.
      if (added.some((t) => !this.partitions.has(t))) await this.refreshMetadata();
    } catch (err) {
      for (const topic of added) this.targets.delete(topic);
      throw err;
    }
  }

  /** The node ids of the brokers the metadata names. */
  nodeIds(): number[] {
    return [...this.brokers.keys()];
  }

  async refreshMetadataIfNecessary(): Promise<void> {
    if (Date.now() - this.fetchedAt > 300000 || [...this.targets].some((t) => !this.partitions.has(t))) await this.refreshMetadata();
  }

  /** Metadata of the target topics (one request at a time: callers meanwhile share it). */
  refreshMetadata(): Promise<void> {
    this.refreshing ??= this.fetchMetadata().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  private async fetchMetadata(): Promise<void> {
    const { metadataV12 } = platformaticKafka();
    const connection = await this.anyConnection();
    let answer: Awaited<ReturnType<typeof metadataV12.api.async>>;
    try {
      answer = await metadataV12.api.async(connection, [...this.targets], false, false);
    } catch (err) {
      // Partitions without a leader (or a topic in error) come with an answer for the rest.
      const response = (err as { response?: typeof answer }).response;
      if (!response?.brokers) throw kafkaError(err);
      answer = response;
    }
    this.brokers.clear();
    for (const b of answer.brokers) this.brokers.set(b.nodeId, { nodeId: b.nodeId, host: b.host, port: b.port });
    for (const topic of answer.topics) {
      if (!topic.name) continue;
      if (topic.errorCode !== 0) {
        this.partitions.delete(topic.name);
        if (this.targets.has(topic.name)) throw protocolError(topic.errorCode);
        continue;
      }
      const partitions = topic.partitions
        .map((p) => ({ partitionId: p.partitionIndex, leader: p.leaderId, partitionErrorCode: p.errorCode, replicas: p.replicaNodes, isr: p.isrNodes, offlineReplicas: p.offlineReplicas }) as unknown as PartitionMetadata)
        .sort((a, b) => a.partitionId - b.partitionId);
      this.partitions.set(topic.name, partitions);
    }
    this.fetchedAt = Date.now();
  }

  findTopicPartitionMetadata(topic: string): PartitionMetadata[] {
    return this.partitions.get(topic) ?? [];
  }

  async findBroker({ nodeId }: { nodeId: number }): Promise<Node> {
    let node = this.brokers.get(nodeId);
    if (!node) {
      await this.refreshMetadata();
      node = this.brokers.get(nodeId);
    }
    if (!node) throw new KafkaConnectionError(`broker ${nodeId} is not in the cluster's metadata`);
    // Connected here, as KafkaJS's findBroker does: a broker that cannot be reached fails the round before any
    // request is sent (its batches not in doubt), not in the Produce request.
    await this.connectionTo(node);
    return node;
  }

  removeBroker(): void {
    // The pool drops a closed connection by itself and connects again on the next request.
  }

  markOffsetAsCommitted(): void {
    // Read only by KafkaJS's consumers.
  }

  /** The coordinator of a transactional id (TRANSACTION) or a group (GROUP), cached until it says it is not. */
  async coordinator(type: typeof GROUP | typeof TRANSACTION, key: string): Promise<Node> {
    const cached = this.coordinators.get(`${type}:${key}`);
    if (cached) return cached;
    const { findCoordinatorV4 } = platformaticKafka();
    const answer = await this.request(await this.anyConnection(), findCoordinatorV4.api, type, [key]);
    const found = answer.coordinators[0];
    if (!found || found.errorCode !== 0) throw protocolError(found?.errorCode ?? 15);
    const node = { nodeId: found.nodeId, host: found.host, port: found.port };
    this.coordinators.set(`${type}:${key}`, node);
    return node;
  }

  forgetCoordinator(type: typeof GROUP | typeof TRANSACTION, key: string): void {
    this.coordinators.delete(`${type}:${key}`);
  }

  forgetCoordinators(): void {
    this.coordinators.clear();
  }

  async connectionTo(node: { host: string; port: number }): Promise<Connection> {
    if (!this.pool) throw new KafkaConnectionError('the producer is not connected');
    try {
      return await this.pool.get(node);
    } catch (err) {
      throw kafkaError(err);
    }
  }

  /** One request of a protocol function, its failure as the library's error (kafkaError). */
  async request<A extends unknown[], R>(connection: Connection, api: { async: (connection: Connection, ...args: A) => Promise<R> }, ...args: A): Promise<R> {
    try {
      return await api.async(connection, ...args);
    } catch (err) {
      throw kafkaError(err);
    }
  }

  /** A Produce request whose body the library wrote; every partition's answer, errors included. */
  async produce(broker: Node, args: ProduceArgs): Promise<ProduceAnswer> {
    const { Writer, crc32c, produceV8 } = platformaticKafka();
    const connection = await this.connectionTo(broker);
    const body = encodeProduceBody(args, (bytes) => crc32c(bytes));
    const response = await new Promise<ProduceResponse>((resolve, reject) =>
      connection.send(
        produceV8.api.key,
        PRODUCE_VERSION,
        () => Writer.create().append(body),
        produceV8.parseResponse as never,
        false,
        false,
        (err: unknown, answer: unknown) => {
          // The parser throws when a partition has an error code; the answer (every partition's) comes with it.
          const carried = (err as { response?: ProduceResponse } | null)?.response;
          if (err && !carried?.responses) reject(kafkaError(err));
          else resolve((carried ?? answer) as ProduceResponse);
        },
      ),
    );
    return {
      topics: response.responses.map((t) => ({
        topicName: t.name,
        partitions: t.partitionResponses.map((p) => ({ partition: p.index, errorCode: p.errorCode, baseOffset: String(p.baseOffset), logAppendTime: String(p.logAppendTimeMs), logStartOffset: String(p.logStartOffset) })),
      })),
    };
  }

  /** A connection to any broker of the cluster (the bootstrap list's when none is known or none answers). */
  async anyConnection(): Promise<Connection> {
    if (this.producer.stopped()) throw new KafkaConnectionError('the producer is disconnected');
    if (!this.pool) await this.connect();
    const pool = this.pool;
    if (!pool) throw new KafkaConnectionError('the producer is disconnected');
    const known = [...this.brokers.values()];
    const bootstrap = this.options.bootstrapBrokers.map((b) => bootstrapNode(String(b)));
    try {
      return await pool.getFirstAvailable(known.length > 0 ? known : bootstrap);
    } catch (err) {
      // Every known broker away: the bootstrap list may name others.
      if (known.length === 0) throw kafkaError(err);
      return pool.getFirstAvailable(bootstrap).catch((again: unknown) => {
        throw kafkaError(again);
      });
    }
  }
}

interface ProduceResponse {
  responses: Array<{ name: string; partitionResponses: Array<{ index: number; errorCode: number; baseOffset: bigint; logAppendTimeMs: bigint; logStartOffset: bigint }> }>;
}

type State = 'uninitialized' | 'ready' | 'transacting' | 'committing' | 'aborting';

/**
 * A producer's id, epoch, sequences and transaction (what KafkaJS's eosManager keeps), over the client's protocol
 * functions. Each request to a coordinator is sent again, after the producer's retry delays, while the coordinator
 * says "again" (a transaction still ending, loading, moved) or does not answer; its refusals (PRODUCER_FENCED,
 * INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, …) are thrown as KafkaProtocolError at once.
 */
export class PlatformaticTransactions implements TransactionManager {
  private readonly logger = new Logger('CheckedProducer');
  private producerId = -1n;
  private producerEpoch = 0;
  private sequences = new Map<string, number>();
  private state: State = 'uninitialized';
  private added = new Set<string>();
  private offsetsAdded = false;

  constructor(
    private readonly cluster: PlatformaticProducerCluster,
    private readonly options: ProducerPartsOptions,
  ) {}

  getProducerId(): number {
    // A 64-bit id as the Produce encoder takes it (it reads it through String()).
    return this.producerId.toString() as unknown as number;
  }

  getProducerEpoch(): number {
    return this.producerEpoch;
  }

  getTransactionalId(): string {
    return this.options.transactionalId as string;
  }

  isInitialized(): boolean {
    return this.producerId !== -1n;
  }

  isTransactional(): boolean {
    return this.options.transactionalId !== undefined;
  }

  isInTransaction(): boolean {
    return this.state === 'transacting';
  }

  /** A new producer id (idempotent), or the transactional id's next epoch (-1/-1: the client's own sends 0/0, refused once the id was used). */
  async initProducerId(): Promise<void> {
    const { initProducerIdV4 } = platformaticKafka();
    const transactionalId = this.options.transactionalId ?? null;
    const timeout = this.options.transactionTimeout ?? DEFAULT_TRANSACTION_TIMEOUT;
    const answer = await this.again('InitProducerId', async () => {
      const node = transactionalId === null ? undefined : await this.cluster.coordinator(TRANSACTION, transactionalId);
      const connection = node ? await this.cluster.connectionTo(node) : await this.cluster.anyConnection();
      return this.cluster.request(connection, initProducerIdV4.api, transactionalId, timeout, -1n, -1);
    });
    this.producerId = answer.producerId;
    this.producerEpoch = answer.producerEpoch;
    this.sequences = new Map();
    this.state = 'ready';
    this.added = new Set();
    this.offsetsAdded = false;
    this.logger.debug(`${transactionalId ?? 'idempotent producer'}: producer id ${this.producerId}, epoch ${this.producerEpoch}`);
  }

  getSequence(topic: string, partition: number): number {
    return this.sequences.get(`${topic}\u0000${partition}`) ?? 0;
  }

  updateSequence(topic: string, partition: number, increment: number): void {
    if (!this.isInitialized()) return;
    const next = this.getSequence(topic, partition) + increment;
    // Sequences are int32 in the record batch: they wrap to 0, as the broker expects.
    this.sequences.set(`${topic}\u0000${partition}`, next > INT32_MAX ? next - INT32_MAX - 1 : next);
  }

  beginTransaction(): void {
    this.transactional();
    if (this.state !== 'ready') throw new Error(`transaction of ${this.options.transactionalId}: cannot begin in state ${this.state}`);
    this.state = 'transacting';
    this.added = new Set();
    this.offsetsAdded = false;
  }

  async addPartitionsToTransaction(topicData: Array<{ topic: string; partitions: Array<{ partition: number }> }>): Promise<void> {
    const transactionalId = this.transactional();
    const topics = topicData
      .map(({ topic, partitions }) => ({ name: topic, partitions: partitions.map((p) => p.partition).filter((p) => !this.added.has(`${topic}\u0000${p}`)) }))
      .filter((t) => t.partitions.length > 0);
    if (topics.length === 0) return;
    const { addPartitionsToTxnV3 } = platformaticKafka();
    // Asked once: the send that needs it (ProduceCall) asks again, with its own waits and attempts.
    await this.again(
      'AddPartitionsToTxn',
      async () => {
        const connection = await this.coordinatorConnection();
        return this.cluster.request(connection, addPartitionsToTxnV3.api, [{ transactionalId, producerId: this.producerId, producerEpoch: this.producerEpoch, verifyOnly: false, topics }] as never);
      },
      undefined,
      false,
    );
    for (const { name, partitions } of topics) for (const p of partitions) this.added.add(`${name}\u0000${p}`);
  }

  async sendOffsets({ consumerGroupId, topics }: { consumerGroupId: string; topics: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }> }): Promise<void> {
    const transactionalId = this.transactional();
    const { addOffsetsToTxnV3, txnOffsetCommitV3 } = platformaticKafka();
    await this.again('AddOffsetsToTxn', async () => this.cluster.request(await this.coordinatorConnection(), addOffsetsToTxnV3.api, transactionalId, this.producerId, this.producerEpoch, consumerGroupId));
    this.offsetsAdded = true;
    const offsets = topics.map(({ topic, partitions }) => ({
      name: topic,
      partitions: partitions.map(({ partition, offset }) => ({ partitionIndex: partition, committedOffset: BigInt(offset), committedLeaderEpoch: -1, committedMetadata: null })),
    }));
    await this.again(
      'TxnOffsetCommit',
      async () => {
        const node = await this.cluster.coordinator(GROUP, consumerGroupId);
        // Without the group's generation and member (as KafkaJS sends it): the transactional id fences a stale owner.
        return this.cluster.request(await this.cluster.connectionTo(node), txnOffsetCommitV3.api, transactionalId, consumerGroupId, this.producerId, this.producerEpoch, -1, '', null, offsets as never);
      },
      () => this.cluster.forgetCoordinator(GROUP, consumerGroupId),
    );
  }

  commit(): Promise<void> {
    return this.end(true);
  }

  abort(): Promise<void> {
    return this.end(false);
  }

  private async end(committed: boolean): Promise<void> {
    const transactionalId = this.transactional();
    if (this.state !== 'transacting') throw new Error(`transaction of ${transactionalId}: cannot ${committed ? 'commit' : 'abort'} in state ${this.state}`);
    this.state = committed ? 'committing' : 'aborting';
    if (this.added.size === 0 && !this.offsetsAdded) {
      this.state = 'ready';
      return;
    }
    const { endTxnV3 } = platformaticKafka();
    await this.again('EndTxn', async () => this.cluster.request(await this.coordinatorConnection(), endTxnV3.api, transactionalId, this.producerId, this.producerEpoch, committed));
    this.state = 'ready';
  }

  private transactional(): string {
    if (this.options.transactionalId === undefined) throw new Error('an idempotent producer has no transactions');
    return this.options.transactionalId;
  }

  private async coordinatorConnection(): Promise<Connection> {
    return this.cluster.connectionTo(await this.cluster.coordinator(TRANSACTION, this.transactional()));
  }

  /**
   * `request` until it is answered, while the answer is "again" (AGAIN) or there is none, within the producer's
   * retries; a stale coordinator is looked up again (`stale`: the group's, else the transactional id's).
   */
  private async again<T>(what: string, request: () => Promise<T>, stale?: () => void, retried = true): Promise<T> {
    const { retry } = this.options;
    let quick = 0;
    for (let attempt = 0; ; ) {
      try {
        return await request();
      } catch (err) {
        const type = (err as { type?: string }).type;
        const unanswered = err instanceof KafkaConnectionError;
        if (unanswered || STALE_COORDINATOR.has(type as string)) {
          if (stale) stale();
          else if (this.options.transactionalId !== undefined) this.cluster.forgetCoordinator(TRANSACTION, this.options.transactionalId);
        }
        if (!retried || !(unanswered || (type !== undefined && AGAIN.has(type))) || attempt >= retry.retries || this.options.stopped()) throw err;
        // A transaction still ending answers CONCURRENT_TRANSACTIONS for a few milliseconds after its EndTxn: a few
        // short waits first (the client's own waits a second), then the producer's retry delays.
        const short = type === 'CONCURRENT_TRANSACTIONS' && quick < 5;
        const wait = short ? 10 * 2 ** quick++ : delay(retry, attempt++);
        this.logger.debug(`${this.options.transactionalId ?? 'idempotent producer'}: ${what} again in ${wait} ms (${(err as Error).message})`);
        await sleep(wait);
      }
    }
  }
}
