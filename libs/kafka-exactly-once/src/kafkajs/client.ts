import { ConfigResourceTypes, type Admin, type Consumer, type ConsumerConfig, type Kafka, type KafkaConfig, type Producer, type ProducerConfig, type AdminConfig, type Logger } from 'kafkajs';
import { type AdminOptions, driverPartsOf } from '../client/driver-parts';
import { correctCluster } from './cluster';
import type { ClusterAdmin } from './index';
import { CorrectedConsumerGroup } from './consumer-group';

/** Options of a cluster the library's client builds for the requests it sends itself. */
export interface ClusterOptions {
  allowAutoTopicCreation?: boolean;
  maxInFlightRequests?: number;
  metadataMaxAge?: number;
  isolationLevel?: number;
}

/**
 * A Kafka client of the library: KafkaJS 2.2.4's own client class (vendor/client.cjs), whose consumers run
 * CorrectedConsumerGroup (vendor/consumer.cjs) and whose every cluster is corrected (cluster.ts). Its producers
 * and admins are KafkaJS's, on corrected clusters.
 */
export interface KafkaClient {
  producer(config?: ProducerConfig): Producer;
  consumer(config: ConsumerConfig): Consumer;
  admin(config?: AdminConfig): Admin;
  logger(): Logger;
  /** A corrected cluster of this client, for the requests the library sends itself (producer/kafkajs-internals.ts). */
  createCluster(options?: ClusterOptions): object;
}

/** A module of vendor/ (CommonJS files beside this one, which TypeScript does not emit: the build copies them). */
function vendored<T>(file: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(`./vendor/${file}`) as T;
  } catch (err) {
    if ((err as { code?: string }).code !== 'MODULE_NOT_FOUND' || !(err as Error).message.includes(file)) throw err;
    throw new Error(`kafka-exactly-once: ${file}, one of its KafkaJS modules, is not in the vendor folder beside the library's kafkajs/client.js: a build that does not copy src/kafkajs/vendor (in this repository, build with \`npm run build\`, which runs scripts/kafkajs-vendor.js)`);
  }
}

const createConsumer = vendored<(group: unknown) => unknown>('consumer.cjs')(CorrectedConsumerGroup);
/** The class of the library's Kafka clients. */
export const KafkaClientClass = vendored<(parts: object) => new (config: KafkaConfig) => KafkaClient>('client.cjs')({ createConsumer, correctCluster });

/** A Kafka client of the library (see KafkaClient), on `config` (KafkaJS's client options). */
export function createKafkaClient(config: KafkaConfig): KafkaClient {
  return new KafkaClientClass(config);
}

/** Whether `kafka` is a client the library built (createKafkaClient), rather than one of KafkaJS's own. */
export const isLibraryClient = (kafka: unknown): kafka is KafkaClient => kafka instanceof KafkaClientClass;

/**
 * An admin of `kafka` (the module's client, or a probe's) on its driver: the driver's parts' when set
 * (client/driver-parts.ts), KafkaJS's otherwise. Either answers in KafkaJS's shapes (ClusterAdmin).
 */
export function adminOf(kafka: KafkaClient, options?: AdminOptions): ClusterAdmin {
  return driverPartsOf(kafka)?.admin(options) ?? kafka.admin(options);
}

/**
 * Numeric settings of the cluster's first broker (DescribeConfigs), each NaN when the broker does not say it;
 * undefined when the cluster describes no broker.
 */
export async function brokerSettings<Name extends string>(admin: ClusterAdmin, names: readonly Name[]): Promise<Record<Name, number> | undefined> {
  const { brokers } = await admin.describeCluster();
  if (brokers.length === 0) return undefined;
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.BROKER, name: String(brokers[0].nodeId), configNames: [...names] }],
  });
  const entries = resources[0]?.configEntries ?? [];
  return Object.fromEntries(names.map((name) => [name, Number(entries.find((e) => e.configName === name)?.configValue)])) as Record<Name, number>;
}
