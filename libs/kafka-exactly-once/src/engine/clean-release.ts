import type { DatabaseSession } from '../database/database.port';
import { withDeadline } from './deadline';
import { endLent } from '../database/lent-database';
import { UnitNotCommittedError } from '../errors/unit-not-committed.error';

export interface PgClient {
  query(sql: string, ...rest: unknown[]): Promise<unknown>;
  /** node-postgres: the statement waiting for the server's answer, and those queued behind it (pg >= 8.16 names them with an underscore and warns on the old names). */
  _activeQuery?: unknown;
  _queryQueue?: unknown[];
  activeQuery?: unknown;
  queryQueue?: unknown[];
  /** 'I' idle, 'T' in a transaction, 'E' in a failed transaction (pg >= 8.12). */
  getTransactionStatus?(): string | null;
}

/**
 * The node-postgres client under a session (after connect), for what only it can tell: whether a statement on it
 * still waits (isBusy) and whether its transaction failed (`getTransactionStatus()` 'E'). A TypeORM query runner
 * keeps it as `databaseConnection`, the library's own sessions as `pgClient`.
 */
export function pgClientOf(runner: DatabaseSession): PgClient | undefined {
  const r = runner as unknown as { pgClient?: PgClient; databaseConnection?: PgClient };
  return 'pgClient' in r ? r.pgClient : r.databaseConnection;
}

/** Whether a statement on the connection still waits for its answer (without touching pg's deprecated getters). */
export function isBusy(client: PgClient): boolean {
  const active = '_activeQuery' in client ? client._activeQuery : client.activeQuery;
  const queued = '_queryQueue' in client ? client._queryQueue : client.queryQueue;
  return Boolean(active) || (queued?.length ?? 0) > 0;
}

/**
 * Gives a unit of work's connection back to the pool only outside a transaction: after any failure it is
 * rolled back first, and a connection that cannot be brought back to idle is destroyed instead of reused (a
 * pooled connection inside a failed transaction would make the next user's queries fail with "current
 * transaction is aborted").
 */
export async function releaseClean(runner: DatabaseSession, destroy = false): Promise<void> {
  const internals = runner as unknown as { databaseConnectionPromise?: Promise<unknown>; releaseCallback?: (err?: Error) => void };
  const client = pgClientOf(runner);
  if (!client && internals.databaseConnectionPromise) {
    // Still connecting (a server that does not answer): the connection is destroyed when it comes, not leaked.
    void internals.databaseConnectionPromise.then(
      () => {
        internals.releaseCallback?.(new Error('abandoned while connecting'));
        internals.releaseCallback = undefined;
      },
      () => undefined,
    );
  }
  // A connection a handler may still be using (it overran its deadline) is closed, never rolled back and reused:
  // the server rolls its transaction back, and a late statement of the handler finds no connection.
  let broken: Error | undefined = destroy ? new Error('closed: a handler may still be using it') : undefined;
  // A statement still waiting for its answer (given up on: the server stopped answering) would keep every later
  // user of the connection waiting behind it, even with the transaction status still idle.
  if (!broken && client && isBusy(client)) broken = new Error('closed: a statement on it never got its answer');
  try {
    if (!broken && client && client.getTransactionStatus?.() !== 'I') await withDeadline(client.query('ROLLBACK'), 5000, 'ROLLBACK');
    const status = client?.getTransactionStatus?.();
    if (!broken && client && status !== 'I' && status !== null && status !== undefined) broken = new Error(`connection left in transaction state ${status}`);
  } catch (err) {
    broken = err as Error;
  }
  // The library's own sessions (releaseConnection) and TypeORM's query runner (releasePostgresConnection) both
  // destroy the connection when given an error, instead of pooling it.
  // What the unit lent its handler refuses from now on (closed: a call of it may still be running).
  endLent(runner, broken !== undefined);
  const own = runner as unknown as { releaseConnection?: (err?: Error) => Promise<void>; releasePostgresConnection?: (err?: Error) => Promise<void> };
  const release = own.releaseConnection ?? own.releasePostgresConnection;
  if (release) await release.call(runner, broken).catch(() => undefined);
  else await runner.release().catch(() => undefined);
}

/**
 * One statement of the library's own outside a unit of work (a worker's bookkeeping, a health check), on a
 * connection of its own, given up after `timeoutMs`: a server that stops answering fails it instead of holding
 * the caller (and the connection, which is then closed, not reused) for good.
 */
export async function queryWithin<T = any>(dataSource: { createQueryRunner(): DatabaseSession }, sql: string, params: unknown[] = [], timeoutMs: number): Promise<T> {
  const runner = dataSource.createQueryRunner();
  try {
    return await withDeadline(runner.query(sql, params), timeoutMs, 'PostgreSQL');
  } finally {
    await releaseClean(runner);
  }
}

/**
 * Commits a unit's PostgreSQL transaction and checks that PostgreSQL did commit it: a transaction that failed
 * before the COMMIT is not committed (PostgreSQL ends it, and answers the COMMIT with the command tag ROLLBACK and
 * no error), so taking the answer for a commit would send the unit's outputs and offsets to Kafka with nothing of
 * it in PostgreSQL. Throws UnitNotCommittedError then (the transaction is over, nothing of it kept).
 */
export async function commitChecked(runner: DatabaseSession): Promise<void> {
  const client = pgClientOf(runner);
  if (!client) throw new UnitNotCommittedError('its connection is gone');
  // Every statement of the library's own was awaited, and what a handler was lent refuses statements once its call
  // is over: a failed transaction, or a statement still running, is the doing of something that reached past both.
  if (client.getTransactionStatus?.() === 'E') throw new UnitNotCommittedError('the transaction had failed before the COMMIT');
  if (isBusy(client)) throw new UnitNotCommittedError('a statement not of the library was still running on its connection at the COMMIT');
  let tag: string | undefined;
  const own = client.query;
  // The command tag of the answer to COMMIT, which the data layer's commit does not return.
  client.query = function (this: unknown, ...args: unknown[]) {
    const answer = own.apply(this, args as [string]) as unknown;
    if (args[0] === 'COMMIT' && typeof (answer as Promise<unknown>)?.then === 'function') {
      (answer as Promise<{ command?: string } | undefined>).then(
        (result) => (tag ??= result?.command ?? 'none'),
        () => undefined,
      );
    }
    return answer as Promise<unknown>;
  };
  try {
    await runner.commitTransaction();
  } finally {
    client.query = own;
  }
  if (tag !== 'COMMIT') throw new UnitNotCommittedError(tag === undefined ? 'the COMMIT was not seen on its connection' : `PostgreSQL answered the COMMIT with ${tag}`);
}
