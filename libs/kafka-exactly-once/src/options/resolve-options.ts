import type { DatabasePort } from '../database/database.port';
import { KAFKA_DRIVERS } from '../client/drivers';
import type { EventFormat, JsonLimits } from '../interfaces/format-options.interface';
import { DEFAULT_JSON_LIMITS, EVENT_FORMATS } from './format-defaults';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { messageIdFromProblem } from '../engine/event-identity';
import type { KafkaExactlyOnceModuleOptions, RetryOptions, RegistryConnectionOptions, WireFormat } from '../interfaces/kafka-exactly-once-options.interface';
import { totalRetryDelay } from '../engine/retry-policy';
import { INSTANCE_ID_PATTERN } from '../spool/instance-id';
import type { ResolvedOptions } from './resolved-options';

const TRANSACTIONAL_ID_PART = /^[A-Za-z0-9._-]+$/;

function positiveInt(field: string, value: number | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) throw new InvalidOptionsError(field, `must be an integer >= ${min}, got ${JSON.stringify(value)}`);
  return value;
}

function boundedInt(field: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw new InvalidOptionsError(field, `must be an integer from ${min} to ${max} (or 0 for off), got ${JSON.stringify(value)}`);
  return value;
}

function positiveNumber(field: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || !(value > 0)) throw new InvalidOptionsError(field, `must be a number > 0, got ${JSON.stringify(value)}`);
  return value;
}

function atLeastOne(field: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !(value >= 1)) throw new InvalidOptionsError(field, `must be a number >= 1, got ${JSON.stringify(value)}`);
  return value;
}

/** A file path, or undefined when not given. */
function optionalPath(field: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '' || value.includes('\0')) throw new InvalidOptionsError(field, `must be a file path, got ${JSON.stringify(value)}`);
  return value;
}

function nonEmpty(field: string, value: unknown, hint: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new InvalidOptionsError(field, `is required: ${hint}`);
  return value;
}

/**
 * Merges defaults into the user's options and validates them; a bad option throws InvalidOptionsError naming
 * the field and how to fix it.
 */
