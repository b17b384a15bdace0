import { prismaDatabase, type PrismaClientSettings } from './prisma.database';
import { UnitConnectionError } from './unit-connection';

// The driver adapter as a holder of the pool the library gives it (the unit's connection): no Prisma needed here.
jest.mock('@prisma/adapter-pg', () => ({
  PrismaPg: class {
    constructor(readonly pool: { query(sql: string): Promise<{ rows: unknown[] }> }) {}
  },
}));

/** A node-postgres pool whose connections record what they are sent, and whether they went back. */
function recordingPool(fail?: Error) {
  const connections: Array<{ sent: string[]; released: boolean }> = [];
  const pool = {
    async connect() {
      const connection = { sent: [] as string[], released: false };
      connections.push(connection);
      return {
        query: async (text: string) => {
          connection.sent.push(text);
          if (fail) throw fail;
          return { command: text.split(' ')[0].toUpperCase(), rows: [], rowCount: 0 };
        },
        release: () => {
          connection.released = true;
        },
      };
    },
    query: async () => ({ rows: [] }),
  };
  return { pool, connections };
}

/**
 * A stand-in for a PrismaClient: its statements go to the pool of its driver adapter, as Prisma's do, and, as
 * Prisma's PrismaPromise, only once awaited (`then`), in the async context of whoever awaits them.
 */
function fakeClient(settings: PrismaClientSettings) {
  const adapter = settings.adapter as unknown as { pool: { query(sql: string): Promise<unknown> } };
  return {
    $queryRawUnsafe: (sql: string): PromiseLike<unknown> => ({
      then: (resolve, reject) => adapter.pool.query(sql).then(resolve, reject),
    }),
  };
}

describe('prismaDatabase', () => {
  it("warms up before the first unit: builds a client, runs its first statement on a connection it gives back, and lends that client to the first unit", async () => {
    const { pool, connections } = recordingPool();
    const client = jest.fn(fakeClient);
    const database = prismaDatabase({ pool, client });
    database.configure({ handlerTimeoutMs: 12000 });

    await database.warmUp();
    expect(client).toHaveBeenCalledTimes(1);
    expect(client.mock.calls[0][0].transactionOptions).toEqual({ timeout: 12000, maxWait: 12000 });
    expect(connections).toEqual([{ sent: ['SELECT 1'], released: true }]);

    // The first unit of work gets the client built, not a new one, bound to its own connection.
    const session = database.createQueryRunner();
    await session.startTransaction();
    const lent = database.lend(session);
    const call = lent.open();
    expect(call.db).toBe(client.mock.results[0].value);
    const late = new Promise<unknown>((resolve) => {
      void call.run(async () => {
        await (call.db as ReturnType<typeof fakeClient>).$queryRawUnsafe('SELECT 2');
        // Sent from a timer of the call, after the call is over.
        setTimeout(() => resolve(Promise.resolve((call.db as ReturnType<typeof fakeClient>).$queryRawUnsafe('SELECT late'))), 20);
      });
    });
    await new Promise((r) => setTimeout(r, 5));
    await call.close(false);
    await expect(late).rejects.toThrow(UnitConnectionError);
    expect(client).toHaveBeenCalledTimes(1);
    expect(connections[1].sent).toEqual(['START TRANSACTION', 'SELECT 2']);
    await session.commitTransaction();
    lent.end(false);
    await session.release();
    // Outside a unit's call, the client refuses.
    await expect((call.db as ReturnType<typeof fakeClient>).$queryRawUnsafe('SELECT 3')).rejects.toThrow(UnitConnectionError);
  });

  it('gives the connection back when the warm-up statement fails, and lends the client it built to the first unit', async () => {
    const { pool, connections } = recordingPool(new Error('the database refused'));
    const client = jest.fn(fakeClient);
    const database = prismaDatabase({ pool, client });
    await expect(database.warmUp()).rejects.toThrow('the database refused');
    expect(connections).toEqual([{ sent: ['SELECT 1'], released: true }]);
    const lent = database.lend(database.createQueryRunner());
    expect(lent.open().db).toBe(client.mock.results[0].value);
    expect(client).toHaveBeenCalledTimes(1);
  });
});
