/**
 * The room of the Kafka client (README.md): the only part of the library that loads kafkajs at run time or knows
 * its internals. Everything else imports what it needs from here.
 */
import { AssignerProtocol, ConfigResourceTypes, logLevel } from 'kafkajs';

export { AssignerProtocol, ConfigResourceTypes, logLevel };
export type { Admin, Consumer, EachBatchPayload, IHeaders, ITopicConfig, KafkaConfig, KafkaMessage, Message, PartitionMetadata, RetryOptions } from 'kafkajs';
export { createKafkaClient, isLibraryClient, type ClusterOptions, type KafkaClient } from './client';
export { BUSY_FETCH_WAIT_MS, markBusy, registerDrain, type Drain } from './consumer-group';
export { assertKafkaJsFixesInForce, KAFKAJS_FIXES } from './corrections-in-force';
export { forgottenByCoordinator, HangingTransactions, type OpenTransaction } from './hanging-transactions';
export { nestLogCreator } from './logger';
export { createProbeClient } from './probe';
export { CheckedProducer, CheckedTransaction, fenceTransactionalId, partitionOf, type CheckedProducerOptions } from './producer/checked-producer';
export { ClusterClient, KAFKAJS_VERSION, type KafkaJsBroker } from './producer/kafkajs-internals';
export type { Placement } from './producer/produce-call';
export { UNENCODABLE_RECORD } from './producer/produce-encoding';
export { StableOffsets, UnstableOffsetsError } from './stable-offsets';
