import type * as PlatformaticKafka from '@platformatic/kafka';
import type { KafkaConnectionOptions } from '../client/drivers';
import { requirePeer } from '../optional-peers';

export type { PlatformaticKafka };

/** A Fetch answer as the client's `fetch` returns it, and one partition of it. */
export type FetchAnswer = Awaited<ReturnType<PlatformaticKafka.Consumer['fetch']>>;
export type FetchAnswerPartition = FetchAnswer['responses'][number]['partitions'][number];

/** The Node.js versions @platformatic/kafka runs on (its package.json's engines). */
export const PLATFORMATIC_NODE = '22.22.0 or later (or 24.6.0 or later)';

let loaded: typeof PlatformaticKafka | undefined;

/**
 * @platformatic/kafka, loaded when the `platformatic` driver is first used (the module's boot checks it): an ES
 * module, which Node.js loads through `require` from 22.12 on. An optional peer dependency: MissingPeerError when it
 * is not installed (or not in a supported version), and a clear error when this Node.js cannot run it.
 */
export function platformaticKafka(): typeof PlatformaticKafka {
  if (loaded) return loaded;
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 22) || (major === 24 && minor < 6)) {
    throw new Error(`kafka-exactly-once: the "platformatic" driver runs on Node.js ${PLATFORMATIC_NODE}, and this is ${process.version}. Use the "kafkajs" driver on this Node.js, or a newer Node.js.`);
  }
  loaded = requirePeer<typeof PlatformaticKafka>('@platformatic/kafka', "the module's driver 'platformatic'");
  return loaded;
}

/**
 * The connection options of a @platformatic/kafka client from the module's `kafka` options (KafkaJS's names):
 * brokers, client id, TLS, SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), timeouts and retries. What has no
 * equivalent is refused with a clear error rather than dropped.
 */
export function connectionOptions(kafka: KafkaConnectionOptions): Pick<PlatformaticKafka.BaseOptions, 'clientId' | 'bootstrapBrokers' | 'tls' | 'sasl' | 'connectTimeout' | 'requestTimeout' | 'retries' | 'retryDelay'> {
  if (!Array.isArray(kafka.brokers)) throw new Error('kafka-exactly-once: the "platformatic" driver takes kafka.brokers as an array of host:port strings (not a function)');
  const options: ReturnType<typeof connectionOptions> = { clientId: kafka.clientId ?? 'kafka-exactly-once', bootstrapBrokers: [...kafka.brokers] };
  if (kafka.ssl === true) options.tls = {};
  else if (kafka.ssl) options.tls = kafka.ssl;
  if (kafka.sasl) {
    const sasl = kafka.sasl as { mechanism: string; username?: string; password?: string };
    const mechanism = { plain: 'PLAIN', 'scram-sha-256': 'SCRAM-SHA-256', 'scram-sha-512': 'SCRAM-SHA-512' }[String(sasl.mechanism).toLowerCase()] as PlatformaticKafka.SASLOptions['mechanism'] | undefined;
    if (!mechanism) throw new Error(`kafka-exactly-once: the "platformatic" driver supports SASL mechanisms plain, scram-sha-256 and scram-sha-512, not "${sasl.mechanism}"`);
    options.sasl = { mechanism, username: sasl.username, password: sasl.password };
  }
  if (kafka.connectionTimeout !== undefined) options.connectTimeout = kafka.connectionTimeout;
  if (kafka.requestTimeout !== undefined) options.requestTimeout = kafka.requestTimeout;
  const retry = kafka.retry ?? {};
  options.retries = retry.retries ?? 5;
  const initial = retry.initialRetryTime ?? 300;
  const max = retry.maxRetryTime ?? 30000;
  const factor = retry.multiplier ?? 2;
  // After a commit the coordinator may answer the next transaction's first request CONCURRENT_TRANSACTIONS for a
  // few milliseconds: those retries start short (the client's fixed delay is 1 s).
  options.retryDelay = (_client, _operation, attempt, _retries, error) => {
    const concurrent = findApiId(error, 'CONCURRENT_TRANSACTIONS');
    const base = concurrent ? Math.min(initial, 20) : initial;
    return Math.min(max, Math.round(base * factor ** Math.max(0, attempt - 1)));
  };
  return options;
}

/** Whether `error`, or one of the errors it carries, is Kafka's error `apiId` (say 'PRODUCER_FENCED'). */
export function findApiId(error: unknown, apiId: string): boolean {
  const seen = new Set<unknown>();
  const visit = (e: unknown): boolean => {
    if (!e || typeof e !== 'object' || seen.has(e)) return false;
    seen.add(e);
    const err = e as { apiId?: string; errors?: unknown[]; cause?: unknown };
    if (err.apiId === apiId) return true;
    return (Array.isArray(err.errors) && err.errors.some(visit)) || visit(err.cause);
  };
  return visit(error);
}
