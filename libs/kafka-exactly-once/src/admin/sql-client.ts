import type { DatabaseSession, SessionSource } from '../database/database.port';
import { releaseClean } from '../engine/clean-release';

/** The little SQL the operator tools need, over the module's data layer (the admin module) or a pg Pool (the CLI). */
export interface SqlClient {
  query<T = any>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (sql: SqlClient) => Promise<T>): Promise<T>;
}

/** A client over one query runner (statements run on its connection, inside its transaction if any). */
export function runnerSql(runner: DatabaseSession): SqlClient {
  const sql: SqlClient = {
    query: async (text, params) => (await runner.query(text, params, true)).records,
    transaction: (work) => work(sql),
  };
  return sql;
}

export function dataSourceSql(dataSource: SessionSource): SqlClient {
  return {
    query: async (text, params) => {
      const runner = dataSource.createQueryRunner();
      try {
        return (await runner.query(text, params, true)).records;
      } finally {
        await runner.release();
      }
    },
    transaction: async (work) => {
      const runner = dataSource.createQueryRunner();
      try {
        await runner.connect();
        await runner.startTransaction();
        const result = await work(runnerSql(runner));
        await runner.commitTransaction();
        return result;
      } finally {
        await releaseClean(runner);
      }
    },
  };
}

interface PgPoolLike {
  query(text: string, params?: unknown[]): Promise<{ rows: any[] }>;
  connect(): Promise<{ query(text: string, params?: unknown[]): Promise<{ rows: any[] }>; release(err?: Error | boolean): void }>;
}

/** A client over a `pg` Pool. */
export function pgPoolSql(pool: PgPoolLike): SqlClient {
  return {
    query: async (text, params) => (await pool.query(text, params)).rows,
    transaction: async (work) => {
      const client = await pool.connect();
      let failed: Error | undefined;
      try {
        await client.query('BEGIN');
        const inner: SqlClient = { query: async (text, params) => (await client.query(text, params)).rows, transaction: (w) => w(inner) };
        const result = await work(inner);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        failed = err as Error;
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release(failed);
      }
    },
  };
}
