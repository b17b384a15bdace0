import type { Admin, Consumer, ConsumerConfig, Kafka, KafkaConfig, Producer, ProducerConfig, AdminConfig, Logger } from 'kafkajs';
import { correctCluster } from './cluster';
import { CorrectedConsumerGroup } from './consumer-group';

/** Options of a cluster the library's client builds for the requests it sends itself. */
export interface ClusterOptions {
  allowAutoTopicCreation?: boolean;
  maxInFlightRequests?: number;
  metadataMaxAge?: number;
  isolationLevel?: number;
}

/**
 * A Kafka client of the library: KafkaJS 2.2.4's own client class (vendor/client.cjs), whose consumers run
 * CorrectedConsumerGroup (vendor/consumer.cjs) and whose every cluster is corrected (cluster.ts). Its producers
 * and admins are KafkaJS's, on corrected clusters.
 */
export interface KafkaClient {
  producer(config?: ProducerConfig): Producer;
  consumer(config: ConsumerConfig): Consumer;
  admin(config?: AdminConfig): Admin;
  logger(): Logger;
  /** A corrected cluster of this client, for the requests the library sends itself (producer/kafkajs-internals.ts). */
  createCluster(options?: ClusterOptions): object;
}

/* eslint-disable @typescript-eslint/no-require-imports */
const createConsumer = (require('./vendor/consumer.cjs') as (group: unknown) => unknown)(CorrectedConsumerGroup);
/** The class of the library's Kafka clients. */
export const KafkaClientClass = (require('./vendor/client.cjs') as (parts: object) => new (config: KafkaConfig) => KafkaClient)({ createConsumer, correctCluster });
/* eslint-enable @typescript-eslint/no-require-imports */

/** A Kafka client of the library (see KafkaClient), on `config` (KafkaJS's client options). */
export function createKafkaClient(config: KafkaConfig): KafkaClient {
  return new KafkaClientClass(config);
}

/** Whether `kafka` is a client the library built (createKafkaClient), rather than one of KafkaJS's own. */
export const isLibraryClient = (kafka: unknown): kafka is KafkaClient => kafka instanceof KafkaClientClass;

/** The library's client, where code written for KafkaJS's `Kafka` type takes one (the two share their public methods). */
export const asKafka = (client: KafkaClient): Kafka => client as unknown as Kafka;
