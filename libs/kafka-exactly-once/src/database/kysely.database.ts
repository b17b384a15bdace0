import { randomUUID } from 'node:crypto';
import type { DatabasePort, PgPoolLike } from './database.port';
import { pgDatabase } from './pg-database';
import { boundPool } from './unit-connection';

/** The pool Kysely's PostgresDialect is given for a unit of work: its one connection is the unit's. */
export type KyselyUnitPool = ReturnType<typeof boundPool>;

/** What the library needs to build a handler's Kysely instance over the unit of work's connection. */
export interface KyselyDatabaseOptions<Db> {
  /** The node-postgres Pool of the application's Kysely instance: the unit's connections come from it. */
  pool: PgPoolLike;
  /**
   * Builds the Kysely instance a handler gets as `ctx.db`, over the pool the library gives (its one connection
   * is the unit's): `(pool) => new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })`. Called once per unit.
   */
  kysely: (pool: KyselyUnitPool) => Db;
}

interface KyselyTransactionLike {
  readonly isTransaction: boolean;
  executeQuery(query: unknown): Promise<{ rows: any[] }>;
}

/** Kysely's compiled form of a raw statement (CompiledQuery.raw), without importing Kysely. */
function compiledRaw(sql: string, parameters: unknown[] = []) {
  return Object.freeze({
    sql,
    parameters: Object.freeze([...parameters]),
    query: Object.freeze({ kind: 'RawNode', sqlFragments: Object.freeze([sql]), parameters: Object.freeze([]) }),
    queryId: Object.freeze({ queryId: randomUUID() }),
  });
}

/**
 * The data layer of a Kysely (PostgresDialect) application: each handler gets `ctx.db`, a Kysely instance on the
 * unit of work's transaction (its `db.transaction().execute(...)` becomes a savepoint), and `Outbox.add` takes a
 * Kysely transaction (`db.transaction().execute((trx) => outbox.add(trx, ...))`) or a handler's `ctx.db`.
 *
 * @example
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * KafkaExactlyOnceModule.forRoot({ database: kyselyDatabase({ pool, kysely: (pool) => new Kysely<DB>({ dialect: new PostgresDialect({ pool }) }) }), ... })
 */
export function kyselyDatabase<Db>(options: KyselyDatabaseOptions<Db>): DatabasePort & { readonly lends?: Db } {
  return pgDatabase(options.pool, {
    kind: 'kysely',
    transactionName: 'a Kysely transaction (db.transaction().execute(async (trx) => ...)) or a handler\'s ctx.db',
    bind: (unit) => ({ db: options.kysely(boundPool(unit)) }),
    transactionOf(trx) {
      const t = trx as KyselyTransactionLike;
      if (!t || t.isTransaction !== true || typeof t.executeQuery !== 'function') return undefined;
      return { query: async (sql, params) => (await t.executeQuery(compiledRaw(sql, params))).rows, inTransaction: true };
    },
  });
}
