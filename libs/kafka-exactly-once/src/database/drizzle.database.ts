import type { DatabasePort, PgPoolLike } from './database.port';
import { pgDatabase } from './pg-database';
import { assertPeersInstalled } from '../optional-peers';
import type { BoundPgClient } from './unit-connection';

/** What the library needs to build a handler's Drizzle database over the unit of work's connection. */
export interface DrizzleDatabaseOptions<Db> {
  /** The node-postgres Pool of the application's Drizzle database: the unit's connections come from it. */
  pool: PgPoolLike;
  /**
   * Builds the Drizzle database a handler gets as `ctx.db`, over the client the library gives (the unit's
   * connection): `(client) => drizzle(client, { schema })` (drizzle-orm/node-postgres). Called once per unit of work.
   */
  drizzle: (client: BoundPgClient) => Db;
}

const ENTITY_KIND = Symbol.for('drizzle:entityKind');

/** Drizzle's transaction object (`db.transaction(async (tx) => ...)`), by its entity kind. */
function isDrizzleTransaction(x: unknown): x is { execute(query: unknown): Promise<{ rows: any[] }> } {
  const kind = (x as { constructor?: Record<symbol, unknown> })?.constructor?.[ENTITY_KIND];
  return typeof kind === 'string' && kind.endsWith('Transaction') && typeof (x as { execute?: unknown }).execute === 'function';
}

/** A drizzle-orm `sql` of a statement with `$1`... placeholders and its values (each value one parameter). */
export function drizzleSql(text: string, params: unknown[] = []): unknown {
  // NOTE: drizzle-orm is the application's (an optional peer); its `sql` is copy-safe (entity kinds, not classes).
  const { sql } = require('drizzle-orm') as { sql: { raw(s: string): unknown; param(v: unknown): unknown; join(chunks: unknown[]): unknown } };
  const chunks: unknown[] = [];
  let last = 0;
  for (const match of text.matchAll(/\$(\d+)/g)) {
    chunks.push(sql.raw(text.slice(last, match.index)));
    chunks.push(sql.param(params[Number(match[1]) - 1]));
    last = match.index! + match[0].length;
  }
  chunks.push(sql.raw(text.slice(last)));
  return sql.join(chunks);
}

/**
 * The data layer of a Drizzle (node-postgres) application: each handler gets `ctx.db`, a Drizzle database on the
 * unit of work's transaction (its `db.transaction(...)` becomes a savepoint), and `Outbox.add` takes a Drizzle
 * transaction (`db.transaction(async (tx) => outbox.add(tx, ...))`) or a handler's `ctx.db`.
 *
 * @example
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * KafkaExactlyOnceModule.forRoot({ database: drizzleDatabase({ pool, drizzle: (client) => drizzle(client, { schema }) }), ... })
 */
export function drizzleDatabase<Db>(options: DrizzleDatabaseOptions<Db>): DatabasePort & { readonly lends?: Db } {
  // Every statement is built with drizzle-orm's `sql`, loaded from here: found at boot, or the boot refuses.
  assertPeersInstalled([{ peer: 'drizzle-orm', neededBy: 'the data layer drizzleDatabase(...)' }]);
  return pgDatabase(options.pool, {
    kind: 'drizzle',
    transactionName: 'a Drizzle transaction (db.transaction(async (tx) => ...)) or a handler\'s ctx.db',
    bind: (unit) => ({ db: options.drizzle(unit.client) }),
    transactionOf(tx) {
      if (!isDrizzleTransaction(tx)) return undefined;
      return { query: async (sql, params) => (await tx.execute(drizzleSql(sql, params))).rows, inTransaction: true };
    },
  });
}
