// The public API of kafka-exactly-once. Everything a user imports is exported here, and nothing else; helpers
// for tests (the fault switch, the codec's internals) are in kafka-exactly-once/testing (testing.ts).
import './package-copies';
export { KafkaExactlyOnceModule } from './kafka-exactly-once.module';
export { KafkaExactlyOnceLifecycle, type StartPhase, type StartStatus } from './kafka-exactly-once.lifecycle';
export { createTopicsAndWait, waitForTopicLeaders } from './kafka-topics';
export * from './decorators';
export * from './admin';
export * from './errors';
export * from './health';
export * from './metrics';
export { EventPublisher } from './publishing/event-publisher';
export { KAFKA_DRIVERS, type KafkaDriverName } from './client/drivers';
export type { PublishOptions, PublishResult, PublishAllItem, PublisherStatus } from './publishing/publish.interfaces';
export type { EventHeaders, EventHeaderValue } from './publishing/event-headers';
export { Outbox, type OutboxAddOptions, type OutboxAddResult } from './outbox/outbox';
export type { OutboxRelayStatus } from './outbox/outbox-relay';
export type {
  KafkaExactlyOnceModuleOptions,
  TopicOptions,
  WireFormat,
  RegistryConnectionOptions,
  ConsumerOptions,
  InboxOptions,
  RetryOptions,
  RetryTopicsOptions,
  IsolationOptions,
  PublisherOptions,
  OutboxOptions,
  MetricsOptions,
  EventContext,
  EmitOptions,
  RecordInfo,
  RecordSchema,
  MessageIdFrom,
  KeyedRecord,
  IdempotentHandlerMethod,
  IdempotentBatchHandlerMethod,
  BatchEvent,
  BatchContext,
} from './interfaces';
export { SchemaRegistry, type LoadedSchema, type SchemaRegistryOptions } from './formats/avro/schema-registry';
export { EventCodec, type EncodedMessage, type EncodeOptions, type DecodedEvent } from './formats/avro/event-codec';
export type { EventValidation, StandardSchemaV1 } from './formats/event-validator';
export type { EventFormat, JsonLimits } from './interfaces/format-options.interface';
export { KAFKA_EXACTLY_ONCE_MIGRATIONS, CreateKafkaEoInbox1764400000000, InboxMessageDigests1764400200000, InboxTakeovers1764400300000, ParkedKeys1764400400000, OneOpenOperation1764400500000, Outbox1764400600000, UnitOutputs1764400700000, CoordinateIdentities1764400800000, OperatorQueries1764400900000, AuditDeclaredActor1764401000000, OperatorPaging1764401100000, CommittedOutputs1764401200000, InstanceReports1764401300000, BulkOperations1764401400000 } from './inbox/migrations';
export { HEADERS, DEAD_LETTER_HEADERS, RETRY_HEADERS, INBOX_TABLE } from './kafka-exactly-once.constants';
export type { ConsumerStatus, ConsumerState, RetryTierStatus } from './engine/exactly-once.consumer';
export type { PartitionHealth, PartitionActivity } from './engine/partition-progress';
export type { DeduplicationScope } from './engine/record-identity';
export { typeormDatabase, type TypeOrmDatabasePort } from './database/typeorm.database';
export type { DatabasePort, DatabaseSession, DatabaseIsolationLevel, LentDatabase, PgPoolLike } from './database/database.port';
export { UnitConnectionError } from './database/unit-connection';
export type { OutboxTransaction } from './outbox/outbox';
