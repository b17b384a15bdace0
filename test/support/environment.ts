import { join, resolve } from 'path';

/** Where the suites find Kafka and PostgreSQL; the same variables the apps read. */
export const REPO_ROOT = resolve(__dirname, '..', '..');

/**
 * The driver the module runs its consumer group on in the suites: KAFKA_CLIENT, as consumer-app and the test
 * applications read it (CI's second pass sets `platformatic`), else `kafkajs`. Suites about one driver's own
 * behaviour (the KafkaJS room's corrections) name theirs.
 */
export function testDriver(): 'kafkajs' | 'platformatic' {
  const driver = process.env.KAFKA_CLIENT || 'kafkajs';
  if (driver !== 'kafkajs' && driver !== 'platformatic') throw new Error(`KAFKA_CLIENT must be kafkajs or platformatic, got "${driver}"`);
  return driver;
}

/**
 * The Kafka release the suites run against: KAFKA_VERSION, as scripts/kafka/kafka.sh starts it (CI's second pass
 * sets 3.9.2), else kafka.sh's default, 4.4.0. Kafka 4's consumer group protocol (KIP-848) needs 4 or later.
 */
export function kafkaMajor(): number {
  return Number((process.env.KAFKA_VERSION || '4.4.0').split('.')[0]);
}

export function kafkaBrokers(): string[] {
  return (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092')
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
}

/** The server-level connection the harness uses to create and drop the run's database. */
export function adminDatabaseUrl(): string {
  return process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
}

/** The fresh database of this test run, created by the global set-up. */
export function testDatabaseUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) {
    throw new Error('TEST_DATABASE_URL is not set: run the integration suites through jest (npm test), whose global set-up creates it');
  }
  return url;
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** The local broker's SASL listener and its user (scripts/kafka/kafka.sh writes them when it formats). */
export function saslListener(): { brokers: string[]; username: string; password: string } {
  const host = kafkaBrokers()[0].split(':')[0];
  return {
    brokers: [`${host}:${process.env.KAFKA_SCRAM_PORT ?? '9096'}`],
    username: process.env.KAFKA_SCRAM_USER ?? 'kafka-eo',
    password: process.env.KAFKA_SCRAM_PASSWORD ?? 'kafka-eo-secret',
  };
}

/** The local broker's TLS listener and the CA that signed its certificate (scripts/kafka/kafka.sh makes both). */
export function tlsListener(): { brokers: string[]; caFile: string } {
  const host = kafkaBrokers()[0].split(':')[0];
  return {
    brokers: [`${host}:${process.env.KAFKA_TLS_PORT ?? '9097'}`],
    caFile: join(process.env.KAFKA_STATE_DIR ?? join(REPO_ROOT, '.kafka'), 'tls', 'ca.pem'),
  };
}
