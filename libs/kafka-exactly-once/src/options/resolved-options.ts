import type { KafkaDriverName } from '../client/drivers';
import type { DatabasePort } from '../database/database.port';
import type { JsonLimits } from '../interfaces/format-options.interface';
import type { KafkaExactlyOnceModuleOptions, RegistryConnectionOptions, TopicOptions, WireFormat } from '../interfaces/kafka-exactly-once-options.interface';

/** The options with every default applied; what the engine reads. */
export interface ResolvedOptions {
  kafka: KafkaExactlyOnceModuleOptions['kafka'];
  /** The Kafka client of the consumer group (see KafkaExactlyOnceModuleOptions.driver). */
  driver: KafkaDriverName;
  /** Empty when the module only publishes. */
  groupId: string;
  transactionalIdPrefix: string;
  schemas: { directory: string; longs: 'bigint' | 'number' };
  topics: Record<string, TopicOptions>;
  /** JSON reading's limits (a handler's `json` overrides them). */
  json: JsonLimits;
  topicPrefix: string;
  /** false: the application's @nestjs-cls/transactional is not used. */
  ambientTransactions: false | { connectionName?: string };
  /** The default framing of values the module writes. */
  wireFormat: WireFormat;
  /** undefined: no Schema Registry. */
  schemaRegistry?: Required<Pick<RegistryConnectionOptions, 'url' | 'subjectNameStrategy' | 'autoRegister' | 'requestTimeoutMs' | 'unknownIdWaitMs' | 'missingPeerWaitMs'>> & Pick<RegistryConnectionOptions, 'auth' | 'tls'>;
  dataSourceName?: string;
  /** The data layer given in the options (else the TypeORM DataSource of dataSourceName). */
  database?: DatabasePort;
  consumer: {
    groupProtocol: 'classic' | 'consumer';
    sessionTimeout: number;
    heartbeatInterval: number;
    rebalanceTimeout: number;
    partitionsConsumedConcurrently: number;
    maxBytesPerPartition: number;
    maxBytesInFlight: number;
    maxWaitTimeInMs: number;
    stallAfterMs: number;
    maxRetryDelayMs: number;
    handlerTimeoutMs: number;
  };
  chunk: { maxRecords: number; maxBytes: number; maxMillis: number };
  transactionTimeoutMs: number;
  abortHangingTransactions: boolean;
  inbox: {
    runMigrations: boolean;
    retentionDays: number;
    retentionIntervalMs: number;
    retentionBatchSize: number;
    lockTimeoutMs: number;
    idleInTransactionTimeoutMs: number;
    statementTimeoutMs: number;
    deduplicationScope: 'topic' | 'group';
  };
  isolation: { maxFailures: number; retryDelayMs: number };
  outputs: { maxRequestBytes: number };
  retry: { attempts: number; initialDelayMs: number; maxDelayMs: number; multiplier: number };
  deadLetter: { topicSuffix: string };
  operations: { pollIntervalMs: number; retentionDays: number; reportIntervalMs: number; stepLog?: string };
  autoStart: boolean;
  /** undefined: no metrics */
  metrics?: { registry?: object };
  /** undefined: no outbox */
  outbox?: {
    relay: boolean;
    name: string;
    checkpointTopic: string;
    batchMaxRecords: number;
    batchMaxBytes: number;
    pollIntervalMs: number;
    unhealthyAgeMs: number;
    sendTimeoutMs: number;
  };
  publisher?: {
    sendTimeoutMs: number;
    spool: { directory: string; maxBytes: number; segmentBytes: number };
    breaker: { consecutiveFailures: number; halfOpenAfterMs: number };
    unhealthyBacklogAgeMs: number;
    missingTopicGraceMs: number;
    /** undefined: the id kept in the spool directory */
    instanceId?: string;
  };
}
