import { KAFKA_DRIVERS, type KafkaDriverName } from 'kafka-exactly-once';

/** producer-app's settings, read from the environment (the names of docs/demo.md). */
export interface ProducerAppConfig {
  kafkaBrokers: string[];
  httpPort: number;
  /** Interface to listen on: 127.0.0.1 unless HTTP_HOST says otherwise (0.0.0.0 inside a container). */
  httpHost: string;
  /** KAFKA_TOPIC_PREFIX, prepended to every demo topic (isolated test runs on a shared broker). */
  topicPrefix: string;
  /** SPOOL_DIR: where events wait on disk while Kafka is unreachable (default .spool/producer-app). */
  spoolDirectory: string;
  /** PUBLISH_TIMEOUT_MS: a send not acknowledged by then is spooled (default 5000). */
  sendTimeoutMs: number;
  /** KAFKA_REQUEST_TIMEOUT_MS: KafkaJS's requestTimeout, when set (KafkaJS's default is 30000). */
  kafkaRequestTimeoutMs?: number;
  /** MISSING_TOPIC_GRACE_MS: how long spooled events wait for a missing topic before quarantine (library default). */
  missingTopicGraceMs?: number;
  /**
   * PAYMENTS_MODE: `publisher` (default), POST /payments publishes through EventPublisher (sent or spooled); `outbox`,
   * it writes the payment_requests row and its event in one PostgreSQL transaction (DATABASE_URL) and the
   * outbox relay sends the event.
   */
  paymentsMode: 'publisher' | 'outbox';
  /** DATABASE_URL, for the outbox mode. */
  databaseUrl: string;
  /** OUTBOX_CHECKPOINT_TOPIC: the outbox relay's checkpoint topic (the library's default when unset; topicPrefix does not apply to it). */
  outboxCheckpointTopic?: string;
  /**
   * EVENT_FORMAT: `avro` (default), the demo events written with the schemas of schemas/; `json`, written as plain
   * JSON (amounts as integers), as consumer-app reads them with its own EVENT_FORMAT=json.
   */
  eventFormat: 'avro' | 'json';
  /** KAFKA_CLIENT: the Kafka client of the publisher and the outbox relay, `kafkajs` (default) or `platformatic` (the module's `driver`). */
  kafkaClient: KafkaDriverName;
}

export function producerAppConfig(env: NodeJS.ProcessEnv = process.env): ProducerAppConfig {
  const httpPort = Number(env.HTTP_PORT ?? 3000);
  if (!Number.isInteger(httpPort) || httpPort < 0 || httpPort > 65535) {
    throw new Error(`HTTP_PORT must be a TCP port number, got "${env.HTTP_PORT}"`);
  }
  const sendTimeoutMs = Number(env.PUBLISH_TIMEOUT_MS ?? 5000);
  if (!Number.isInteger(sendTimeoutMs) || sendTimeoutMs < 100) throw new Error(`PUBLISH_TIMEOUT_MS must be an integer >= 100, got "${env.PUBLISH_TIMEOUT_MS}"`);
  const requestTimeout = env.KAFKA_REQUEST_TIMEOUT_MS === undefined ? undefined : Number(env.KAFKA_REQUEST_TIMEOUT_MS);
  if (requestTimeout !== undefined && (!Number.isInteger(requestTimeout) || requestTimeout < 100)) {
    throw new Error(`KAFKA_REQUEST_TIMEOUT_MS must be an integer >= 100, got "${env.KAFKA_REQUEST_TIMEOUT_MS}"`);
  }
  const grace = env.MISSING_TOPIC_GRACE_MS === undefined ? undefined : Number(env.MISSING_TOPIC_GRACE_MS);
  if (grace !== undefined && (!Number.isInteger(grace) || grace < 0)) throw new Error(`MISSING_TOPIC_GRACE_MS must be an integer >= 0, got "${env.MISSING_TOPIC_GRACE_MS}"`);
  const paymentsMode = env.PAYMENTS_MODE ?? 'publisher';
  if (paymentsMode !== 'publisher' && paymentsMode !== 'outbox') throw new Error(`PAYMENTS_MODE must be publisher or outbox, got "${env.PAYMENTS_MODE}"`);
  const eventFormat = env.EVENT_FORMAT || 'avro';
  if (eventFormat !== 'avro' && eventFormat !== 'json') throw new Error(`EVENT_FORMAT must be avro or json, got "${env.EVENT_FORMAT}"`);
  const kafkaClient = env.KAFKA_CLIENT || 'kafkajs';
  if (!(KAFKA_DRIVERS as readonly string[]).includes(kafkaClient)) throw new Error(`KAFKA_CLIENT must be one of ${KAFKA_DRIVERS.join(', ')}, got "${env.KAFKA_CLIENT}"`);
  return {
    kafkaClient: kafkaClient as KafkaDriverName,
    eventFormat,
    paymentsMode,
    databaseUrl: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    outboxCheckpointTopic: env.OUTBOX_CHECKPOINT_TOPIC || undefined,
    kafkaRequestTimeoutMs: requestTimeout,
    missingTopicGraceMs: grace,
    kafkaBrokers: (env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',').map((b) => b.trim()).filter(Boolean),
    httpPort,
    httpHost: env.HTTP_HOST ?? '127.0.0.1',
    topicPrefix: env.KAFKA_TOPIC_PREFIX ?? '',
    spoolDirectory: env.SPOOL_DIR ?? '.spool/producer-app',
    sendTimeoutMs,
  };
}
