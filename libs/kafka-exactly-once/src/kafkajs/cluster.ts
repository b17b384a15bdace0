import { filterAbortedTransactions, filtersAbortedTransactions, type FetchingBroker } from './aborted-transactions';
import { isQuiet, quietRequestQueue, type RequestQueueInternals } from './request-queue';

const CORRECTED = Symbol('kafka-exactly-once:corrected-cluster');

/** A connection pool as KafkaJS's ConnectionPoolBuilder builds it (src/network/connectionPool.js). */
interface ConnectionPoolInternals {
  pool: Array<{ requestQueue: RequestQueueInternals }>;
}

/** What the corrections read and change of one KafkaJS Cluster (src/cluster/index.js). */
export interface ClusterInternals {
  connectionPoolBuilder: { build(destination?: object): Promise<ConnectionPoolInternals> };
  findBroker(args: { nodeId: number }): Promise<FetchingBroker>;
  [CORRECTED]?: true;
}

/**
 * The corrections of a cluster the library's client builds (client.cjs, for each of its producers, consumers and
 * admins), on that cluster's own objects: every connection it opens gets the quiet request queue
 * (request-queue.ts), and every broker it hands out filters aborted transactions from its fetches
 * (aborted-transactions.ts). KafkaJS's classes are not changed. Returns the cluster.
 */
export function correctCluster<T extends object>(cluster: T): T {
  const internals = cluster as T & ClusterInternals;
  if (internals[CORRECTED]) return cluster;
  const builder = internals.connectionPoolBuilder;
  const build = builder.build;
  // KafkaJS's BrokerPool asks this builder for every connection pool of the cluster (seed broker, brokers, reconnects).
  builder.build = async (destination?: object) => {
    const pool = await build(destination);
    for (const connection of pool.pool) quietRequestQueue(connection.requestQueue);
    return pool;
  };
  const findBroker = internals.findBroker;
  // KafkaJS's consumer group fetches through the broker this hands it (ConsumerGroup#fetch).
  internals.findBroker = async function (this: ClusterInternals, args: { nodeId: number }) {
    const broker = await findBroker.call(this, args);
    filterAbortedTransactions(broker);
    return broker;
  };
  internals[CORRECTED] = true;
  return cluster;
}

/**
 * Whether `cluster` is corrected, shown on its own objects: a connection pool it builds (connections are opened
 * only when used, so this sends nothing) has quiet request queues, and its brokers are filtered.
 */
export async function clusterCorrections(cluster: object): Promise<{ requestQueue: boolean; abortedTransactions: boolean }> {
  const internals = cluster as ClusterInternals;
  let requestQueue = false;
  try {
    const pool = await internals.connectionPoolBuilder.build({ host: '127.0.0.1', port: 9 });
    requestQueue = pool.pool.length > 0 && pool.pool.every((connection) => isQuiet(connection.requestQueue));
  } catch {
    // not a cluster of KafkaJS 2.2.4's shape: not corrected
  }
  // The broker filter is set as each broker is handed out: shown on the cluster's own findBroker, on a stand-in.
  let abortedTransactions = false;
  if (internals[CORRECTED] === true) {
    const standIn = { fetch: async () => ({ responses: [] }) };
    const pool = (internals as unknown as { brokerPool?: { findBroker(args: { nodeId: number }): Promise<unknown> } }).brokerPool;
    if (pool && typeof pool.findBroker === 'function') {
      pool.findBroker = async () => standIn; // on the pool object only: KafkaJS's BrokerPool class keeps its own
      try {
        abortedTransactions = filtersAbortedTransactions(await internals.findBroker({ nodeId: -1 }));
      } catch {
        abortedTransactions = false;
      } finally {
        delete (pool as { findBroker?: unknown }).findBroker;
      }
    }
  }
  return { requestQueue, abortedTransactions };
}
