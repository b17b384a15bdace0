import type { DatabasePort } from '../database/database.port';

/** node-postgres pool options the library looks at (pg-pool reads them again for every new connection). */
interface PoolOptions {
  connectionTimeoutMillis?: number;
  keepAlive?: boolean;
  keepAliveInitialDelayMillis?: number;
}

/**
 * Makes a dead PostgreSQL show up as an error on the data layer's node-postgres pool, where the application left it open: a
 * new connection gives up after `connectTimeoutMs` (node-postgres waits without end by default, and every
 * connection started while the server did not answer would keep its place in the pool for good, until no unit of
 * work gets one), and TCP keepalive probes idle connections after 10 s, so that one cut by the network ends.
 * Settings the application gave are kept. Returns what was set, for the log.
 */
export function hardenPool(database: DatabasePort, connectTimeoutMs: number): string[] {
  const options = database.pgPool()?.options as PoolOptions | undefined;
  if (!options) return [];
  const set: string[] = [];
  if (!options.connectionTimeoutMillis) {
    options.connectionTimeoutMillis = connectTimeoutMs;
    set.push(`connectionTimeoutMillis ${connectTimeoutMs}`);
  }
  if (options.keepAlive === undefined) {
    options.keepAlive = true;
    options.keepAliveInitialDelayMillis ??= 10000;
    set.push(`keepAlive (after ${options.keepAliveInitialDelayMillis} ms)`);
  }
  return set;
}
