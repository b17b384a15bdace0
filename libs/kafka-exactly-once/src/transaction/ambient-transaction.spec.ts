import { Logger } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import type { DataSource, EntityManager } from 'typeorm';
import { AmbientTransactionError } from '../errors/ambient-transaction.error';
import { AmbientTransactions } from './ambient-transaction';

/**
 * The join with @nestjs-cls/transactional 3.x's own TransactionHost and ClsService (no database: the adapter is
 * the TypeORM adapter's shape over stand-in DataSources, which the join never queries).
 */
describe('AmbientTransactions', () => {
  const logger = new Logger('test');
  const moduleDataSource = {} as DataSource;
  const unitManager = { connection: moduleDataSource } as unknown as EntityManager;
  let hosts = 0;

  beforeAll(() => jest.spyOn(logger, 'warn').mockImplementation(() => undefined));

  /** A TransactionHost as ClsPluginTransactional registers it, for a TypeORM adapter of `dataSource`. */
  function registerHost(dataSource: object): { name: string; host: TransactionHost } {
    const name = `unit-${++hosts}`;
    const fallback = { connection: dataSource };
    const host = new TransactionHost({
      connectionName: name,
      enableTransactionProxy: false,
      defaultTxOptions: {},
      getFallbackInstance: () => fallback,
      wrapWithTransaction: (_options: unknown, fn: () => Promise<unknown>) => fn(),
    } as never);
    return { name, host };
  }

  /** Replaces the host's setter (private in its typings). */
  function setter(host: TransactionHost, replacement: (tx: unknown) => void): void {
    (host as unknown as { setTxInstance: (tx: unknown) => void }).setTxInstance = replacement;
  }

  it('lends the unit\'s transaction: during the call TransactionHost.tx is the unit\'s EntityManager, and only then', async () => {
    const { name, host } = registerHost(moduleDataSource);
    const ambient = AmbientTransactions.detect(moduleDataSource, name, logger)!;
    const seen = await ambient.run(unitManager, async () => [host.tx, host.isTransactionActive(), ambient.active()]);
    expect(seen).toEqual([unitManager, true, unitManager]);
    expect(host.isTransactionActive()).toBe(false);
  });

  it('finds nothing to join when no TransactionHost is registered under the name', () => {
    expect(AmbientTransactions.detect(moduleDataSource, 'never-registered', logger)).toBeUndefined();
  });

  it('refuses, without calling the handler, a join that does not take (TransactionHost.tx is not the unit\'s transaction once set)', async () => {
    const { name, host } = registerHost(moduleDataSource);
    setter(host, () => undefined); // a setter that sets nothing the host reads back
    const ambient = AmbientTransactions.detect(moduleDataSource, name, logger)!;
    const call = jest.fn(async () => 'ran');
    const refused = await ambient.run(unitManager, call).then(() => undefined, (err: unknown) => err);
    expect(call).not.toHaveBeenCalled();
    expect(refused).toBeInstanceOf(AmbientTransactionError);
    expect(refused).toMatchObject({ problem: 'join-not-taken', retriable: true });
    expect((refused as Error).message).toMatch(/the join did not take .* the handler was not called\. .*npm ls nestjs-cls @nestjs-cls\/transactional.*ambientTransactions: false/);
  });

  it('refuses a join whose setter throws (a TransactionHost reading another copy of nestjs-cls, with no context of its own)', async () => {
    const { name, host } = registerHost(moduleDataSource);
    setter(host, () => {
      throw new Error('Cannot set the key "x". No CLS context available');
    });
    const ambient = AmbientTransactions.detect(moduleDataSource, name, logger)!;
    const call = jest.fn(async () => 'ran');
    const refused = await ambient.run(unitManager, call).then(() => undefined, (err: unknown) => err);
    expect(call).not.toHaveBeenCalled();
    expect(refused).toMatchObject({ problem: 'join-not-taken', message: expect.stringMatching(/setting it failed: Cannot set the key/) });
  });

  it('refuses every unit when the TransactionHost is for another DataSource, naming the token to give the adapter', async () => {
    const { name } = registerHost({});
    const ambient = AmbientTransactions.detect(moduleDataSource, name, logger, 'orders');
    expect(ambient).toBeDefined();
    expect(ambient!.active()).toBeUndefined();
    const call = jest.fn(async () => 'ran');
    const refused = await ambient!.run(unitManager, call).then(() => undefined, (err: unknown) => err);
    expect(call).not.toHaveBeenCalled();
    expect(refused).toMatchObject({ problem: 'other-data-source' });
    expect((refused as Error).message).toMatch(/another DataSource than the module's \(dataSourceName "orders"\).*dataSourceToken: getDataSourceToken\('orders'\)/);
  });
});