export function resolveOptions(options: KafkaExactlyOnceModuleOptions): ResolvedOptions {
  if (!options || typeof options !== 'object') throw new InvalidOptionsError('(root)', 'must be an object');
  const kafka = options.kafka;
  if (!kafka || typeof kafka !== 'object') throw new InvalidOptionsError('kafka', 'is required: { clientId, brokers }');
  nonEmpty('kafka.clientId', kafka.clientId, "name this application, e.g. 'consumer-app'");
  if (typeof kafka.brokers !== 'function' && (!Array.isArray(kafka.brokers) || kafka.brokers.length === 0)) {
    throw new InvalidOptionsError('kafka.brokers', "must list at least one broker, e.g. ['127.0.0.1:9092']");
  }
  const driver = options.driver ?? 'kafkajs';
  if (!(KAFKA_DRIVERS as readonly string[]).includes(driver)) throw new InvalidOptionsError('driver', `must be one of ${KAFKA_DRIVERS.map((d) => `'${d}'`).join(', ')} (the Kafka client of the consumer group), got ${JSON.stringify(driver)}`);
  if (driver === 'platformatic' && typeof kafka.brokers === 'function') throw new InvalidOptionsError('kafka.brokers', "must be an array with driver 'platformatic' (it takes no function)");
  const groupId = options.groupId === undefined ? '' : nonEmpty('groupId', options.groupId, 'the consumer group of this module');
  const prefix = nonEmpty('transactionalIdPrefix', options.transactionalIdPrefix, 'unique per application, e.g. the app name');
  if (!TRANSACTIONAL_ID_PART.test(prefix)) {
    throw new InvalidOptionsError('transactionalIdPrefix', 'may only contain letters, digits, ".", "_" and "-"');
  }
  if (options.schemas !== undefined && (options.schemas === null || typeof options.schemas !== 'object')) {
    throw new InvalidOptionsError('schemas', "must be { directory: join(__dirname, '..', 'schemas') } (the directory of your .avsc files)");
  }
  // No directory: a module whose topics are all JSON or Protobuf (an Avro handler or topic then fails the boot).
  const directory = options.schemas === undefined ? '' : nonEmpty('schemas.directory', options.schemas.directory, 'the directory of the .avsc files');
  const longs = options.schemas?.longs ?? 'bigint';
  if (longs !== 'bigint' && longs !== 'number') throw new InvalidOptionsError('schemas.longs', "must be 'bigint' or 'number'");

  const topics = options.topics ?? {};
  const wireFormat = wireFormatOf('wireFormat', options.wireFormat) ?? 'single-object';
  const schemaRegistry = resolveSchemaRegistry(options.schemaRegistry);
  const json = resolveJsonLimits('json', options.json, DEFAULT_JSON_LIMITS);
  for (const [topic, config] of Object.entries(topics)) {
    if (!config || typeof config !== 'object') throw new InvalidOptionsError(`topics["${topic}"]`, "must be an object, e.g. { format: 'json' } or { schema: 'com.example.Event' }");
    const format = formatOf(`topics["${topic}"].format`, config.format) ?? 'avro';
    if (format === 'avro') nonEmpty(`topics["${topic}"].schema`, config.schema, "the full name of the Avro record written to this topic (or format: 'json' for JSON)");
    const plainOnly = registryFramingOf(`topics["${topic}"].registryFraming`, config.registryFraming, format, !!schemaRegistry) === false;
    if (plainOnly && config.wireFormat === 'schema-registry') {
      throw new InvalidOptionsError(`topics["${topic}"].registryFraming`, "is false (plain JSON only), and the topic's wireFormat is 'schema-registry': leave one of them out");
    }
    const framed = format === 'protobuf' || (!plainOnly && (wireFormatOf(`topics["${topic}"].wireFormat`, config.wireFormat) ?? wireFormat) === 'schema-registry');
    if (config.schema !== undefined && format === 'json' && !framed) throw new InvalidOptionsError(`topics["${topic}"].schema`, "names an Avro record, and the topic's format is plain json: leave it out");
    if (format !== 'avro' && framed && schemaRegistry && schemaRegistry.subjectNameStrategy !== 'topic' && config.schema === undefined) {
      throw new InvalidOptionsError(`topics["${topic}"].schema`, `is needed for the subject name strategy '${schemaRegistry.subjectNameStrategy}': the record's (the JSON Schema's title, the Protobuf message's full name) name in the subject`);
    }
    if (format === 'protobuf' && !schemaRegistry) throw new InvalidOptionsError(`topics["${topic}"].format`, "'protobuf' is read and written in a Schema Registry's framing: it needs the option schemaRegistry ({ url: ... })");
    if (config.messageIdFrom !== undefined) {
      const problem = messageIdFromProblem(config.messageIdFrom);
      if (problem) throw new InvalidOptionsError(`topics["${topic}"].messageIdFrom`, problem);
    }
    if (config.key !== undefined && typeof config.key !== 'function') {
      throw new InvalidOptionsError(`topics["${topic}"].key`, 'must be a function (event) => key');
    }
    if (!plainOnly && (wireFormatOf(`topics["${topic}"].wireFormat`, config.wireFormat) ?? wireFormat) === 'schema-registry' && !schemaRegistry && format !== 'protobuf') {
      throw new InvalidOptionsError(config.wireFormat ? `topics["${topic}"].wireFormat` : 'wireFormat', "'schema-registry' needs the option schemaRegistry ({ url: ... })");
    }
  }
  if (wireFormat === 'schema-registry' && !schemaRegistry) throw new InvalidOptionsError('wireFormat', "'schema-registry' needs the option schemaRegistry ({ url: ... })");

  const consumer = options.consumer ?? {};
  const groupProtocol = consumer.groupProtocol ?? 'classic';
  if (groupProtocol !== 'classic' && groupProtocol !== 'consumer') throw new InvalidOptionsError('consumer.groupProtocol', `must be 'classic' or 'consumer', got ${JSON.stringify(groupProtocol)}`);
  if (groupProtocol === 'consumer' && driver !== 'platformatic') {
    throw new InvalidOptionsError('consumer.groupProtocol', "'consumer' (Kafka 4's consumer groups, KIP-848) needs driver: 'platformatic': KafkaJS speaks the classic protocol only");
  }
  const sessionTimeout = positiveInt('consumer.sessionTimeout', consumer.sessionTimeout, 30000, 1000);
  const heartbeatInterval = positiveInt('consumer.heartbeatInterval', consumer.heartbeatInterval, Math.min(3000, Math.floor(sessionTimeout / 3)));
  if (heartbeatInterval >= sessionTimeout) {
    throw new InvalidOptionsError('consumer.heartbeatInterval', `must be lower than consumer.sessionTimeout (${sessionTimeout}); a third of it is usual`);
  }
  const transactionTimeoutMs = positiveInt('transactionTimeoutMs', options.transactionTimeoutMs, 60000, 1000);
  const inbox = options.inbox ?? {};
  const idleInTransactionTimeoutMs = positiveInt(
    'inbox.idleInTransactionTimeoutMs',
    inbox.idleInTransactionTimeoutMs,
    Math.min(30000, transactionTimeoutMs),
    100,
  );
  if (idleInTransactionTimeoutMs > transactionTimeoutMs) {
    throw new InvalidOptionsError(
      'inbox.idleInTransactionTimeoutMs',
      `must not exceed transactionTimeoutMs (${transactionTimeoutMs}): a stalled instance must lose its database transaction no later than its Kafka one`,
    );
  }
  const lockTimeoutMs = positiveInt('inbox.lockTimeoutMs', inbox.lockTimeoutMs, Math.min(5000, Math.floor(idleInTransactionTimeoutMs / 2)), 10);
  if (lockTimeoutMs >= idleInTransactionTimeoutMs) {
    throw new InvalidOptionsError(
      'inbox.lockTimeoutMs',
      `must be lower than inbox.idleInTransactionTimeoutMs (${idleInTransactionTimeoutMs}): a claim must give up waiting for a stalled instance's locks before PostgreSQL ends that instance's transaction`,
    );
  }
  const statementTimeoutMs = positiveInt('inbox.statementTimeoutMs', inbox.statementTimeoutMs, Math.max(lockTimeoutMs + 1, Math.floor((idleInTransactionTimeoutMs * 2) / 3)), 10);
  if (statementTimeoutMs <= lockTimeoutMs || statementTimeoutMs >= idleInTransactionTimeoutMs) {
    throw new InvalidOptionsError(
      'inbox.statementTimeoutMs',
      `must be greater than inbox.lockTimeoutMs (${lockTimeoutMs}), so that a lock wait ends as one, and lower than inbox.idleInTransactionTimeoutMs (${idleInTransactionTimeoutMs})`,
    );
  }
  const handlerTimeoutMs = positiveInt('consumer.handlerTimeoutMs', consumer.handlerTimeoutMs, Math.floor((idleInTransactionTimeoutMs * 5) / 6), 10);
  if (handlerTimeoutMs >= idleInTransactionTimeoutMs) {
    throw new InvalidOptionsError(
      'consumer.handlerTimeoutMs',
      `must be lower than inbox.idleInTransactionTimeoutMs (${idleInTransactionTimeoutMs}): PostgreSQL ends the session of a unit of work idle that long, and the overrun would be blamed on the database`,
    );
  }
  const scope = inbox.deduplicationScope ?? 'topic';
  if (scope !== 'topic' && scope !== 'group') throw new InvalidOptionsError('inbox.deduplicationScope', "must be 'topic' or 'group'");
  const rebalanceTimeout = positiveInt('consumer.rebalanceTimeout', consumer.rebalanceTimeout, 60000, 1000);
  if (rebalanceTimeout < sessionTimeout) {
    throw new InvalidOptionsError('consumer.rebalanceTimeout', `must be at least consumer.sessionTimeout (${sessionTimeout}): members need that long to rejoin`);
  }
  const maxBytesPerPartition = positiveInt('consumer.maxBytesPerPartition', consumer.maxBytesPerPartition, 512 * 1024);
  const maxBytesInFlight = positiveInt('consumer.maxBytesInFlight', consumer.maxBytesInFlight, Math.max(1024 * 1024, maxBytesPerPartition));
  if (maxBytesInFlight < maxBytesPerPartition) {
    throw new InvalidOptionsError('consumer.maxBytesInFlight', `must be at least consumer.maxBytesPerPartition (${maxBytesPerPartition}): it bounds the bytes held across all partitions, so one partition's fetch must fit in it; raise it, or lower maxBytesPerPartition`);
  }
  const stallAfterMs = positiveInt('consumer.stallAfterMs', consumer.stallAfterMs, 60000, 1000);
  const maxRetryDelayMs = positiveInt('consumer.maxRetryDelayMs', consumer.maxRetryDelayMs, Math.min(10000, Math.floor(stallAfterMs / 2)), 100);
  if (stallAfterMs <= Math.max(maxRetryDelayMs, lockTimeoutMs)) {
    throw new InvalidOptionsError(
      'consumer.stallAfterMs',
      `must be greater than consumer.maxRetryDelayMs (${maxRetryDelayMs}) and inbox.lockTimeoutMs (${lockTimeoutMs}): one ordinary retry must not count as a stall`,
    );
  }
  if (schemaRegistry && schemaRegistry.unknownIdWaitMs >= stallAfterMs) {
    throw new InvalidOptionsError(
      'schemaRegistry.unknownIdWaitMs',
      `must be lower than consumer.stallAfterMs (${stallAfterMs}): a partition waiting for a schema id to be registered must not count as a stall`,
    );
  }
  if (options.abortHangingTransactions !== undefined && typeof options.abortHangingTransactions !== 'boolean') {
    throw new InvalidOptionsError('abortHangingTransactions', 'must be true or false');
  }
  const retry = options.retry ?? {};
  const topicPrefix = options.topicPrefix ?? '';
  if (typeof topicPrefix !== 'string') throw new InvalidOptionsError('topicPrefix', 'must be a string');
  const suffix = options.deadLetter?.topicSuffix ?? '.dlq';
  if (typeof suffix !== 'string' || suffix === '') throw new InvalidOptionsError('deadLetter.topicSuffix', "must be a non-empty string such as '.dlq'");

  const resolvedRetry = resolveRetry(retry, { attempts: 3, initialDelayMs: 100, maxDelayMs: 5000, multiplier: 2 }, idleInTransactionTimeoutMs);

  return {
    kafka,
    driver,
    groupId,
    transactionalIdPrefix: prefix,
    schemas: { directory, longs },
    topics,
    json,
    topicPrefix,
    wireFormat,
    ...(schemaRegistry ? { schemaRegistry } : {}),
    ambientTransactions: resolveAmbient(options.ambientTransactions),
    dataSourceName: options.dataSourceName,
    database: databaseOption(options.database),
    consumer: {
      groupProtocol,
      sessionTimeout,
      heartbeatInterval,
      rebalanceTimeout,
      partitionsConsumedConcurrently: positiveInt('consumer.partitionsConsumedConcurrently', consumer.partitionsConsumedConcurrently, 64),
      maxBytesPerPartition,
      maxBytesInFlight,
      maxWaitTimeInMs: positiveInt('consumer.maxWaitTimeInMs', consumer.maxWaitTimeInMs, 500),
      stallAfterMs,
      maxRetryDelayMs,
      handlerTimeoutMs,
    },
    chunk: {
      maxRecords: positiveInt('chunk.maxRecords', options.chunk?.maxRecords, 500),
      maxBytes: positiveInt('chunk.maxBytes', options.chunk?.maxBytes, 4 * 1024 * 1024),
      maxMillis: positiveInt('chunk.maxMillis', options.chunk?.maxMillis, 1000),
    },
    transactionTimeoutMs,
    abortHangingTransactions: options.abortHangingTransactions ?? true,
    inbox: {
      runMigrations: inbox.runMigrations ?? true,
      retentionDays: positiveNumber('inbox.retentionDays', inbox.retentionDays, 7),
      retentionIntervalMs: positiveInt('inbox.retentionIntervalMs', inbox.retentionIntervalMs, 3600000, 0),
      retentionBatchSize: positiveInt('inbox.retentionBatchSize', inbox.retentionBatchSize, 1000),
      lockTimeoutMs,
      idleInTransactionTimeoutMs,
      statementTimeoutMs,
      deduplicationScope: scope,
    },
    isolation: {
      maxFailures: positiveInt('isolation.maxFailures', options.isolation?.maxFailures, 3),
      retryDelayMs: positiveInt('isolation.retryDelayMs', options.isolation?.retryDelayMs, 500, 0),
    },
    outputs: { maxRequestBytes: positiveInt('outputs.maxRequestBytes', options.outputs?.maxRequestBytes, 524288, 1024) },
    retry: resolvedRetry,
    deadLetter: { topicSuffix: suffix },
    operations: {
      pollIntervalMs: positiveInt('operations.pollIntervalMs', options.operations?.pollIntervalMs, 1000, 50),
      retentionDays: positiveNumber('operations.retentionDays', options.operations?.retentionDays, 30),
      reportIntervalMs: options.operations?.reportIntervalMs === 0 ? 0 : boundedInt('operations.reportIntervalMs', options.operations?.reportIntervalMs, 10000, 1000, 60000),
      stepLog: optionalPath('operations.stepLog', options.operations?.stepLog),
    },
    autoStart: options.autoStart ?? true,
    publisher: options.publisher === undefined ? undefined : resolvePublisher(options.publisher),
    outbox: options.outbox === undefined ? undefined : resolveOutbox(options.outbox, prefix),
    metrics: resolveMetrics(options.metrics),
  };
}

