import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { DatabasePort, DatabaseSession, LentDatabase, PgPoolLike } from './database.port';
import { type HandlerCall, runInCall } from './handler-calls';
import { type LentQueryRunner, lentQueryRunner } from './lent-query-runner';

/** The DataSource of a TypeORM EntityManager or QueryRunner (`dataSource` from TypeORM 1, `connection` before). */
export function typeormDataSourceOf(x: unknown): unknown {
  const m = x as { dataSource?: unknown; connection?: unknown } | undefined;
  return m?.dataSource ?? m?.connection;
}

/** The TypeORM adapter's port, and the DataSource it runs on (for what only TypeORM has: its migrations' runner). */
export interface TypeOrmDatabasePort extends DatabasePort {
  readonly kind: 'typeorm';
  readonly dataSource: DataSource;
}

/**
 * The data layer of a TypeORM PostgreSQL DataSource: handlers get `ctx.manager` (and `ctx.db`, the same
 * EntityManager) of the unit's transaction, and `Outbox.add` takes an EntityManager or QueryRunner of a
 * transaction of this DataSource. The module's default: without a `database` option it builds this over the
 * DataSource of `TypeOrmModule` (`dataSourceName`).
 *
 * @example
 * KafkaExactlyOnceModule.forRootAsync({
 *   inject: [DataSource],
 *   useFactory: (dataSource: DataSource) => ({ database: typeormDatabase(dataSource), ... }),
 * })
 */
export function typeormDatabase(dataSource: DataSource): TypeOrmDatabasePort {
  return {
    kind: 'typeorm',
    dataSource,
    transactionName: "the EntityManager of a TypeORM transaction (dataSource.transaction(async (manager) => ...)) or a QueryRunner with a transaction started",
    createQueryRunner: () => dataSource.createQueryRunner() as unknown as DatabaseSession,
    pgPool: () => (dataSource.driver as unknown as { master?: PgPoolLike }).master,
    lend(session: DatabaseSession): LentDatabase {
      const runner = session as unknown as QueryRunner;
      return {
        // Each call its own EntityManager, over a view of the unit's runner that refuses statements once the call is
        // over. Built when the call first reads ctx.manager (or ctx.db): a handler that writes nothing pays nothing.
        open() {
          const call: HandlerCall = { live: true };
          const depthAtOpen = (runner as unknown as { transactionDepth?: number }).transactionDepth;
          let lent: LentQueryRunner | undefined;
          let manager: EntityManager | undefined;
          const lentManager = (): EntityManager => (manager ??= dataSource.createEntityManager((lent = lentQueryRunner(runner, call, depthAtOpen)).runner));
          return {
            get db() {
              return lentManager();
            },
            get manager() {
              return lentManager();
            },
            run: (fn) => runInCall(call, fn),
            close: (failed: boolean) => {
              call.live = false;
              return lent ? lent.close(failed) : Promise.resolve();
            },
          };
        },
        end: () => undefined,
      };
    },
    sessionOf(transaction: unknown) {
      const runner =
        typeof (transaction as QueryRunner)?.startTransaction === 'function' ? (transaction as QueryRunner) : (transaction as EntityManager | undefined)?.queryRunner;
      if (!runner) {
        const isManager = typeof (transaction as EntityManager)?.getRepository === 'function';
        // An EntityManager outside any transaction (dataSource.manager): TypeORM's, but no transaction.
        return isManager ? { query: () => Promise.reject(new Error('not in a transaction')), inTransaction: false, sameDatabase: typeormDataSourceOf(transaction) === dataSource } : undefined;
      }
      return {
        query: (sql: string, params?: unknown[]) => runner.query(sql, params),
        inTransaction: runner.isTransactionActive,
        sameDatabase: typeormDataSourceOf(runner) === dataSource,
      };
    },
  };
}
