import type { Message } from 'kafkajs';
import type { ProducerCluster } from '../../client/producer-parts';
import type { KafkaClient } from '../client';
import { encodeProduceBody } from './produce-encoding';

/**
 * The KafkaJS parts below its producer that the library drives itself: its cluster (metadata, brokers and their
 * connections, with the application's TLS, SASL and socket factory), its protocol requests, its idempotence and
 * transaction manager (eosManager). They are internals: the version they were written against is checked, and a
 * spec fails if they move.
 */
export const KAFKAJS_VERSION = '2.2.4';

export interface KafkaJsBroker {
  nodeId: number;
  lookupRequest(apiKey: number, definitions: unknown): (args: object) => ProtocolRequest;
}

export interface ProtocolRequest {
  request: { apiKey: number; apiVersion: number; apiName: string; encode(): Promise<unknown>; expectResponse?: () => boolean };
  response: { decode(payload: Buffer): Promise<unknown>; parse(data: unknown): Promise<unknown> };
}

/** KafkaJS's cluster: what the library's producer asks of any driver's (ProducerCluster), and more. */
export interface KafkaJsCluster extends ProducerCluster {
  findBroker(args: { nodeId: number }): Promise<KafkaJsBroker>;
  findGroupCoordinator(args: { groupId: string; coordinatorType?: number }): Promise<KafkaJsBroker>;
  getNodeIds(): number[];
}

/** KafkaJS's eosManager (src/producer/eosManager): producer id, epoch, sequences and the transaction's state. */
export interface EosManager {
  getProducerId(): number;
  getProducerEpoch(): number;
  getTransactionalId(): string;
  initProducerId(): Promise<void>;
  getSequence(topic: string, partition: number): number;
  updateSequence(topic: string, partition: number, increment: number): void;
  beginTransaction(): void;
  addPartitionsToTransaction(topicData: Array<{ topic: string; partitions: Array<{ partition: number }> }>): Promise<void>;
  sendOffsets(args: { consumerGroupId: string; topics: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }> }): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
  isInitialized(): boolean;
  isTransactional(): boolean;
  isInTransaction(): boolean;
}

/** A KafkaJS logger (kafka.logger()), which eosManager logs through. */
export interface KafkaJsLogger {
  namespace(name: string): KafkaJsLogger;
  debug(message: string, extra?: object): void;
  info(message: string, extra?: object): void;
  warn(message: string, extra?: object): void;
  error(message: string, extra?: object): void;
}

/** One partition's answer in a Produce response (v3 to v7). */
export interface ProducePartitionAnswer {
  partition: number;
  errorCode: number;
  baseOffset: string;
  logAppendTime?: string;
  logStartOffset?: string;
}

export interface ProduceAnswer {
  topics: Array<{ topicName: string; partitions: ProducePartitionAnswer[] }>;
}

export interface ProduceArgs {
  acks: number;
  timeout: number;
  compression?: number;
  transactionalId?: string;
  /** KafkaJS's eosManager gives it as a string once initialised (-1, a number, before). */
  producerId: number | string;
  producerEpoch: number;
  /** `timestamp`: of the partition's messages that have none of their own (else the time of encoding). */
  topicData: Array<{ topic: string; partitions: Array<{ partition: number; firstSequence: number; messages: Message[]; timestamp?: string }> }>;
}

/* eslint-disable @typescript-eslint/no-require-imports */
const load = () => ({
  version: (require('kafkajs/package.json') as { version: string }).version,
  createEosManager: require('kafkajs/src/producer/eosManager') as (args: object) => EosManager,
  apiKeys: require('kafkajs/src/protocol/requests/apiKeys') as Record<string, number>,
  requests: (require('kafkajs/src/protocol/requests') as { requests: Record<string, unknown> }).requests,
  protocolErrors: require('kafkajs/src/protocol/error') as { createErrorFromCode(code: number): Error & { type: string; code: number; retriable: boolean } },
  crc32c: require('kafkajs/src/protocol/recordBatch/crc32C') as (bytes: Buffer) => number,
});
/* eslint-enable @typescript-eslint/no-require-imports */

let internals: ReturnType<typeof load> | undefined;

/** KafkaJS's internal modules, once; throws a clear error for a KafkaJS they were not written for. */
function kafkaJs(): ReturnType<typeof load> {
  if (internals) return internals;
  let loaded: ReturnType<typeof load>;
  try {
    loaded = load();
  } catch (err) {
    throw new Error(`kafka-exactly-once needs kafkajs ${KAFKAJS_VERSION}, whose internal modules it could not load (${(err as Error).message})`);
  }
  if (loaded.version !== KAFKAJS_VERSION) {
    throw new Error(
      `kafka-exactly-once drives the producer of kafkajs ${KAFKAJS_VERSION} through its internals (to check every answer of the broker; docs/guarantees.md), and this application resolves kafkajs ${loaded.version}: install kafkajs@${KAFKAJS_VERSION}`,
    );
  }
  return (internals = loaded);
}

/** The symbol named `description` on the object or its prototype (KafkaJS keeps private members under symbols). */
export function privateSymbol(target: object, description: string): symbol {
  for (let owner: object | null = target; owner && owner !== Object.prototype; owner = Object.getPrototypeOf(owner)) {
    const found = Object.getOwnPropertySymbols(owner).find((s) => s.description === description);
    if (found) return found;
  }
  throw new Error(`kafkajs internals changed (${description} not found): kafka-exactly-once needs kafkajs ${KAFKAJS_VERSION}`);
}

