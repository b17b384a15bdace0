import type { DatabaseIsolationLevel, DatabaseSession, PgPoolLike } from './database.port';

/** A node-postgres client of the pool, as the session uses it. */
export interface PooledPgClient {
  query(text: string | { text: string; values?: unknown[] }, params?: unknown[]): Promise<{ command?: string; rows: any[]; rowCount: number | null }>;
  release(err?: Error | boolean): void;
  on?(event: 'error', listener: (err: Error) => void): unknown;
  removeListener?(event: 'error', listener: (err: Error) => void): unknown;
}

/**
 * A `DatabaseSession` on one connection of a node-postgres pool: what the library runs its statements and the
 * unit of work's transaction on when the data layer is not TypeORM. Its answers have the shapes of TypeORM's
 * query runner (the engine reads them so).
 */
export class PgSession implements DatabaseSession {
  private client?: PooledPgClient;
  private connecting?: Promise<PooledPgClient>;
  private released = false;
  /** The connection's failure while it was checked out and between statements (see onError). */
  private broken?: Error;
  /**
   * node-postgres emits on the client a failure of a connection checked out of the pool and not running a statement
   * (PostgreSQL ended it: pg_terminate_backend, a restart, idle_in_transaction_session_timeout): with no listener,
   * that ends the process. Kept here: the next statement fails on the dead connection (an infrastructure fault the
   * engine retries), and the release destroys it instead of pooling it.
   */
  private readonly onError = (err: Error): void => {
    this.broken ??= err;
  };
  isTransactionActive = false;

  constructor(private readonly pool: PgPoolLike) {}

  /** The node-postgres client once connected (the engine asks it whether a statement still waits). */
  get pgClient(): PooledPgClient | undefined {
    return this.client;
  }

  connect(): Promise<PooledPgClient> {
    if (this.released) return Promise.reject(new Error('the session was released: its connection is gone'));
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.pool.connect().then((client: PooledPgClient) => {
      if (this.released) {
        client.release(new Error('abandoned while connecting'));
        throw new Error('the session was released while connecting');
      }
      this.client = client;
      client.on?.('error', this.onError);
      return client;
    });
    return this.connecting;
  }

  async query(sql: string, params?: unknown[], structured?: boolean): Promise<any> {
    const client = await this.connect();
    const result = await client.query(sql, params);
    const affected = result.rowCount ?? undefined;
    // TypeORM's shapes: rows, [rows, rowCount] for UPDATE and DELETE, or { records, affected }.
    if (structured) return { records: result.rows ?? [], affected, raw: result.rows };
    return result.command === 'UPDATE' || result.command === 'DELETE' ? [result.rows, result.rowCount] : result.rows;
  }

  async startTransaction(isolation?: DatabaseIsolationLevel): Promise<void> {
    if (this.isTransactionActive) throw new Error('a transaction is already open on this session');
    await this.query(isolation ? `START TRANSACTION ISOLATION LEVEL ${isolation}` : 'START TRANSACTION');
    this.isTransactionActive = true;
  }

  async commitTransaction(): Promise<void> {
    if (!this.isTransactionActive) throw new Error('no transaction is open on this session');
    try {
      await this.query('COMMIT');
    } finally {
      this.isTransactionActive = false;
    }
  }

  async rollbackTransaction(): Promise<void> {
    if (!this.isTransactionActive) throw new Error('no transaction is open on this session');
    try {
      await this.query('ROLLBACK');
    } finally {
      this.isTransactionActive = false;
    }
  }

  /** Gives the connection back; with an error, node-postgres destroys it instead of pooling it. */
  async releaseConnection(broken?: Error): Promise<void> {
    if (this.released) return;
    this.released = true;
    const client = this.client;
    this.client = undefined;
    this.isTransactionActive = false;
    client?.removeListener?.('error', this.onError);
    client?.release(broken ?? this.broken ?? false);
  }

  release(): Promise<void> {
    return this.releaseConnection();
  }
}
