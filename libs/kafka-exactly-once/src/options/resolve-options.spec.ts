import { InvalidOptionsError } from '../errors/invalid-options.error';
import type { KafkaExactlyOnceModuleOptions } from '../interfaces/kafka-exactly-once-options.interface';
import { writesToRegistry } from '../formats/registry-boot';
import { resolveOptions } from './resolve-options';
import { drizzleDatabase } from '../database/drizzle.database';

const valid: KafkaExactlyOnceModuleOptions = {
  kafka: { clientId: 'app', brokers: ['127.0.0.1:9092'] },
  groupId: 'app',
  transactionalIdPrefix: 'app',
  schemas: { directory: 'schemas' },
};

function fieldOf(options: unknown): string | undefined {
  try {
    resolveOptions(options as KafkaExactlyOnceModuleOptions);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionsError);
    return (err as InvalidOptionsError).field;
  }
  return undefined;
}

describe('resolveOptions', () => {
  it('applies the defaults', () => {
    const resolved = resolveOptions(valid);
    expect(resolved.driver).toBe('kafkajs');
    expect(resolved.consumer).toEqual({
      groupProtocol: 'classic',
      sessionTimeout: 30000,
      heartbeatInterval: 3000,
      rebalanceTimeout: 60000,
      partitionsConsumedConcurrently: 64,
      maxBytesPerPartition: 524288,
      maxBytesInFlight: 1048576,
      maxWaitTimeInMs: 500,
      stallAfterMs: 60000,
      maxRetryDelayMs: 10000,
      handlerTimeoutMs: 25000,
    });
    expect(resolved.isolation).toEqual({ maxFailures: 3, retryDelayMs: 500 });
    expect(resolved.outputs).toEqual({ maxRequestBytes: 524288 });
    expect(resolved.inbox.deduplicationScope).toBe('topic');
    expect(resolved.chunk).toEqual({ maxRecords: 500, maxBytes: 4194304, maxMillis: 1000 });
    expect(resolved.inbox).toMatchObject({ retentionDays: 7, lockTimeoutMs: 5000, statementTimeoutMs: 20000, idleInTransactionTimeoutMs: 30000, runMigrations: true });
    expect(resolved.retry).toEqual({ attempts: 3, initialDelayMs: 100, maxDelayMs: 5000, multiplier: 2 });
    expect(resolved.deadLetter.topicSuffix).toBe('.dlq');
    expect(resolved.topicPrefix).toBe('');
  });

  it('needs no schemas for a module of JSON topics, and keeps JSON limits over the defaults', () => {
    const resolved = resolveOptions({ ...valid, schemas: undefined, topics: { out: { format: 'json' } }, json: { bigIntegers: 'bigint' } });
    expect(resolved.schemas.directory).toBe('');
    expect(resolved.json).toEqual({ maxBytes: 1048576, maxDepth: 64, bigIntegers: 'bigint' });
  });

  it.each([
    [{ ...valid, kafka: undefined }, 'kafka'],
    [{ ...valid, kafka: { clientId: 'a', brokers: [] } }, 'kafka.brokers'],
    [{ ...valid, kafka: { clientId: '', brokers: ['b:1'] } }, 'kafka.clientId'],
    [{ ...valid, groupId: ' ' }, 'groupId'],
    [{ ...valid, driver: 'rdkafka' as never }, 'driver'],
    [{ ...valid, driver: 'platformatic' as const, kafka: { clientId: 'a', brokers: async () => ['b:1'] } }, 'kafka.brokers'],
    [{ ...valid, consumer: { groupProtocol: 'consumer' as const } }, 'consumer.groupProtocol'],
    [{ ...valid, driver: 'platformatic' as const, consumer: { groupProtocol: 'cooperative' as never } }, 'consumer.groupProtocol'],
    [{ ...valid, publisher: { producer: { idempotent: false } } }, 'publisher.producer.idempotent'],
    [{ ...valid, publisher: { producer: { maxInFlightRequests: 5 } } }, 'publisher.producer.maxInFlightRequests'],
    [{ ...valid, publisher: { producer: { acks: 1 } } }, 'publisher.producer.acks'],
    [{ ...valid, transactionalIdPrefix: 'has space' }, 'transactionalIdPrefix'],
    [{ ...valid, publisher: { instanceId: 'web/1' } }, 'publisher.instanceId'],
    [{ ...valid, publisher: { instanceId: '' } }, 'publisher.instanceId'],
    [{ ...valid, publisher: { instanceId: 7 } }, 'publisher.instanceId'],
    [{ ...valid, schemas: 'schemas' as never }, 'schemas'],
    [{ ...valid, schemas: { directory: 'x', longs: 'float' } }, 'schemas.longs'],
    [{ ...valid, topics: { out: { schema: '' } } }, 'topics["out"].schema'],
    [{ ...valid, topics: { out: {} } }, 'topics["out"].schema'],
    [{ ...valid, topics: { out: { format: 'xml' as never } } }, 'topics["out"].format'],
    [{ ...valid, topics: { out: { format: 'json', schema: 'x.Y' } } }, 'topics["out"].schema'],
    [{ ...valid, topics: { out: { format: 'protobuf' } } }, 'topics["out"].format'],
    [{ ...valid, schemaRegistry: { url: 'http://r', subjectNameStrategy: 'record' }, topics: { out: { format: 'protobuf' } } }, 'topics["out"].schema'],
    [{ ...valid, schemaRegistry: { url: 'http://r', unknownIdWaitMs: -1 } }, 'schemaRegistry.unknownIdWaitMs'],
    [{ ...valid, schemaRegistry: { url: 'http://r', unknownIdWaitMs: 1.5 } }, 'schemaRegistry.unknownIdWaitMs'],
    [{ ...valid, schemaRegistry: { url: 'http://r', unknownIdWaitMs: 60000 } }, 'schemaRegistry.unknownIdWaitMs'],
    [{ ...valid, schemaRegistry: { url: 'http://r', missingPeerWaitMs: -1 } }, 'schemaRegistry.missingPeerWaitMs'],
    [{ ...valid, schemaRegistry: { url: 'http://r' }, topics: { out: { format: 'json', registryFraming: 'no' as never } } }, 'topics["out"].registryFraming'],
    [{ ...valid, schemaRegistry: { url: 'http://r' }, topics: { out: { schema: 'x.Y', registryFraming: false } } }, 'topics["out"].registryFraming'],
    [{ ...valid, schemaRegistry: { url: 'http://r' }, topics: { out: { format: 'protobuf', registryFraming: false } } }, 'topics["out"].registryFraming'],
    [{ ...valid, topics: { out: { format: 'json', registryFraming: true } } }, 'topics["out"].registryFraming'],
    [{ ...valid, schemaRegistry: { url: 'http://r' }, topics: { out: { format: 'json', registryFraming: false, wireFormat: 'schema-registry' } } }, 'topics["out"].registryFraming'],
    [{ ...valid, json: { bigIntegers: 'round' as never } }, 'json.bigIntegers'],
    [{ ...valid, json: { maxDepth: 0 } }, 'json.maxDepth'],
    [{ ...valid, consumer: { sessionTimeout: 500 } }, 'consumer.sessionTimeout'],
    [{ ...valid, consumer: { sessionTimeout: 6000, heartbeatInterval: 6000 } }, 'consumer.heartbeatInterval'],
    [{ ...valid, chunk: { maxRecords: 0 } }, 'chunk.maxRecords'],
    [{ ...valid, operations: { stepLog: '' } }, 'operations.stepLog'],
    [{ ...valid, operations: { stepLog: 42 as never } }, 'operations.stepLog'],
    [{ ...valid, chunk: { maxBytes: -1 } }, 'chunk.maxBytes'],
    [{ ...valid, inbox: { idleInTransactionTimeoutMs: 90000 } }, 'inbox.idleInTransactionTimeoutMs'],
    [{ ...valid, retry: { attempts: 1.5 } }, 'retry.attempts'],
    [{ ...valid, retry: { multiplier: 0.5 } }, 'retry.multiplier'],
    [{ ...valid, retry: { attempts: 10, initialDelayMs: 5000, maxDelayMs: 5000 } }, 'retry'],
    [{ ...valid, deadLetter: { topicSuffix: '' } }, 'deadLetter.topicSuffix'],
    // Timeouts that must nest.
    [{ ...valid, consumer: { sessionTimeout: 45000, rebalanceTimeout: 30000 } }, 'consumer.rebalanceTimeout'],
    [{ ...valid, consumer: { maxBytesInFlight: 0 } }, 'consumer.maxBytesInFlight'],
    [{ ...valid, consumer: { maxBytesInFlight: 262144 } }, 'consumer.maxBytesInFlight'],
    [{ ...valid, consumer: { maxBytesPerPartition: 2097152, maxBytesInFlight: 1048576 } }, 'consumer.maxBytesInFlight'],
    [{ ...valid, inbox: { lockTimeoutMs: 30000 } }, 'inbox.lockTimeoutMs'],
    [{ ...valid, consumer: { stallAfterMs: 5000 } }, 'consumer.stallAfterMs'],
    [{ ...valid, consumer: { stallAfterMs: 20000, maxRetryDelayMs: 30000 } }, 'consumer.stallAfterMs'],
    [{ ...valid, inbox: { deduplicationScope: 'cluster' } }, 'inbox.deduplicationScope'],
    [{ ...valid, isolation: { maxFailures: 0 } }, 'isolation.maxFailures'],
    [{ ...valid, outputs: { maxRequestBytes: 10 } }, 'outputs.maxRequestBytes'],
  ])('names the bad field (%#)', (options, field) => {
    expect(fieldOf(options)).toBe(field);
  });

  it('bounds the bytes in flight at 1 MiB, or at one partition\'s fetch when that is larger, and says how to fix a bound below it', () => {
    expect(resolveOptions({ ...valid, consumer: { maxBytesPerPartition: 2097152 } }).consumer.maxBytesInFlight).toBe(2097152);
    expect(resolveOptions({ ...valid, consumer: { maxBytesInFlight: 4194304 } }).consumer.maxBytesInFlight).toBe(4194304);
    expect(() => resolveOptions({ ...valid, consumer: { maxBytesInFlight: 65536 } })).toThrow(/"consumer.maxBytesInFlight" must be at least consumer.maxBytesPerPartition \(524288\).*raise it, or lower maxBytesPerPartition/);
  });

  it('waits 30 s for a schema id the registry does not know by default, and takes a plain JSON topic among framed ones', () => {
    expect(resolveOptions({ ...valid, schemaRegistry: { url: 'http://r' } }).schemaRegistry).toMatchObject({ unknownIdWaitMs: 30000, missingPeerWaitMs: 600000 });
    expect(resolveOptions({ ...valid, schemaRegistry: { url: 'http://r', unknownIdWaitMs: 0 } }).schemaRegistry).toMatchObject({ unknownIdWaitMs: 0 });
    expect(() => resolveOptions({ ...valid, schemaRegistry: { url: 'http://r', unknownIdWaitMs: 60000 } })).toThrow(/"schemaRegistry.unknownIdWaitMs" must be lower than consumer.stallAfterMs \(60000\)/);
    // The module writes JSON Schema, except to the topic declared plain JSON only.
    const resolved = resolveOptions({ ...valid, wireFormat: 'schema-registry', schemaRegistry: { url: 'http://r' }, topics: { plain: { format: 'json', registryFraming: false }, framed: { format: 'json' } } });
    expect(writesToRegistry(resolved, 'plain')).toBe(false);
    expect(writesToRegistry(resolved, 'framed')).toBe(true);
  });

  it('takes a data layer built by an adapter as database, and names the field for anything else', () => {
    const database = drizzleDatabase({ pool: { connect: async () => ({}), query: async () => ({ rows: [] }) }, drizzle: (client) => client });
    expect(resolveOptions({ ...valid, database }).database).toBe(database);
    expect(resolveOptions(valid).database).toBeUndefined();
    for (const bad of [null, {}, 'prisma', { kind: 'prisma', createQueryRunner: () => undefined }]) expect(fieldOf({ ...valid, database: bad })).toBe('database');
  });

  it('says which of two nested timeouts is wrong and why', () => {
    expect(() => resolveOptions({ ...valid, inbox: { lockTimeoutMs: 30000 } })).toThrow(
      /"inbox.lockTimeoutMs" must be lower than inbox.idleInTransactionTimeoutMs \(30000\)/,
    );
  });

  it('keeps statements and handler calls within the idle timeout of a unit of work, and a lock wait within a statement', () => {
    expect(resolveOptions({ ...valid, inbox: { idleInTransactionTimeoutMs: 9000 } })).toMatchObject({ inbox: { statementTimeoutMs: 6000, lockTimeoutMs: 4500 }, consumer: { handlerTimeoutMs: 7500 } });
    expect(() => resolveOptions({ ...valid, inbox: { statementTimeoutMs: 30000 } })).toThrow(/"inbox.statementTimeoutMs" must be greater than inbox.lockTimeoutMs \(5000\).*lower than inbox.idleInTransactionTimeoutMs \(30000\)/);
    expect(() => resolveOptions({ ...valid, inbox: { statementTimeoutMs: 4000 } })).toThrow(/"inbox.statementTimeoutMs" must be greater than inbox.lockTimeoutMs/);
    expect(() => resolveOptions({ ...valid, consumer: { handlerTimeoutMs: 30000 } })).toThrow(/"consumer.handlerTimeoutMs" must be lower than inbox.idleInTransactionTimeoutMs \(30000\)/);
    expect(resolveOptions({ ...valid, inbox: { retentionDays: 0.5 } }).inbox.retentionDays).toBe(0.5);
    expect(() => resolveOptions({ ...valid, inbox: { retentionDays: 0 } })).toThrow(/"inbox.retentionDays" must be a number > 0/);
  });

  it('resolves the outbox with its defaults, naming it after the transactional id prefix', () => {
    expect(resolveOptions(valid).outbox).toBeUndefined();
    expect(resolveOptions({ ...valid, outbox: {} }).outbox).toEqual({
      relay: true,
      name: 'app',
      checkpointTopic: 'kafka-eo.outbox-checkpoints',
      batchMaxRecords: 2000,
      batchMaxBytes: 524288,
      pollIntervalMs: 1000,
      unhealthyAgeMs: 60000,
      sendTimeoutMs: 30000,
    });
    expect(resolveOptions({ ...valid, outbox: { relay: false, name: 'orders.v2' } }).outbox).toMatchObject({ relay: false, name: 'orders.v2' });
  });

  it('refuses outbox options that cannot work', () => {
    expect(fieldOf({ ...valid, outbox: null })).toBe('outbox');
    expect(fieldOf({ ...valid, outbox: { relay: 'yes' } })).toBe('outbox.relay');
    expect(fieldOf({ ...valid, outbox: { name: 'a b' } })).toBe('outbox.name');
    expect(fieldOf({ ...valid, outbox: { name: 'x'.repeat(201) } })).toBe('outbox.name');
    expect(fieldOf({ ...valid, outbox: { checkpointTopic: 'no/slash' } })).toBe('outbox.checkpointTopic');
    expect(fieldOf({ ...valid, outbox: { batchMaxRecords: 0 } })).toBe('outbox.batchMaxRecords');
    expect(fieldOf({ ...valid, outbox: { batchMaxBytes: 10 } })).toBe('outbox.batchMaxBytes');
  });

  it('keeps a valid publisher.instanceId', () => {
    expect(resolveOptions({ ...valid, publisher: { instanceId: 'orders-api.pod-3' } }).publisher?.instanceId).toBe('orders-api.pod-3');
  });

  it('says how to fix it', () => {
    expect(() => resolveOptions({ ...valid, inbox: { idleInTransactionTimeoutMs: 90000 } })).toThrow(
      /"inbox.idleInTransactionTimeoutMs" must not exceed transactionTimeoutMs \(60000\)/,
    );
  });
});

describe('topicPrefix and the outbox', () => {
  it('prefixes no name of the outbox\'s own: its checkpoint topic is given whole (the event topics are prefixed like every declared topic)', () => {
    const resolved = resolveOptions({ ...valid, topicPrefix: 'staging.', outbox: {} });
    expect(resolved.outbox?.checkpointTopic).toBe('kafka-eo.outbox-checkpoints');
    expect(resolveOptions({ ...valid, topicPrefix: 'staging.', outbox: { checkpointTopic: 'staging.kafka-eo.outbox-checkpoints' } }).outbox?.checkpointTopic).toBe('staging.kafka-eo.outbox-checkpoints');
  });
});
