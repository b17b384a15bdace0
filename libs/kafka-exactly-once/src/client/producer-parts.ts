import type { PartitionMetadata, RetryOptions } from 'kafkajs';
import type { EosManager, ProduceAnswer, ProduceArgs } from '../kafkajs/producer/kafkajs-internals';

/** A broker a Produce request goes to, as the driver's cluster found it. */
export interface ProduceBroker {
  nodeId: number;
}

/**
 * What the library's producer (CheckedProducer, ProduceCall) asks of a driver's cluster: metadata, brokers and the
 * coordinators of transactional ids and groups. KafkaJS's cluster has these members; the platformatic driver's is
 * its own (src/platformatic/producer-parts.ts).
 */
export interface ProducerCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  isConnected(): boolean;
  refreshMetadata(): Promise<void>;
  refreshMetadataIfNecessary(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  /** The topic's partitions (`partitionId`, `leader`) from the last metadata; empty when the topic is not known. */
  findTopicPartitionMetadata(topic: string): PartitionMetadata[];
  findBroker(args: { nodeId: number }): Promise<ProduceBroker>;
  /** After a connection closed under a request (KafkaJS's cluster forgets the broker; others may do nothing). */
  removeBroker(args: { host: string; port: number }): void;
  /** A transaction committed these offsets (KafkaJS's consumers read it; others may do nothing). */
  markOffsetAsCommitted(args: { groupId: string; topic: string; partition: number; offset: string }): void;
}

/** The producer id, epoch, sequences and transaction of one producer (KafkaJS's eosManager, or the driver's own). */
export type TransactionManager = EosManager;

/** What one CheckedProducer runs on: its cluster, its transaction managers (a new one at each renewal), its Produce requests. */
export interface ProducerParts {
  cluster: ProducerCluster;
  newTransactionManager(): TransactionManager;
  /** Sends one Produce request and returns every partition's answer (errors included, never thrown). */
  produce(broker: ProduceBroker, args: ProduceArgs): Promise<ProduceAnswer>;
  /** The error for a Kafka error code (type, code, retriable). */
  protocolError(code: number): Error & { retriable: boolean };
}

export interface ProducerPartsOptions {
  transactionalId?: string;
  transactionTimeout?: number;
  retry: Required<Pick<RetryOptions, 'retries' | 'initialRetryTime' | 'multiplier' | 'maxRetryTime' | 'factor'>>;
  /** True once the producer is disconnecting: no further request is started. */
  stopped(): boolean;
}

/** Makes the parts of one producer. */
export type ProducerDriver = (options: ProducerPartsOptions) => ProducerParts;
