import { dirname } from 'path';
import { KafkaJsFixesNotInForceError, type KafkaJsCopy, type KafkaJsFixName } from '../errors/kafkajs-fixes-not-in-force.error';
import { isLibraryClient, type KafkaClient } from './client';
import { clusterCorrections } from './cluster';
import { CONSUMER_GROUP_OVERRIDES, CorrectedConsumerGroup } from './consumer-group';
import { KAFKAJS_VERSION } from './producer/kafkajs-internals';

/** A correction of KafkaJS the library relies on, and how to see that it is in force on one of its clients. */
export interface KafkaJsFix extends KafkaJsFixName {
  /** Whether it is in force on `client` (a client the library built). */
  inForce(client: KafkaClient): Promise<boolean>;
}

/** Where vendor/consumer.cjs leaves the ConsumerGroup class on each consumer it returns. */
const CONSUMER_GROUP_CLASS = Symbol.for('kafka-exactly-once:consumer-group-class');

/* eslint-disable @typescript-eslint/no-require-imports */
const installedConsumerGroup = () => require('kafkajs/src/consumer/consumerGroup') as { prototype: Record<string, unknown> };
/* eslint-enable @typescript-eslint/no-require-imports */

/** What one cluster of `client` shows of the cluster's two corrections: built and probed once per client. */
const probed = new WeakMap<KafkaClient, ReturnType<typeof clusterCorrections>>();
function clusterCorrectionsOf(client: KafkaClient): ReturnType<typeof clusterCorrections> {
  let found = probed.get(client);
  if (!found) probed.set(client, (found = clusterCorrections(client.createCluster())));
  return found;
}

/** The corrections of KafkaJS 2.2.4 the library relies on (src/kafkajs/README.md), each with its check. */
export const KAFKAJS_FIXES: readonly KafkaJsFix[] = [
  {
    name: 'partition-workers',
    corrects: "a rebalance waits for the partitions' units of work, and a resumed partition is fetched at once",
    // A consumer of the client (built, not connected: nothing is sent) runs its group on CorrectedConsumerGroup, a
    // subclass of the installed KafkaJS's ConsumerGroup, which has each method it overrides.
    inForce: async (client) => {
      const consumer = client.consumer({ groupId: 'kafka-exactly-once-boot-check' }) as unknown as Record<symbol, unknown>;
      const base = installedConsumerGroup().prototype;
      return (
        consumer[CONSUMER_GROUP_CLASS] === CorrectedConsumerGroup &&
        Object.getPrototypeOf(CorrectedConsumerGroup.prototype) === base &&
        CONSUMER_GROUP_OVERRIDES.every((method) => typeof base[method] === 'function' && Object.prototype.hasOwnProperty.call(CorrectedConsumerGroup.prototype, method))
      );
    },
  },
  {
    name: 'aborted-transactions',
    corrects: 'read-committed fetches leave out the records of aborted transactions',
    inForce: async (client) => (await clusterCorrectionsOf(client)).abortedTransactions,
  },
  {
    name: 'request-queue',
    corrects: 'an idle connection is not polled every millisecond',
    inForce: async (client) => (await clusterCorrectionsOf(client)).requestQueue,
  },
];

/** The kafkajs package the library resolves, whose modules its clients are built on. */
export function installedKafkaJs(): KafkaJsCopy {
  try {
    /* eslint-disable @typescript-eslint/no-require-imports */
    return { path: dirname(require.resolve('kafkajs/package.json')), version: (require('kafkajs/package.json') as { version?: string }).version };
    /* eslint-enable @typescript-eslint/no-require-imports */
  } catch {
    return {}; // a bundle without the package's files
  }
}

/**
 * What keeps `kafka` from running the library: it is not a client the library built, the installed kafkajs is
 * not `expectedVersion`, or a correction is not in force on it. Undefined when it may run.
 */
export async function kafkaJsFixesNotInForce(kafka: unknown, installed: KafkaJsCopy = installedKafkaJs(), expectedVersion = KAFKAJS_VERSION, fixes: readonly KafkaJsFix[] = KAFKAJS_FIXES): Promise<KafkaJsFixesNotInForceError | undefined> {
  if (installed.version !== undefined && installed.version !== expectedVersion) return new KafkaJsFixesNotInForceError(installed, [], expectedVersion);
  if (!isLibraryClient(kafka)) return new KafkaJsFixesNotInForceError(installed, fixes, expectedVersion, true);
  const missing: KafkaJsFix[] = [];
  for (const fix of fixes) {
    const inForce = await fix.inForce(kafka).catch(() => false);
    if (!inForce) missing.push(fix);
  }
  return missing.length > 0 ? new KafkaJsFixesNotInForceError(installed, missing, expectedVersion) : undefined;
}

/** Clients already checked, so that a check repeated for every boot of a process costs nothing. */
const passed = new WeakSet<object>();

/**
 * Throws KafkaJsFixesNotInForceError unless every correction of KafkaJS the library relies on is in force on
 * `kafka`, a client it built, and the installed kafkajs is 2.2.4. Sends nothing to Kafka.
 */
export async function assertKafkaJsFixesInForce(kafka: unknown): Promise<void> {
  if (typeof kafka === 'object' && kafka !== null && passed.has(kafka)) return;
  const refused = await kafkaJsFixesNotInForce(kafka);
  if (refused) throw refused;
  passed.add(kafka as object);
}
