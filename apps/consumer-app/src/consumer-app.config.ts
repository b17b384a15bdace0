import { KAFKA_DRIVERS, type KafkaDriverName } from 'kafka-exactly-once';
/** Injection token of the approval limit of payments (cents, bigint). */
export const APPROVAL_LIMIT_CENTS = Symbol('consumer-app:approval-limit-cents');

/** Injection token of EVENT_FORMAT (`avro` or `json`): how the demo events are written. */
export const EVENT_FORMAT = Symbol('consumer-app:event-format');

/** consumer-app's settings, read from the environment (the names of docs/demo.md, plus a few for tests). */
export interface ConsumerAppConfig {
  kafkaBrokers: string[];
  databaseUrl: string;
  httpPort: number;
  /** Interface to listen on: 127.0.0.1 unless HTTP_HOST says otherwise (0.0.0.0 inside a container). */
  httpHost: string;
  /** KAFKA_GROUP_ID, default consumer-app. */
  groupId: string;
  /** KAFKA_TOPIC_PREFIX, prepended to every demo topic (isolated test runs on a shared broker). */
  topicPrefix: string;
  /** KAFKA_SESSION_TIMEOUT_MS, default 30000. */
  sessionTimeoutMs: number;
  /** Partitions of the demo topics when this app creates them (DEMO_TOPIC_PARTITIONS, default 6). */
  topicPartitions: number;
  /** Replication factor of the demo topics when this app creates them (DEMO_TOPIC_REPLICATION_FACTOR, default 1; 3 on a 3-node cluster). */
  topicReplicationFactor: number;
  /** KAFKA_TRANSACTION_TIMEOUT_MS: the Kafka transaction timeout (library default when unset). */
  transactionTimeoutMs?: number;
  /** INBOX_IDLE_IN_TRANSACTION_TIMEOUT_MS: how soon PostgreSQL ends a stalled instance's transaction (default 30000). */
  idleInTransactionTimeoutMs: number;
  /** INBOX_LOCK_TIMEOUT_MS: how long a unit of work waits for a row lock held by another session (library default). */
  lockTimeoutMs?: number;
  /** KAFKA_STALL_AFTER_MS: /health reports a partition whose records wait this long without a commit (default 60000). */
  stallAfterMs?: number;
  /** REPORT_INTERVAL_MS: how often the instance reports to the console of any instance (operations.reportIntervalMs). */
  reportIntervalMs?: number;
  /** STEP_LOG: a file for each committed unit's step times (operations.stepLog; the bench's --tail-steps). */
  stepLog?: string;
  /** ADMIN_TOKEN: when set, the operator REST endpoints (/kafka-eo/...) are mounted and need this bearer token. */
  adminToken?: string;
  /** ADMIN_READ_ONLY_TOKEN: a second token that may only read (every action refused with 403). */
  adminReadOnlyToken?: string;
  /**
   * ADMIN_CONSOLE: the operator console with the admin endpoints: on by default (at /kafka-eo/), `off` turns it
   * off, a path serves it there.
   */
  adminConsole: false | string;
  /** PAYMENT_APPROVAL_LIMIT_CENTS: payments of this size or more need a row in payment_approvals (default 1000000). */
  approvalLimitCents: bigint;
  /**
   * CONSUMER_APP_TRANSPORT: how payments.requested is handled. `module` (default): PaymentsHandler, an
   * @IdempotentHandler batch handler. `microservice`: PaymentsController, an @EventPattern handler under
   * KafkaExactlyOnceServer, connected to this HTTP application as a hybrid microservice.
   */
  transport: 'module' | 'microservice';
  /** WELCOME_EMAIL_RETRY_DELAYS: the retry tiers of welcome emails, comma-separated (default `10s,1m,10m`). */
  welcomeEmailRetryDelays: string[];
  /**
   * SCHEMA_REGISTRY_URL: a Confluent-compatible Schema Registry. With it, the inputs may be in its framing too
   * (records of both framings are read), and WIRE_FORMAT=schema-registry writes the outputs in it (their schemas
   * registered beforehand: npx kafka-eo schemas register).
   */
  schemaRegistryUrl?: string;
  /** WIRE_FORMAT: `single-object` (default) or `schema-registry`, how the outputs are framed. */
  wireFormat: 'single-object' | 'schema-registry';
  /**
   * EVENT_FORMAT: what the demo events are. `avro` (default): read with the schemas of schemas/, written Avro.
   * `json`: read as JSON (the fields of the same schemas, amounts as integers), validated with the DTOs of this
   * application, and written as plain JSON.
   */
  eventFormat: 'avro' | 'json';
  /**
   * DATA_LAYER: what the handlers write with, through their unit of work's `ctx.db`. `typeorm` (default): TypeORM's
   * EntityManager (the module's default data layer, TypeOrmModule's DataSource). `prisma`, `drizzle`, `kysely`: that
   * ORM over a node-postgres Pool of DATABASE_URL, given to the module as its `database` option. The tables are the
   * same whatever the layer: TypeORM's migrations create them at start-up.
   */
  dataLayer: DataLayerKind;
  /** KAFKA_CLIENT: the Kafka client of the consumer group, `kafkajs` (default) or `platformatic` (the module's `driver`). */
  kafkaClient: KafkaDriverName;
  /** KAFKA_GROUP_PROTOCOL: `classic` (default) or `consumer` (Kafka 4's KIP-848; needs KAFKA_CLIENT=platformatic). */
  groupProtocol: 'classic' | 'consumer';
  /**
   * STRAY_STATEMENTS_PERCENT (0 to 100, default 0; for `npm run verify`'s hostile-json scenario): the share of
   * payments whose handler, like one with a forgotten `await`, sends a statement through its `ctx.db` from a timer
   * 0 to 50 ms after its call returned (a read that fails, or a write of a `stray-` user). The library must refuse
   * each one; consumer-app logs what became of it.
   */
  strayStatementsPercent: number;
}