/**
 * A retry policy over `base` (the defaults, or for a handler's own `retry` the module's policy), validated: each
 * field in range, and the waits between attempts, which happen inside the unit of work's database transaction,
 * ending before PostgreSQL gives up on it (`inbox.idleInTransactionTimeoutMs`). Throws InvalidOptionsError
 * naming `${field}.<name>`.
 */
export function resolveRetry(retry: RetryOptions | undefined, base: ResolvedOptions['retry'], idleInTransactionTimeoutMs: number, field = 'retry'): ResolvedOptions['retry'] {
  if (retry !== undefined && (retry === null || typeof retry !== 'object')) throw new InvalidOptionsError(field, 'must be an object: { attempts, initialDelayMs, maxDelayMs, multiplier }');
  const resolved = {
    attempts: positiveInt(`${field}.attempts`, retry?.attempts, base.attempts),
    initialDelayMs: positiveInt(`${field}.initialDelayMs`, retry?.initialDelayMs, base.initialDelayMs, 0),
    maxDelayMs: positiveInt(`${field}.maxDelayMs`, retry?.maxDelayMs, base.maxDelayMs, 0),
    multiplier: atLeastOne(`${field}.multiplier`, retry?.multiplier, base.multiplier),
  };
  if (totalRetryDelay(resolved) >= idleInTransactionTimeoutMs) {
    throw new InvalidOptionsError(
      field,
      `waits ${totalRetryDelay(resolved)} ms in all between attempts, which must stay below inbox.idleInTransactionTimeoutMs (${idleInTransactionTimeoutMs}); lower attempts or delays`,
    );
  }
  return resolved;
}

