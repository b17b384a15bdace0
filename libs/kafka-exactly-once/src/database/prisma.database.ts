import { dirname } from 'node:path';
import type { PrismaPg as PrismaPgAdapter } from '@prisma/adapter-pg';
import type { DatabasePort, PgPoolLike } from './database.port';
import { pgDatabase } from './pg-database';
import { assertPeersInstalled } from '../optional-peers';
import { UnitConnection, UnitConnectionError } from './unit-connection';

/** What the library gives the application's PrismaClient factory. */
export interface PrismaClientSettings {
  /**
   * A `@prisma/adapter-pg` driver adapter whose every statement runs on the unit of work's connection. Typed as
   * `PrismaPg` so that `(settings) => new PrismaClient(settings)` compiles against the generated client.
   */
  adapter: PrismaPgAdapter;
  /** Interactive transactions inside a unit (savepoints) may run as long as the handler's call (consumer.handlerTimeoutMs). */
  transactionOptions: { timeout: number; maxWait: number };
}

/** What the library needs to give handlers a PrismaClient bound to the unit of work's transaction. */
export interface PrismaDatabaseOptions<Client> {
  /**
   * The node-postgres Pool the application's own PrismaClient runs on (`new PrismaPg(pool)`): the unit's
   * connections come from it.
   */
  pool: PgPoolLike;
  /**
   * Builds a PrismaClient with the settings the library gives: `(settings) => new PrismaClient(settings)`. The
   * library keeps the clients it builds and reuses them (building one costs about 25 ms), one per unit of work
   * running at a time.
   */
  client: (settings: PrismaClientSettings) => Client;
  /** Handler call deadline the interactive transactions get as their timeout (set by the module). */
  transactionTimeoutMs?: number;
}

interface PgModule {
  Pool: new (config?: object) => object & { connect(): Promise<unknown>; query(...args: unknown[]): Promise<unknown>; end(): Promise<void> };
}

/** node-postgres as @prisma/adapter-pg resolves it: its PrismaPg takes a pool only if it is an instance of that Pool. */
function adapterPg(): { PrismaPg: new (pool: unknown) => PrismaPgAdapter; pg: PgModule } {
  const adapterPath = require.resolve('@prisma/adapter-pg');
  const { PrismaPg } = require(adapterPath) as { PrismaPg: new (pool: unknown) => PrismaPgAdapter };
  const pg = require(require.resolve('pg', { paths: [dirname(adapterPath)] })) as PgModule;
  return { PrismaPg, pg };
}

/** A client the library built, and the unit using it now. */
interface Slot<Client> {
  client: Client;
  unit?: UnitConnection;
}

/**
 * The data layer of a Prisma 7 application on PostgreSQL through `@prisma/adapter-pg`: each handler gets `ctx.db`,
 * a PrismaClient whose statements run in the unit of work's transaction (its `$transaction(...)` becomes a
 * savepoint), and `Outbox.add` takes an interactive transaction's client (`prisma.$transaction(async (tx) =>
 * outbox.add(tx, ...))`) or a handler's `ctx.db`.
 *
 * @example
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * KafkaExactlyOnceModule.forRoot({ database: prismaDatabase({ pool, client: (settings) => new PrismaClient(settings) }), ... })
 */
export function prismaDatabase<Client>(
  options: PrismaDatabaseOptions<Client>,
): DatabasePort & { readonly lends?: Client; configure(settings: { handlerTimeoutMs: number }): void; warmUp(): Promise<void> } {
  // The client the library builds runs on @prisma/adapter-pg, loaded from here: found at boot, or the boot refuses.
  assertPeersInstalled([{ peer: '@prisma/adapter-pg', neededBy: 'the data layer prismaDatabase(...)' }]);
  let timeoutMs = options.transactionTimeoutMs ?? 30000;
  let loaded: ReturnType<typeof adapterPg> | undefined;
  const free: Array<Slot<Client>> = [];
  /** A PrismaClient over a pool whose one connection is the slot's unit's, for statements of a live call of that unit. */
  function build(): Slot<Client> {
    loaded ??= adapterPg();
    const slot = {} as Slot<Client>;
    const unitOf = (): UnitConnection => {
      // The unit of the handler call this statement comes from (clients are reused: a late statement of an earlier
      // unit's call must not reach the unit that has the client now).
      if (!slot.unit || UnitConnection.current() !== slot.unit) {
        throw new UnitConnectionError("this PrismaClient was lent to a handler's call that is over: write through ctx.db inside the handler's call, and await every statement");
      }
      return slot.unit;
    };
    class UnitPool extends loaded.pg.Pool {
      override async connect() {
        return unitOf().client;
      }
      override query(...args: unknown[]): Promise<any> {
        return Promise.resolve().then(() => unitOf().query(args[0] as string, args[1] as unknown[]));
      }
      override async end() {}
    }
    slot.client = options.client({ adapter: new loaded.PrismaPg(new UnitPool({ max: 1 })), transactionOptions: { timeout: timeoutMs, maxWait: timeoutMs } });
    return slot;
  }

  /**
   * An interactive transaction's client: it has `$queryRawUnsafe` and, unlike the PrismaClient itself, none of
   * `$connect` and `$disconnect` (Prisma leaves them out of transaction clients).
   */
  function isPrismaTransaction(x: unknown): x is { $queryRawUnsafe(sql: string, ...values: unknown[]): Promise<any[]> } {
    const c = x as Record<string, unknown> | undefined;
    return typeof c?.$queryRawUnsafe === 'function' && typeof c.$connect !== 'function' && typeof c.$disconnect !== 'function';
  }

  const port = pgDatabase(options.pool, {
    kind: 'prisma',
    transactionName: "an interactive transaction's client (prisma.$transaction(async (tx) => ...)) or a handler's ctx.db",
    bind(unit) {
      const slot = free.pop() ?? build();
      slot.unit = unit;
      return {
        db: slot.client,
        end(closed: boolean) {
          slot.unit = undefined;
          // A client whose unit's connection was closed (a handler overran) may still have a call in flight: never reused.
          if (!closed) free.push(slot);
        },
      };
    },
    transactionOf(tx) {
      if (!isPrismaTransaction(tx)) return undefined;
      return { query: (sql, params = []) => tx.$queryRawUnsafe(sql, ...params), inTransaction: true };
    },
  });
  return Object.assign(port, {
    configure(settings: { handlerTimeoutMs: number }) {
      timeoutMs = settings.handlerTimeoutMs;
    },
    /**
     * Builds the first client and runs a statement through it (`SELECT 1`, on a connection of the pool, outside
     * any transaction), then keeps it for the first unit: Prisma's first statement in a process costs about
     * 250 ms of CPU (its query interpreter loading), which fell on the first unit of work.
     */
    async warmUp() {
      const session = port.createQueryRunner();
      try {
        const lent = port.lend(session);
        const call = lent.open();
        try {
          // Awaited inside the call: a PrismaPromise runs when awaited, in the async context of whoever awaits it.
          await call.run(async () => {
            await (call.db as { $queryRawUnsafe(sql: string): PromiseLike<unknown> }).$queryRawUnsafe('SELECT 1');
          });
        } finally {
          await call.close(false);
          lent.end(false);
        }
      } finally {
        await session.release();
      }
    },
  });
}
