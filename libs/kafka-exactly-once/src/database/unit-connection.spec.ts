import { PgSession } from './pg-session';
import { UnitConnection, UnitConnectionError } from './unit-connection';

/** A node-postgres client that records what it is sent. */
function recordingClient() {
  const sent: Array<{ text: string; params?: unknown[] }> = [];
  const client = {
    query: async (arg: string | { text: string }, params?: unknown[]) => {
      const text = typeof arg === 'string' ? arg : arg.text;
      sent.push({ text, params });
      const command = text.trim().split(/\s+/)[0].toUpperCase();
      return { command, rows: [{ n: 1 }], rowCount: 1 };
    },
    release: jest.fn(),
  };
  return { client, sent };
}

/** A unit connection over a recording client, and `unit` as a handler call sees it (each statement inside that call). */
function unitOver() {
  const { client, sent } = recordingClient();
  const session = { pgClient: client, connect: async () => client };
  const connection = new UnitConnection(session as never);
  const call = connection.open();
  const unit = {
    query: (arg: unknown, params?: unknown) => UnitConnection.run(call, () => connection.query(arg as never, params as never)),
    refuseTransactions: (make: (() => Error) | undefined) => connection.refuseTransactions(make),
    end: (why: string) => connection.end(why),
    get openTransactions() {
      return connection.openTransactions;
    },
  };
  return { unit, sent, connection, call };
}