/** The data layers consumer-app's handlers can write with (DATA_LAYER). */
export const DATA_LAYERS = ['typeorm', 'prisma', 'drizzle', 'kysely'] as const;
export type DataLayerKind = (typeof DATA_LAYERS)[number];

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  return value;
}

function wireFormat(raw: string | undefined): ConsumerAppConfig['wireFormat'] {
  if (raw === undefined || raw === '' || raw === 'single-object') return 'single-object';
  if (raw === 'schema-registry') return 'schema-registry';
  throw new Error(`WIRE_FORMAT must be "single-object" or "schema-registry", got "${raw}"`);
}

function eventFormat(raw: string | undefined, wire: ConsumerAppConfig['wireFormat']): ConsumerAppConfig['eventFormat'] {
  if (raw === undefined || raw === '' || raw === 'avro') return 'avro';
  if (raw !== 'json') throw new Error(`EVENT_FORMAT must be "avro" or "json", got "${raw}"`);
  if (wire === 'schema-registry') throw new Error('EVENT_FORMAT=json writes plain JSON; WIRE_FORMAT=schema-registry frames Avro outputs: leave WIRE_FORMAT unset');
  return 'json';
}

function kafkaClient(raw: string | undefined): KafkaDriverName {
  if (raw === undefined || raw === '') return 'kafkajs';
  if ((KAFKA_DRIVERS as readonly string[]).includes(raw)) return raw as KafkaDriverName;
  throw new Error(`KAFKA_CLIENT must be one of ${KAFKA_DRIVERS.join(', ')}, got "${raw}"`);
}

function groupProtocol(raw: string | undefined): 'classic' | 'consumer' {
  if (raw === undefined || raw === '' || raw === 'classic') return 'classic';
  if (raw === 'consumer') return 'consumer';
  throw new Error(`KAFKA_GROUP_PROTOCOL must be classic or consumer, got "${raw}"`);
}