function resolveMetrics(metrics: KafkaExactlyOnceModuleOptions['metrics']): ResolvedOptions['metrics'] {
  if (metrics === undefined) return undefined;
  if (metrics === null || typeof metrics !== 'object') throw new InvalidOptionsError('metrics', 'must be an object: {} for prom-client\'s global registry, or { registry }');
  if (metrics.registry !== undefined && typeof (metrics.registry as { getSingleMetric?: unknown })?.getSingleMetric !== 'function') {
    throw new InvalidOptionsError('metrics.registry', 'must be a prom-client Registry (new Registry() from prom-client)');
  }
  return { registry: metrics.registry };
}

function resolvePublisher(publisher: NonNullable<KafkaExactlyOnceModuleOptions['publisher']>): NonNullable<ResolvedOptions['publisher']> {
  const producer = publisher.producer ?? {};
  if (producer.idempotent === false) {
    throw new InvalidOptionsError('publisher.producer.idempotent', 'cannot be false: without idempotence a retried send can write a record twice or out of order');
  }
  if (producer.maxInFlightRequests !== undefined && producer.maxInFlightRequests !== 1) {
    throw new InvalidOptionsError('publisher.producer.maxInFlightRequests', 'must be 1: more requests in flight let a retried batch overtake a later one and break per-key order');
  }
  if (producer.acks !== undefined && producer.acks !== -1) {
    throw new InvalidOptionsError('publisher.producer.acks', 'must be -1 (all replicas): with fewer, an acknowledged publish can be lost when a broker fails');
  }
  if (publisher.instanceId !== undefined && (typeof publisher.instanceId !== 'string' || !INSTANCE_ID_PATTERN.test(publisher.instanceId))) {
    throw new InvalidOptionsError(
      'publisher.instanceId',
      `must be 1 to 200 letters, digits, ".", "_" or "-" (it becomes part of a Kafka transactional id), got ${JSON.stringify(publisher.instanceId)}; ` +
        'leave it out to use the id kept in the spool directory',
    );
  }
  return {
    instanceId: publisher.instanceId,
    sendTimeoutMs: positiveInt('publisher.sendTimeoutMs', publisher.sendTimeoutMs, 5000, 100),
    spool: {
      directory: publisher.spool?.directory ?? '.spool',
      maxBytes: positiveInt('publisher.spool.maxBytes', publisher.spool?.maxBytes, 256 * 1024 * 1024, 1024),
      segmentBytes: positiveInt('publisher.spool.segmentBytes', publisher.spool?.segmentBytes, 16 * 1024 * 1024, 1024),
    },
    breaker: {
      consecutiveFailures: positiveInt('publisher.breaker.consecutiveFailures', publisher.breaker?.consecutiveFailures, 3),
      halfOpenAfterMs: positiveInt('publisher.breaker.halfOpenAfterMs', publisher.breaker?.halfOpenAfterMs, 2000, 10),
    },
    unhealthyBacklogAgeMs: positiveInt('publisher.unhealthyBacklogAgeMs', publisher.unhealthyBacklogAgeMs, 300000, 1000),
    missingTopicGraceMs: positiveInt('publisher.missingTopicGraceMs', publisher.missingTopicGraceMs, 300000, 0),
  };
}

