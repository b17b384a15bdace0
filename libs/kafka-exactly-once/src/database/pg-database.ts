import type { DatabasePort, DatabaseSession, LentDatabase, PgPoolLike } from './database.port';
import { PgSession } from './pg-session';
import { UnitConnection } from './unit-connection';

/** How an adapter binds its data layer to a unit's connection, and knows its own transactions. */
export interface DataLayerBinding<Db> {
  readonly kind: string;
  /** What `Outbox.add` names when given something it does not know. */
  readonly transactionName: string;
  /** The data layer over the unit's connection (built per unit, or taken from the adapter's own reuse). */
  bind(unit: UnitConnection): { db: Db; end?(closed: boolean): void };
  /** A statement runner for a transaction object of this data layer, else undefined. */
  transactionOf(transaction: unknown): { query(sql: string, params?: unknown[]): Promise<any[]>; inTransaction: boolean } | undefined;
}

/** The unit connection of what a handler was lent (`ctx.db`), for `Outbox.add` given it. */
const lentDbs = new WeakMap<object, UnitConnection>();

/** A data layer over node-postgres's pool: the sessions are the pool's connections, the ORM is bound per unit. */
export function pgDatabase<Db>(pool: PgPoolLike, binding: DataLayerBinding<Db>): DatabasePort {
  return {
    kind: binding.kind,
    transactionName: binding.transactionName,
    createQueryRunner: () => new PgSession(pool),
    pgPool: () => pool,
    lend(session: DatabaseSession): LentDatabase {
      const unit = new UnitConnection(session as PgSession);
      const bound = binding.bind(unit);
      if (bound.db && typeof bound.db === 'object') lentDbs.set(bound.db as object, unit);
      return {
        open() {
          const call = unit.open();
          return {
            db: bound.db,
            run: <T>(fn: () => Promise<T>) => UnitConnection.run(call, fn),
            close: (failed: boolean) => unit.close(call, failed),
          };
        },
        transactions: unit,
        end: (closed: boolean) => {
          unit.end(closed ? 'its connection was closed' : 'its transaction ended');
          bound.end?.(closed);
        },
      };
    },
    sessionOf(transaction: unknown) {
      const unit = transaction && typeof transaction === 'object' ? lentDbs.get(transaction) : undefined;
      if (unit) return { query: (sql: string, params?: unknown[]) => unit.query(sql, params).then((r: { rows: any[] }) => r.rows), inTransaction: true, sameDatabase: true };
      const own = binding.transactionOf(transaction);
      return own ? { ...own, sameDatabase: true } : undefined;
    },
  };
}