describe('UnitConnection', () => {
  it("turns an ORM's BEGIN, COMMIT and ROLLBACK into savepoints, nested, in every spelling the ORMs send", async () => {
    const { unit, sent } = unitOver();
    await unit.query('BEGIN');
    await unit.query('start transaction');
    await unit.query('commit');
    await unit.query({ text: 'ROLLBACK', values: [] } as never);
    expect(sent.map((s) => s.text)).toEqual(['SAVEPOINT kafka_eo_tx_1', 'SAVEPOINT kafka_eo_tx_2', 'RELEASE SAVEPOINT kafka_eo_tx_2', 'ROLLBACK TO SAVEPOINT kafka_eo_tx_1', 'RELEASE SAVEPOINT kafka_eo_tx_1']);
    expect(unit.openTransactions).toBe(0);
  });

  it("refuses to commit or roll back the unit's own transaction, and a nested one with characteristics of its own", async () => {
    const { unit, sent } = unitOver();
    await expect(unit.query('COMMIT')).rejects.toThrow(/cannot commit its unit of work's transaction/);
    await expect(unit.query('end transaction')).rejects.toThrow(UnitConnectionError);
    await expect(unit.query('ROLLBACK')).rejects.toThrow(/cannot roll back/);
    await expect(unit.query('begin isolation level serializable')).rejects.toThrow(/cannot set its own characteristics/);
    await expect(unit.query('START TRANSACTION READ ONLY')).rejects.toThrow(/cannot set its own characteristics/);
    expect(sent).toEqual([]);
  });

  it('passes every other statement through with its parameters, savepoints of the ORM included', async () => {
    const { unit, sent } = unitOver();
    await unit.query('SELECT $1::int AS n', [7]);
    await unit.query('savepoint sp1');
    await unit.query('rollback to savepoint sp1');
    await unit.query('SELECT committed FROM t');
    expect(sent).toEqual([{ text: 'SELECT $1::int AS n', params: [7] }, { text: 'savepoint sp1', params: undefined }, { text: 'rollback to savepoint sp1', params: undefined }, { text: 'SELECT committed FROM t', params: undefined }]);
  });

  it('refuses every statement once the unit ended, and transactions while key lanes run', async () => {
    const { unit, sent } = unitOver();
    unit.refuseTransactions(() => new Error('lanes'));
    await expect(unit.query('BEGIN')).rejects.toThrow('lanes');
    await unit.query('SELECT 1');
    unit.refuseTransactions(undefined);
    await unit.query('BEGIN');
    unit.end('its transaction ended');
    await expect(unit.query('SELECT 1')).rejects.toThrow(/has ended \(its transaction ended\)/);
    expect(sent.map((s) => s.text)).toEqual(['SELECT 1', 'SAVEPOINT kafka_eo_tx_1']);
  });

  it('refuses what a transaction-control parse finds anywhere in the text: comments, case, AND CHAIN, PREPARE TRANSACTION, several statements', async () => {
    const { unit, sent } = unitOver();
    await unit.query('BEGIN');
    for (const text of [
      'COMMIT AND CHAIN',
      'rollback and chain',
      'PREPARE TRANSACTION \'x\'',
      'COMMIT PREPARED \'x\'',
      'SELECT 1; COMMIT',
      'select 1;/* x */ end',
      "INSERT INTO t VALUES ('a;b'); ABORT",
      'BEGIN; SELECT 1',
      'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE',
      'set local idle_in_transaction_session_timeout = 0',
      'RESET ALL',
      'RELEASE SAVEPOINT kafka_eo_tx_1',
      'ROLLBACK TO kafka_eo_record',
    ]) {
      await expect(unit.query(text)).rejects.toThrow(/end or change the unit of work's transaction/);
    }
    // A comment before the keyword does not hide it: the ORM transaction's own COMMIT, a savepoint's release.
    await unit.query('/* a */ -- b\n  Commit');
    expect(sent.map((s) => s.text)).toEqual(['SAVEPOINT kafka_eo_tx_1', 'RELEASE SAVEPOINT kafka_eo_tx_1']);
    await expect(unit.query('-- the unit\nCOMMIT')).rejects.toThrow(/cannot commit its unit of work's transaction/);
  });

  it("refuses a statement sent from a call that is over, or from outside any call (a timer of an earlier call)", async () => {
    const { connection, call, sent } = unitOver();
    const late = UnitConnection.run(call, async () => new Promise<unknown>((resolve) => setTimeout(() => resolve(connection.query('INSERT INTO t VALUES (1)').catch((e) => e)), 10)));
    call.live = false;
    expect(await late).toBeInstanceOf(UnitConnectionError);
    expect(String(await late)).toMatch(/call this data layer was lent to is over/);
    await expect(connection.query('SELECT 1')).rejects.toThrow(/outside the handler's call/);
    // Another call of the same unit goes on.
    const next = connection.open();
    await UnitConnection.run(next, () => connection.query('SELECT 2'));
    expect(sent.map((s) => s.text)).toEqual(['SELECT 2']);
  });

  it('refuses callbacks and submittables (cursors, streams): they would outlive what the library can see', async () => {
    const { unit } = unitOver();
    await expect(unit.query('SELECT 1', (() => undefined) as never)).rejects.toThrow(/callbacks and submittables/);
    await expect(unit.query({ text: 'SELECT 1', submit: () => undefined } as never)).rejects.toThrow(/callbacks and submittables/);
  });
});

describe('PgSession', () => {
  function session() {
    const { client, sent } = recordingClient();
    const pool = { connect: jest.fn(async () => client), query: jest.fn() };
    return { s: new PgSession(pool as never), sent, client, pool };
  }

  it("answers in TypeORM's query runner shapes: rows, [rows, count] for UPDATE and DELETE, structured", async () => {
    const { s } = session();
    expect(await s.query('SELECT 1')).toEqual([{ n: 1 }]);
    expect(await s.query('UPDATE t SET a = 1')).toEqual([[{ n: 1 }], 1]);
    expect(await s.query('DELETE FROM t')).toEqual([[{ n: 1 }], 1]);
    expect(await s.query('INSERT INTO t VALUES (1) RETURNING *', [], true)).toMatchObject({ records: [{ n: 1 }], affected: 1 });
  });

  it('opens one transaction at an isolation level, and gives its connection back destroyed when told it is broken', async () => {
    const { s, sent, client, pool } = session();
    await s.startTransaction('REPEATABLE READ');
    expect(s.isTransactionActive).toBe(true);
    await expect(s.startTransaction()).rejects.toThrow(/already open/);
    await s.commitTransaction();
    expect(s.isTransactionActive).toBe(false);
    expect(sent.map((x) => x.text)).toEqual(['START TRANSACTION ISOLATION LEVEL REPEATABLE READ', 'COMMIT']);
    const broken = new Error('closed');
    await s.releaseConnection(broken);
    expect(client.release).toHaveBeenCalledWith(broken);
    expect(pool.connect).toHaveBeenCalledTimes(1);
    await expect(s.query('SELECT 1')).rejects.toThrow(/released/);
  });
});