/** A cluster of the library's Kafka client (its brokers, TLS, SASL, socket factory and retry options), corrected as its consumers' are. */
export function createCluster(kafka: KafkaClient, options: { allowAutoTopicCreation?: boolean; maxInFlightRequests?: number; metadataMaxAge?: number } = {}): KafkaJsCluster {
  kafkaJs();
  return kafka.createCluster({ metadataMaxAge: 300000, allowAutoTopicCreation: false, ...options }) as KafkaJsCluster;
}

/** Sends a protocol request on a broker's connection, as the broker's own methods do. */
export function sendRequest<T>(broker: KafkaJsBroker, request: ProtocolRequest): Promise<T> {
  const send = privateSymbol(broker, 'private:Broker:sendRequest');
  return (broker as unknown as Record<symbol, (r: ProtocolRequest) => Promise<T>>)[send](request);
}

/**
 * A Produce request in the version the broker and KafkaJS share, answered with every partition's result: KafkaJS's
 * own parser throws on the first partition in error, and the answers of the others are lost with it.
 */
export function sendProduce(broker: KafkaJsBroker, args: ProduceArgs): Promise<ProduceAnswer> {
  const { apiKeys, requests, crc32c } = kafkaJs();
  const own = broker.lookupRequest(apiKeys.Produce, requests.Produce)(args);
  const { response } = own;
  let { request } = own;
  if (args.compression || request.apiVersion < 3 || request.apiVersion > 8) {
    // KafkaJS's encoders, which know no partition timestamp: each message without one gets it.
    const stamped = args.topicData.map((t) => ({ ...t, partitions: t.partitions.map((p) => ({ ...p, messages: p.messages.map((m) => (m.timestamp === undefined && p.timestamp !== undefined ? { ...m, timestamp: p.timestamp } : m)) })) }));
    request = broker.lookupRequest(apiKeys.Produce, requests.Produce)({ ...args, topicData: stamped }).request;
  }
  // Uncompressed (all the library sends), from version 3 (record batches): the body written in one Buffer
  // (produce-encoding.ts) rather than by KafkaJS's encoders. KafkaJS's request envelope takes anything with `buf`
  // and `buffer`.
  const encode = !args.compression && request.apiVersion >= 3 && request.apiVersion <= 8 ? async () => ownEncoder(encodeProduceBody(args, crc32c)) : request.encode;
  return sendRequest<ProduceAnswer>(broker, { request: { ...request, encode }, response: { decode: (payload) => response.decode(payload), parse: async (data) => data } });
}

/** What KafkaJS's Encoder#writeEncoder reads of an encoder. */
const ownEncoder = (bytes: Buffer) => ({ buf: bytes, buffer: bytes, size: () => bytes.length });

export function createEosManager(args: { logger: KafkaJsLogger; cluster: KafkaJsCluster; transactionTimeout?: number; transactional: boolean; transactionalId?: string }): EosManager {
  return kafkaJs().createEosManager(args);
}

/** KafkaJS's protocol error for a Kafka error code (type, code, retriable), as its own requests throw it. */
export function protocolError(code: number): Error & { type: string; code: number; retriable: boolean } {
  return kafkaJs().protocolErrors.createErrorFromCode(code);
}

/**
 * The Java client's murmur2 of a key (Utils.murmur2), which KafkaJS's partitioner computes too: the partition of a
 * keyed record is the same in all three. In 32-bit integer arithmetic (Math.imul), as Java's `int`s wrap, where
 * KafkaJS's builds 64-bit Long objects for each multiplication (its cost showed in a profile of every output).
 */
export function murmur2(key: Buffer | string): number {
  const data = Buffer.isBuffer(key) ? key : Buffer.from(String(key));
  const length = data.length;
  const m = 0x5bd1e995;
  let h = 0x9747b28c ^ length;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  const rest = length & 3;
  if (rest === 3) h ^= data[whole + 2] << 16;
  if (rest >= 2) h ^= data[whole + 1] << 8;
  if (rest >= 1) h = Math.imul(h ^ data[whole], m);
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/**
 * A client of the library's own on its Kafka client: KafkaJS's cluster (brokers, TLS, SASL),
 * connected on first use and again after a failure, for requests KafkaJS has no method for.
 */
export abstract class ClusterClient {
  protected readonly cluster: KafkaJsCluster;
  private connecting?: Promise<void>;
  /** Whether the cluster was ever asked to connect: its sockets are closed at disconnect, whatever happened since. */
  private used = false;

  constructor(kafka: KafkaClient) {
    this.cluster = createCluster(kafka);
  }

  /** Connects once; a failed connection is tried again at the next call. */
  protected connected(): Promise<void> {
    this.used = true;
    this.connecting ??= this.cluster.connect().catch((err) => {
      this.connecting = undefined;
      throw err;
    });
    return this.connecting;
  }

  /** After a failed request: connect afresh next time. */
  protected reconnectNextTime(): void {
    this.connecting = undefined;
  }

  async disconnect(): Promise<void> {
    if (this.used) await this.cluster.disconnect().catch(() => undefined);
    this.connecting = undefined;
    this.used = false;
  }
}
