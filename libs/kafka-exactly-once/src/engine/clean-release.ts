import type { DatabaseSession } from '../database/database.port';
import { withDeadline } from './deadline';
import { endLent } from '../database/lent-database';
import { UnitNotCommittedError } from '../errors/unit-not-committed.error';
import { CALL_IS_OVER, currentCall } from '../database/handler-calls';
import { UnitConnectionError } from '../database/unit-connection';

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
 * Replaces a node-postgres client's `query` with `wrap(own)` until the returned function is called, which puts back
 * what was there: the client's own property, or none (the prototype's method, and whatever patches it later).
 */
export function wrapQuery(client: PgClient, wrap: (own: PgClient['query']) => PgClient['query']): () => void {
  const hadOwn = Object.prototype.hasOwnProperty.call(client, 'query');
  const own = client.query;
  client.query = wrap(own);
  return () => {
    if (hadOwn) client.query = own;
    else delete (client as { query?: unknown }).query;
  };
}

/**
 * For the time of a unit of work: refuses, on its node-postgres connection itself, every statement that comes from a
 * handler call that is over (see `HandlerCall`), however it got there: through what the call was lent, through the
 * raw connection (`ctx.manager.queryRunner.databaseConnection`), or from a TypeORM subscriber the call set off.
 * Returns what takes the guard off (when the connection goes back to the pool).
 */
export function refuseLateStatements(runner: DatabaseSession): (() => void) | undefined {
  const client = pgClientOf(runner);
  if (!client) return undefined;
  return wrapQuery(client, (own) =>
    function (this: unknown, ...args: unknown[]) {
      if (currentCall()?.live === false) {
        const refused = new UnitConnectionError(CALL_IS_OVER);
        // A callback-style call gets the refusal as its callback's error, as node-postgres would give it.
        const callback = args.find((a) => typeof a === 'function') as ((err: Error) => void) | undefined;
        if (callback) {
          queueMicrotask(() => callback(refused));
          return undefined as never;
        }
        return Promise.reject(refused);
      }
      return own.apply(this, args as [string]);
    },
  );
}

/**
 * Commits a unit's PostgreSQL transaction and checks that PostgreSQL did commit it: a transaction that failed
 * before the COMMIT is not committed (PostgreSQL ends it, and answers the COMMIT with the command tag ROLLBACK and
 * no error), and one that had already ended (a COMMIT or ROLLBACK that reached PostgreSQL past every guard) leaves
 * the library's last statements in autocommit and the COMMIT with nothing to commit (a warning, and the tag
 * COMMIT). Taking either for a commit would send the unit's outputs and offsets to Kafka without its work in
 * PostgreSQL. Throws UnitNotCommittedError then (nothing of the unit kept).
 */
export async function commitChecked(runner: DatabaseSession, logger?: { warn(message: string): void }): Promise<void> {
  const client = pgClientOf(runner);
  if (!client) throw new UnitNotCommittedError('its connection is gone');
  // Every statement of the library's own was awaited, and statements of handler calls that are over are refused:
  // a transaction not open and sound here, or a statement still running, is the doing of something that reached
  // past both.
  const status = client.getTransactionStatus?.();
  if (status === 'E') throw new UnitNotCommittedError('the transaction had failed before the COMMIT');
  if (status === 'I') throw new UnitNotCommittedError('the transaction had ended before the COMMIT (a COMMIT or ROLLBACK sent on its connection)');
  if (isBusy(client)) throw new UnitNotCommittedError('a statement not of the library was still running on its connection at the COMMIT');
  // TypeORM counts its nested transactions on the runner; one a handler left open (not awaited) would make the
  // runner's commit release a savepoint instead of committing.
  const depth = (runner as unknown as { transactionDepth?: unknown }).transactionDepth;
  if (typeof depth === 'number' && depth > 1) throw new UnitNotCommittedError(`a transaction a handler opened (manager.transaction, not awaited) was still open at the COMMIT (${depth - 1} level${depth === 2 ? '' : 's'})`);
  let tag: string | undefined;
  // The command tag of the answer to COMMIT, which the data layer's commit does not return.
  const restore = wrapQuery(client, (own) =>
    function (this: unknown, ...args: unknown[]) {
      const answer = own.apply(this, args as [string]) as unknown;
      if (args[0] === 'COMMIT' && typeof (answer as Promise<unknown>)?.then === 'function') {
        (answer as Promise<{ command?: string } | undefined>).then(
          (result) => (tag ??= result?.command ?? 'none'),
          () => undefined,
        );
      }
      return answer as Promise<unknown>;
    },
  );
  try {
    await runner.commitTransaction();
  } catch (err) {
    // PostgreSQL committed, and something after it failed (a TypeORM subscriber of afterTransactionCommit): the
    // unit is committed in PostgreSQL whatever the data layer says, and goes on to its Kafka commit.
    if (tag !== 'COMMIT') throw err;
    logger?.warn(`PostgreSQL committed the unit of work, and the data layer's commit then failed (${(err as Error)?.message ?? err}): taken as committed`);
  } finally {
    restore();
  }
  if (tag !== 'COMMIT') throw new UnitNotCommittedError(tag === undefined ? 'the COMMIT was not seen on its connection' : `PostgreSQL answered the COMMIT with ${tag}`);
}
