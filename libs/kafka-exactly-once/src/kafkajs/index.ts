/**
 * The room of the Kafka client (README.md): the only part of the library that loads kafkajs at run time or knows
 * its internals. Everything else imports what it needs from here.
 */
import { AssignerProtocol, ConfigResourceTypes, logLevel, type Admin } from 'kafkajs';

export { AssignerProtocol, ConfigResourceTypes, logLevel };
export type { IHeaders, ITopicConfig, KafkaConfig, KafkaMessage, Message, RetryOptions } from 'kafkajs';

/**
 * What the library asks of its clients' consumers, admins and fetched batches: the members of KafkaJS's types it
 * uses, and no more (another client would offer these). The engine runs one consumer per group with per-partition
 * workers (`run` with `eachBatch`, `pause`, `resume`, its group events); the admin answers the boot's, health's and
 * provisioning's questions.
 */
export type ClusterAdmin = Pick<Admin, 'connect' | 'disconnect' | 'listTopics' | 'createTopics' | 'fetchTopicMetadata' | 'describeConfigs' | 'describeCluster' | 'describeGroups' | 'fetchOffsets'>;
export { createKafkaClient, type KafkaClient } from './client';
export { assertKafkaJsFixesInForce } from './corrections-in-force';
export { logRequestsOf } from './log-requests';
export { messageDigest, recordDigest, takeCommitted } from './record-digest';
export { nestLogCreator } from './logger';
export { createProbeClient, probeRetry } from './probe';
export { adminOf, brokerSettings } from './client';
export { CheckedProducer, CheckedTransaction, fenceTransactionalId, type CheckedProducerOptions } from './producer/checked-producer';
export type { Placement } from './producer/produce-call';
export { UNENCODABLE_RECORD } from './producer/produce-encoding';
export { StableOffsets, UnstableOffsetsError } from './stable-offsets';