function dataLayer(raw: string | undefined): DataLayerKind {
  if (raw === undefined || raw === '') return 'typeorm';
  if ((DATA_LAYERS as readonly string[]).includes(raw)) return raw as DataLayerKind;
  throw new Error(`DATA_LAYER must be one of ${DATA_LAYERS.join(', ')}, got "${raw}"`);
}

function transport(raw: string | undefined): ConsumerAppConfig['transport'] {
  if (raw === undefined || raw === '' || raw === 'module') return 'module';
  if (raw === 'microservice') return 'microservice';
  throw new Error(`CONSUMER_APP_TRANSPORT must be "module" or "microservice", got "${raw}"`);
}

export function consumerAppConfig(env: NodeJS.ProcessEnv = process.env): ConsumerAppConfig {
  return {
    kafkaBrokers: (env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',').map((b) => b.trim()).filter(Boolean),
    databaseUrl: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    httpPort: integer(env, 'HTTP_PORT', 3001, 0, 65535),
    httpHost: env.HTTP_HOST ?? '127.0.0.1',
    groupId: env.KAFKA_GROUP_ID || 'consumer-app',
    topicPrefix: env.KAFKA_TOPIC_PREFIX ?? '',
    sessionTimeoutMs: integer(env, 'KAFKA_SESSION_TIMEOUT_MS', 30000, 3000),
    topicPartitions: integer(env, 'DEMO_TOPIC_PARTITIONS', 6, 1),
    topicReplicationFactor: integer(env, 'DEMO_TOPIC_REPLICATION_FACTOR', 1, 1, 32),
    transactionTimeoutMs: env.KAFKA_TRANSACTION_TIMEOUT_MS ? integer(env, 'KAFKA_TRANSACTION_TIMEOUT_MS', 60000, 1000) : undefined,
    idleInTransactionTimeoutMs: integer(env, 'INBOX_IDLE_IN_TRANSACTION_TIMEOUT_MS', 30000, 1000),
    lockTimeoutMs: env.INBOX_LOCK_TIMEOUT_MS ? integer(env, 'INBOX_LOCK_TIMEOUT_MS', 5000, 10) : undefined,
    stallAfterMs: env.KAFKA_STALL_AFTER_MS ? integer(env, 'KAFKA_STALL_AFTER_MS', 60000, 1000) : undefined,
    reportIntervalMs: env.REPORT_INTERVAL_MS ? integer(env, 'REPORT_INTERVAL_MS', 10000, 0) : undefined,
    stepLog: env.STEP_LOG || undefined,
    adminToken: env.ADMIN_TOKEN || undefined,
    adminReadOnlyToken: env.ADMIN_READ_ONLY_TOKEN || undefined,
    adminConsole: env.ADMIN_CONSOLE === 'off' ? false : env.ADMIN_CONSOLE || '/kafka-eo',
    approvalLimitCents: BigInt(integer(env, 'PAYMENT_APPROVAL_LIMIT_CENTS', 1000000, 1)),
    transport: transport(env.CONSUMER_APP_TRANSPORT),
    welcomeEmailRetryDelays: (env.WELCOME_EMAIL_RETRY_DELAYS || '10s,1m,10m').split(',').map((d) => d.trim()),
    schemaRegistryUrl: env.SCHEMA_REGISTRY_URL || undefined,
    wireFormat: wireFormat(env.WIRE_FORMAT),
    eventFormat: eventFormat(env.EVENT_FORMAT, wireFormat(env.WIRE_FORMAT)),
    dataLayer: dataLayer(env.DATA_LAYER),
    kafkaClient: kafkaClient(env.KAFKA_CLIENT),
    groupProtocol: groupProtocol(env.KAFKA_GROUP_PROTOCOL),
    strayStatementsPercent: integer(env, 'STRAY_STATEMENTS_PERCENT', 0, 0, 100),
  };
}