/** Kafka topic names: letters, digits, ".", "_" and "-", at most 249. */
const TOPIC_NAME = /^[A-Za-z0-9._-]{1,249}$/;

export function resolveOutbox(outbox: NonNullable<KafkaExactlyOnceModuleOptions['outbox']>, prefix: string): NonNullable<ResolvedOptions['outbox']> {
  if (outbox === null || typeof outbox !== 'object') throw new InvalidOptionsError('outbox', 'must be an object, e.g. {} for the defaults');
  if (outbox.relay !== undefined && typeof outbox.relay !== 'boolean') throw new InvalidOptionsError('outbox.relay', 'must be true or false');
  const name = outbox.name ?? prefix;
  if (typeof name !== 'string' || !INSTANCE_ID_PATTERN.test(name)) {
    throw new InvalidOptionsError('outbox.name', `must be 1 to 200 letters, digits, ".", "_" or "-" (it becomes part of a Kafka transactional id), got ${JSON.stringify(name)}`);
  }
  const checkpointTopic = outbox.checkpointTopic ?? 'kafka-eo.outbox-checkpoints';
  if (typeof checkpointTopic !== 'string' || !TOPIC_NAME.test(checkpointTopic)) {
    throw new InvalidOptionsError('outbox.checkpointTopic', `must be a Kafka topic name (letters, digits, ".", "_", "-"), got ${JSON.stringify(checkpointTopic)}`);
  }
  return {
    relay: outbox.relay ?? true,
    name,
    checkpointTopic,
    batchMaxRecords: positiveInt('outbox.batchMaxRecords', outbox.batchMaxRecords, 2000),
    batchMaxBytes: positiveInt('outbox.batchMaxBytes', outbox.batchMaxBytes, 512 * 1024, 1024),
    pollIntervalMs: positiveInt('outbox.pollIntervalMs', outbox.pollIntervalMs, 1000, 10),
    unhealthyAgeMs: positiveInt('outbox.unhealthyAgeMs', outbox.unhealthyAgeMs, 60000, 1000),
    sendTimeoutMs: positiveInt('outbox.sendTimeoutMs', outbox.sendTimeoutMs, 30000, 100),
  };
}

