/**
 * The database port: all the library's SQL (the unit of work, the inbox, the outbox, parking, retry tiers, the
 * admin and its jobs) runs through these two small interfaces, over PostgreSQL through node-postgres. TypeORM is
 * one adapter behind them (`typeormDatabase`); Prisma, Drizzle and Kysely are others (`kafka-exactly-once/prisma`,
 * `/drizzle`, `/kysely`). A TypeORM QueryRunner is a `DatabaseSession` as it is.
 */

/** One connection of the pool, taken for a unit of work or a piece of the library's own work. */
export interface DatabaseSession {
  /** Takes the connection from the pool (the first statement does it too). */
  connect(): Promise<unknown>;
  /**
   * A parameterised statement (`$1`, `$2`...). Answers as TypeORM's query runner does: the rows, `[rows,
   * rowCount]` for UPDATE and DELETE, and `{ records, affected }` when `structured`.
   */
  query(sql: string, params?: unknown[], structured?: boolean): Promise<any>;
  startTransaction(isolation?: DatabaseIsolationLevel): Promise<void>;
  commitTransaction(): Promise<void>;
  rollbackTransaction(): Promise<void>;
  readonly isTransactionActive: boolean;
  /** Gives the connection back to the pool (see `releaseClean` for the library's own way of doing it). */
  release(): Promise<void>;
}

export type DatabaseIsolationLevel = 'READ UNCOMMITTED' | 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';

/** The node-postgres pool options the library reads or hardens (see `hardenPool`). */
export interface PgPoolOptions {
  max?: number;
  connectionTimeoutMillis?: number;
  keepAlive?: boolean;
  keepAliveInitialDelayMillis?: number;
}

/** The node-postgres Pool the connections come from (the outbox relay LISTENs on one of its connections). */
export interface PgPoolLike {
  options?: PgPoolOptions;
  connect(): Promise<any>;
  query(text: string, params?: unknown[]): Promise<{ rows: any[] }>;
}

/**
 * What a unit of work lends its handlers: its data layer bound to the unit's transaction, opened for each handler
 * call (`open`) and closed when that call is over, so that a statement sent after the call is refused.
 */
export interface LentDatabase {
  /** The data layer for one handler call, live until its `close`. */
  open(): LentCall;
  /** The ORM's own transactions inside the unit (savepoints), for the key lanes' refusal of them. */
  readonly transactions?: { refuseTransactions(make: (() => Error) | undefined): void };
  /** Called when the unit's connection is released; `closed` when it was destroyed (a handler may still run). */
  end(closed: boolean): void;
}

/**
 * What one handler call is lent: `db` is what `ctx.db` gives (a TypeORM EntityManager, a Prisma client, a Drizzle
 * database, a Kysely instance); `manager` is TypeORM's EntityManager (`ctx.manager`), for TypeORM only.
 */
export interface LentCall {
  readonly db: unknown;
  readonly manager?: unknown;
  /** Runs the handler's call with the data layer bound to it (its statements are checked against the call). */
  run<T>(call: () => Promise<T>): Promise<T>;
  /**
   * The call is over: every statement through what it was lent is refused from now on. A transaction of the data
   * layer's own that the call left open is forgotten; when the call succeeded (`failed` false) it is undone too
   * and `close` rejects: the call failed (when it failed anyway, the unit undoes the attempt as a whole).
   */
  close(failed: boolean): Promise<void>;
}

/**
 * A data layer the library runs on. Build one with `typeormDatabase`, `prismaDatabase`, `drizzleDatabase` or
 * `kyselyDatabase`, and give it to the module as `database`; without it the module takes the TypeORM
 * DataSource of `TypeOrmModule` (`dataSourceName`).
 */
export interface DatabasePort {
  /** `typeorm`, `prisma`, `drizzle`, `kysely`, or another adapter's name. */
  readonly kind: string;
  /** A session on a connection of its own (not connected until its first statement or `connect()`). */
  createQueryRunner(): DatabaseSession;
  /** The node-postgres pool under the data layer, when it has one the library can reach. */
  pgPool(): PgPoolLike | undefined;
  /** The data layer bound to a session's transaction, for a handler's call (lent once per unit of work). */
  lend(session: DatabaseSession): LentDatabase;
  /**
   * For `Outbox.add`: the session of a transaction the caller gives (this data layer's own transaction object,
   * or what `lend` gave a handler), else undefined. `inTransaction` false when the object is the data layer's
   * client outside any transaction.
   */
  sessionOf(transaction: unknown): { query(sql: string, params?: unknown[]): Promise<any>; inTransaction: boolean; sameDatabase: boolean } | undefined;
  /** What `Outbox.add` names when given something it does not know. */
  readonly transactionName: string;
  /** Settings of the module the data layer follows (Prisma: its interactive transactions' timeout). */
  configure?(settings: { handlerTimeoutMs: number }): void;
  /**
   * Called once when the consumer starts, after the migrations: what the data layer would otherwise do at its
   * first unit of work (Prisma: build a client and load its query interpreter with a first statement).
   */
  warmUp?(): Promise<void>;
}

/** Where sessions come from: a port, or a TypeORM DataSource as it is (the library's jobs and tools need no more). */
export interface SessionSource {
  createQueryRunner(): DatabaseSession;
}
