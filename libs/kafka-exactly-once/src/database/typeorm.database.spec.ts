import { DataSource } from 'typeorm';
import type { DatabaseSession } from './database.port';
import { CALL_IS_OVER } from './handler-calls';
import { typeormDatabase } from './typeorm.database';

describe('typeormDatabase: what a handler call is lent', () => {
  const dataSource = new DataSource({ type: 'postgres' }); // never connected: no statement leaves the process
  const fakeRunner = () => ({ transactionDepth: 1, isReleased: false, isTransactionActive: true, query: jest.fn(async (sql: string) => [{ sql }]) });

  it('builds no EntityManager for a call that never reads ctx.manager or ctx.db', async () => {
    const build = jest.spyOn(dataSource, 'createEntityManager');
    build.mockClear();
    const call = typeormDatabase(dataSource).lend(fakeRunner() as unknown as DatabaseSession).open();
    await call.run(async () => undefined);
    await call.close(false);
    expect(build).not.toHaveBeenCalled();
    build.mockRestore();
  });

  it("sends a statement of the call on the unit's runner, through one EntityManager that ctx.db and ctx.manager share", async () => {
    const runner = fakeRunner();
    const call = typeormDatabase(dataSource).lend(runner as unknown as DatabaseSession).open();
    await call.run(async () => {
      expect(call.db).toBe(call.manager);
      await (call.manager as { query(sql: string): Promise<unknown> }).query('SELECT 1');
    });
    await call.close(false);
    expect(runner.query).toHaveBeenCalledWith('SELECT 1', undefined);
  });

  it('refuses a statement through a ctx.db first read after the call is over: nothing reaches the runner', async () => {
    const runner = fakeRunner();
    const call = typeormDatabase(dataSource).lend(runner as unknown as DatabaseSession).open();
    await call.run(async () => undefined);
    await call.close(false);
    await expect((call.db as { query(sql: string): Promise<unknown> }).query('UPDATE accounts SET balance = 0')).rejects.toThrow(CALL_IS_OVER);
    expect(runner.query).not.toHaveBeenCalled();
  });

  it('refuses, after the call, a statement through the ctx.db it read during the call', async () => {
    const runner = fakeRunner();
    const call = typeormDatabase(dataSource).lend(runner as unknown as DatabaseSession).open();
    let kept: { query(sql: string): Promise<unknown> } | undefined;
    await call.run(async () => {
      kept = call.db as typeof kept;
    });
    await call.close(false);
    await expect(kept!.query('SELECT 1')).rejects.toThrow(CALL_IS_OVER);
    expect(runner.query).not.toHaveBeenCalled();
  });
});