function formatOf(field: string, value: unknown): EventFormat | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !(EVENT_FORMATS as readonly string[]).includes(value)) throw new InvalidOptionsError(field, `must be one of ${EVENT_FORMATS.map((f) => `'${f}'`).join(', ')}`);
  return value as EventFormat;
}

/** JSON limits over `base`: each given one checked. */
export function resolveJsonLimits(field: string, value: Partial<JsonLimits> | undefined, base: JsonLimits): JsonLimits {
  if (value === undefined) return base;
  if (value === null || typeof value !== 'object') throw new InvalidOptionsError(field, "must be an object, e.g. { maxBytes: 1048576, maxDepth: 64, bigIntegers: 'reject' }");
  const bigIntegers = value.bigIntegers ?? base.bigIntegers;
  if (!['reject', 'bigint', 'string'].includes(bigIntegers)) throw new InvalidOptionsError(`${field}.bigIntegers`, "must be 'reject', 'bigint' or 'string'");
  return {
    maxBytes: positiveInt(`${field}.maxBytes`, value.maxBytes, base.maxBytes, 2),
    maxDepth: positiveInt(`${field}.maxDepth`, value.maxDepth, base.maxDepth, 1),
    bigIntegers,
  };
}

function wireFormatOf(field: string, value: unknown): WireFormat | undefined {
  if (value === undefined) return undefined;
  if (value !== 'single-object' && value !== 'schema-registry') throw new InvalidOptionsError(field, `must be 'single-object' or 'schema-registry', got ${JSON.stringify(value)}`);
  return value;
}

