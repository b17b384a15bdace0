import { CALL_IS_OVER, currentCall, runInCall, type HandlerCall } from './handler-calls';
import type { PooledPgClient } from './pg-session';
import { statementEffect } from './transaction-control';

/** Thrown when a handler's data layer is used after its unit of work ended, or does what a unit cannot lend. */
export class UnitConnectionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnitConnectionError';
  }
}

type PgQueryArg = string | { text: string; values?: unknown[] };

function textOf(arg: PgQueryArg): string {
  return typeof arg === 'string' ? arg : (arg?.text ?? '');
}

/** A handler call on a unit connection: the connection it was opened on, and the ORM transactions it opened. */
export interface UnitCall extends HandlerCall {
  readonly unit: UnitConnection;
  /** The ORM's transactions (savepoints) open when the call began. */
  readonly depthAtOpen: number;
  /** The pg client the call's pool hands out (see `callClient`). */
  client?: BoundPgClient;
}

/**
 * The unit of work's connection as a data layer sees it: a node-postgres client (and a pool whose one connection
 * it is) on which every statement runs inside the unit's transaction. An ORM's own transaction (`BEGIN`,
 * `COMMIT`, `ROLLBACK`, which would end the unit's transaction) becomes a savepoint, so that a handler's
 * `db.transaction(...)` nests; any other statement that would end or change the unit's transaction is refused
 * (see `statementEffect`). A statement is accepted only from inside a handler's call (`run`) while that call
 * lasts: an unawaited promise, a timer or a callback of the call that fires after it is refused, instead of
 * running inside the unit after the handler's part of it (where its failure would abort the unit's transaction)
 * or, after the unit's COMMIT, outside any transaction.
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

  /** A handler call's use of this connection, live until `close` (see `run`). */
  open(): UnitCall {
    return { unit: this, live: true, depthAtOpen: this.depth };
  }

  /**
   * The call is over: statements from it are refused from now on. An ORM transaction it opened and left open (a
   * `$transaction` or `db.transaction(...)` not awaited) is undone to where the call found it, and the call fails:
   * committing the unit with part of that transaction in it would keep half of the handler's work.
   */
  async close(call: UnitCall, failed: boolean): Promise<void> {
    call.live = false;
    if (this.depth <= call.depthAtOpen) return;
    const left = this.depth - call.depthAtOpen;
    const name = `kafka_eo_tx_${call.depthAtOpen + 1}`;
    this.depth = call.depthAtOpen;
    const client = this.session.pgClient;
    // A failed call's attempt is undone whole by the unit (its savepoint, or the unit's rollback).
    if (failed || this.ended || !client) return;
    await client.query(`ROLLBACK TO SAVEPOINT ${name}`);
    await client.query(`RELEASE SAVEPOINT ${name}`);
    throw new UnitConnectionError(
      `the handler's call returned with ${left} transaction${left === 1 ? '' : 's'} of its own still open (a transaction of the data layer not awaited): its writes were undone; await the transaction inside the handler's call`,
    );
  }

  /** Runs `call` as the handler call `lease`: the statements it sends (however late) are checked against it. */
  static run<T>(lease: UnitCall, call: () => Promise<T>): Promise<T> {
    return runInCall(lease, call);
  }

  /** The unit connection of the handler call this code runs in, if that call is still on (for adapters that reuse clients). */
  static current(): UnitConnection | undefined {
    const lease = currentCall() as UnitCall | undefined;
    return lease?.live ? lease.unit : undefined;
  }

  /**
   * The client a pool of this connection hands out to the running handler call: one per call, so that a data
   * layer that keeps state per client (Kysely marks a client whose rollback failed as discarded for good) starts
   * each call afresh. Outside a call of this unit, the unit's own (whose statements are refused there anyway).
   */
  callClient(): BoundPgClient {
    const lease = currentCall() as UnitCall | undefined;
    if (lease?.unit !== this) return this.client;
    return (lease.client ??= new BoundPgClient(this));
  }

  /** While set, an ORM's own transaction is refused with this error (key lanes share one transaction). */
  refuseTransactions(make: (() => Error) | undefined): void {
    this.refusal = make;
  }

  /** Nesting of the ORM's transactions now open (savepoints). */
  get openTransactions(): number {
    return this.depth;
  }

  /** Why a statement sent now would be refused, if it would. */
  private refusedNow(): UnitConnectionError | undefined {
    if (this.ended) return new UnitConnectionError(`the unit of work this data layer was lent for has ended (${this.ended}): write through ctx.db inside the handler's call, and await every statement`);
    const lease = currentCall() as UnitCall | undefined;
    if (lease?.unit !== this) {
      return new UnitConnectionError("a statement through ctx.db came from outside the handler's call it was lent to: write through ctx.db inside the handler's call");
    }
    if (!lease.live) return new UnitConnectionError(CALL_IS_OVER);
    return undefined;
  }

  query(arg: PgQueryArg, params?: unknown[]): Promise<any> {
    // No await before the statement is handed to node-postgres: between the check and the send, nothing else runs.
    const refused = this.refusedNow();
    if (refused) return Promise.reject(refused);
    if (typeof params === 'function' || typeof (arg as { submit?: unknown })?.submit === 'function') {
      return Promise.reject(new UnitConnectionError('callbacks and submittables (pg-cursor, pg-query-stream) are not lent inside a unit of work: use promises'));
    }
    const client = this.session.pgClient;
    // Not connected yet (a data layer's first statement before the library's): connect, then check again.
    if (!client) return this.session.connect().then(() => (this.session.pgClient ? this.query(arg, params) : Promise.reject(new UnitConnectionError('the unit of work has no connection'))));
    const effect = statementEffect(textOf(arg));
    switch (effect.kind) {
      case 'other':
        return params === undefined ? client.query(arg as never) : client.query(arg as never, params);
      case 'refused':
        return Promise.reject(new UnitConnectionError(`a statement that would end or change the unit of work's transaction was refused: ${effect.why}`));
      case 'begin':
        return this.begin(client, effect.modes);
      case 'commit':
        return this.release(client, false);
      case 'rollback':
        return this.release(client, true);
    }
  }

  private async begin(client: PooledPgClient, modes: string): Promise<unknown> {
    if (this.refusal) throw this.refusal();
    if (modes) {
      throw new UnitConnectionError(
        `a transaction inside a unit of work cannot set its own characteristics ("${modes.slice(0, 80)}"): it is a savepoint of the unit's transaction; set the isolation level for the whole unit (inbox.isolationLevel)`,
      );
    }
    this.depth++;
    await client.query(`SAVEPOINT kafka_eo_tx_${this.depth}`);
    return done('SAVEPOINT');
  }

  /** The end of an ORM's transaction: its savepoint released, or rolled back to and released. */
  private async release(client: PooledPgClient, rollback: boolean): Promise<unknown> {
    if (this.depth === 0) {
      throw new UnitConnectionError(
        rollback
          ? "a handler cannot roll back its unit of work's transaction: throw from the handler instead"
          : "a handler cannot commit its unit of work's transaction: the library commits it with the record's offset",
      );
    }
    const name = `kafka_eo_tx_${this.depth}`;
    this.depth--;
    if (rollback) {
      await client.query(`ROLLBACK TO SAVEPOINT ${name}`);
      await client.query(`RELEASE SAVEPOINT ${name}`);
      return done('ROLLBACK');
    }
    await client.query(`RELEASE SAVEPOINT ${name}`);
    return done('COMMIT');
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
    connect: async () => unit.callClient(),
    query: (arg: PgQueryArg, params?: unknown[]) => unit.query(arg, params),
    end: async () => undefined,
    on() {
      return this;
    },
  };
}
