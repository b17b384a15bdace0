import type { PooledPgClient } from './pg-session';

/** Thrown when a handler's data layer is used after its unit of work ended, or does what a unit cannot lend. */
export class UnitConnectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnitConnectionError';
  }
}

type PgQueryArg = string | { text: string; values?: unknown[] };

/** A statement that opens, ends or undoes a transaction, as the ORMs write them. */
const OPEN = /^\s*(?:begin(?:\s+(?:work|transaction))?|start\s+transaction)\b\s*(.*?)\s*;?\s*$/is;
const COMMIT = /^\s*(?:commit|end)(?:\s+(?:work|transaction))?\s*;?\s*$/is;
const ROLLBACK = /^\s*(?:rollback|abort)(?:\s+(?:work|transaction))?\s*;?\s*$/is;

function textOf(arg: PgQueryArg): string {
  return typeof arg === 'string' ? arg : (arg?.text ?? '');
}

/**
 * The unit of work's connection as a data layer sees it: a node-postgres client (and a pool whose one connection
 * it is) on which every statement runs inside the unit's transaction. An ORM's own transaction (`BEGIN`,
 * `COMMIT`, `ROLLBACK`, which would end the unit's transaction) becomes a savepoint, so that a handler's
 * `db.transaction(...)` nests; after the unit ends, every statement is refused (a handler still running after
 * its deadline, or a promise left unawaited, cannot write into another unit's transaction).
 */
export class UnitConnection {
  private depth = 0;
  private ended?: string;
  private refusal?: () => Error;
  /** What the ORM is given: a pg client that is this connection. */
  readonly client: BoundPgClient;

  constructor(private readonly session: { pgClient?: PooledPgClient; connect(): Promise<unknown> }) {
    this.client = new BoundPgClient(this);
  }

  /** Refuses every statement from now on (the unit's connection was given back or closed). */
  end(why: string): void {
    this.ended = why;
  }

  /** While set, an ORM's own transaction is refused with this error (key lanes share one transaction). */
  refuseTransactions(make: (() => Error) | undefined): void {
    this.refusal = make;
  }

  /** Nesting of the ORM's transactions now open (savepoints). */
  get openTransactions(): number {
    return this.depth;
  }

  async query(arg: PgQueryArg, params?: unknown[]): Promise<any> {
    if (this.ended) throw new UnitConnectionError(`the unit of work this data layer was lent for has ended (${this.ended}): write through ctx.db inside the handler's call, and await every statement`);
    if (typeof params === 'function' || typeof (arg as { submit?: unknown })?.submit === 'function') {
      throw new UnitConnectionError('callbacks and submittables (pg-cursor, pg-query-stream) are not lent inside a unit of work: use promises');
    }
    await this.session.connect();
    const client = this.session.pgClient;
    if (!client) throw new UnitConnectionError('the unit of work has no connection');
    const text = textOf(arg);
    const open = OPEN.exec(text);
    if (open) {
      if (this.refusal) throw this.refusal();
      if (open[1]) {
        throw new UnitConnectionError(
          `a transaction inside a unit of work cannot set its own characteristics ("${open[1].slice(0, 80)}"): it is a savepoint of the unit's transaction; set the isolation level for the whole unit (inbox.isolationLevel)`,
        );
      }
      this.depth++;
      await client.query(`SAVEPOINT kafka_eo_tx_${this.depth}`);
      return done('SAVEPOINT');
    }
    if (COMMIT.test(text)) {
      if (this.depth === 0) throw new UnitConnectionError("a handler cannot commit its unit of work's transaction: the library commits it with the record's offset");
      await client.query(`RELEASE SAVEPOINT kafka_eo_tx_${this.depth}`);
      this.depth--;
      return done('COMMIT');
    }
    if (ROLLBACK.test(text)) {
      if (this.depth === 0) throw new UnitConnectionError("a handler cannot roll back its unit of work's transaction: throw from the handler instead");
      const name = `kafka_eo_tx_${this.depth}`;
      this.depth--;
      await client.query(`ROLLBACK TO SAVEPOINT ${name}`);
      await client.query(`RELEASE SAVEPOINT ${name}`);
      return done('ROLLBACK');
    }
    return params === undefined ? client.query(arg as never) : client.query(arg as never, params);
  }
}

function done(command: string) {
  return { command, rows: [], rowCount: null, fields: [], oid: 0 };
}

/** A node-postgres client facade over a UnitConnection (what Drizzle's and Kysely's drivers call). */
export class BoundPgClient {
  constructor(private readonly unit: UnitConnection) {}
  query(arg: PgQueryArg, params?: unknown[]): Promise<any> {
    return this.unit.query(arg, params);
  }
  /** The library releases the connection, never the data layer. */
  release(): void {}
  on(): this {
    return this;
  }
  once(): this {
    return this;
  }
  off(): this {
    return this;
  }
  removeListener(): this {
    return this;
  }
}

/** A pool of the one unit connection, for drivers that take a pool (Kysely's PostgresDialect). */
export function boundPool(unit: UnitConnection) {
  return {
    connect: async () => unit.client,
    query: (arg: PgQueryArg, params?: unknown[]) => unit.query(arg, params),
    end: async () => undefined,
    on() {
      return this;
    },
  };
}