function resolveSchemaRegistry(registry: RegistryConnectionOptions | undefined): ResolvedOptions['schemaRegistry'] {
  if (registry === undefined) return undefined;
  if (registry === null || typeof registry !== 'object') throw new InvalidOptionsError('schemaRegistry', "must be an object, e.g. { url: 'https://registry.example.com' }");
  const url = nonEmpty('schemaRegistry.url', registry.url, 'the base URL of the Schema Registry');
  if (!/^https?:\/\//.test(url)) throw new InvalidOptionsError('schemaRegistry.url', `must be an http:// or https:// URL, got ${JSON.stringify(url)}`);
  const auth = registry.auth;
  if (auth !== undefined) {
    const basic = typeof (auth as { username?: unknown }).username === 'string' && typeof (auth as { password?: unknown }).password === 'string';
    const bearer = typeof (auth as { bearerToken?: unknown }).bearerToken === 'string' || typeof (auth as { bearerToken?: unknown }).bearerToken === 'function';
    if (basic === bearer) throw new InvalidOptionsError('schemaRegistry.auth', 'must be { username, password } (basic) or { bearerToken } (a string, or a function giving one)');
  }
  const subjectNameStrategy = registry.subjectNameStrategy ?? 'topic';
  if (!['topic', 'record', 'topic-record'].includes(subjectNameStrategy)) {
    throw new InvalidOptionsError('schemaRegistry.subjectNameStrategy', `must be 'topic', 'record' or 'topic-record', got ${JSON.stringify(subjectNameStrategy)}`);
  }
  if (registry.autoRegister !== undefined && typeof registry.autoRegister !== 'boolean') throw new InvalidOptionsError('schemaRegistry.autoRegister', 'must be true or false');
  return {
    url: url.replace(/\/+$/, ''),
    auth,
    tls: registry.tls,
    subjectNameStrategy,
    autoRegister: registry.autoRegister ?? false,
    requestTimeoutMs: positiveInt('schemaRegistry.requestTimeoutMs', registry.requestTimeoutMs, 10000, 100),
    unknownIdWaitMs: positiveInt('schemaRegistry.unknownIdWaitMs', registry.unknownIdWaitMs, 30000, 0),
    missingPeerWaitMs: positiveInt('schemaRegistry.missingPeerWaitMs', registry.missingPeerWaitMs, 600000, 0),
  };
}

/**
 * A topic's or handler's `registryFraming`, checked: a boolean, for format `json` only (Avro values are told apart
 * by their first bytes, Protobuf is always framed), true only with a `schemaRegistry`.
 */
export function registryFramingOf(field: string, value: unknown, format: EventFormat, hasRegistry: boolean): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new InvalidOptionsError(field, `must be true or false, got ${JSON.stringify(value)}`);
  if (format !== 'json') {
    throw new InvalidOptionsError(field, `is for format json (plain JSON or the registry's JSON Schema); this one is ${format}: Avro values are told apart by their first bytes, Protobuf is always in the registry's framing`);
  }
  if (value && !hasRegistry) throw new InvalidOptionsError(field, "is true, and the module has no schemaRegistry option to read the registry's framing with");
  return value;
}

function resolveAmbient(value: KafkaExactlyOnceModuleOptions['ambientTransactions']): ResolvedOptions['ambientTransactions'] {
  if (value === undefined || value === true) return {};
  if (value === false) return false;
  if (value === null || typeof value !== 'object') throw new InvalidOptionsError('ambientTransactions', 'must be true, false or { connectionName }');
  if (value.connectionName !== undefined && (typeof value.connectionName !== 'string' || value.connectionName === '')) {
    throw new InvalidOptionsError('ambientTransactions.connectionName', 'must be the non-empty name of a TransactionHost (ClsPluginTransactional connectionName)');
  }
  return { connectionName: value.connectionName };
}

/** The `database` option: a data layer built by typeormDatabase, prismaDatabase, drizzleDatabase or kyselyDatabase. */
function databaseOption(database: unknown): DatabasePort | undefined {
  if (database === undefined) return undefined;
  const d = database as Partial<DatabasePort> | null;
  if (!d || typeof d !== 'object' || typeof d.createQueryRunner !== 'function' || typeof d.lend !== 'function' || typeof d.sessionOf !== 'function' || typeof d.kind !== 'string') {
    throw new InvalidOptionsError(
      'database',
      'must be a data layer built by typeormDatabase(dataSource), prismaDatabase({ pool, client }), drizzleDatabase({ pool, drizzle }) or kyselyDatabase({ pool, kysely }) (or left out for the DataSource of TypeOrmModule)',
    );
  }
  return d as DatabasePort;
}
