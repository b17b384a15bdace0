import type { Logger } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';

/** What the library uses of `@nestjs-cls/transactional`'s TransactionHost (with its TypeORM adapter). */
interface TransactionHostLike {
  readonly tx: unknown;
  isTransactionActive(): boolean;
  /** NOTE: not public in its typings; present at run time in @nestjs-cls/transactional 3.x (checked at detection). */
  setTxInstance(tx: unknown): void;
}

interface ClsLike {
  run<T>(options: { ifNested: 'inherit' }, callback: () => T): T;
}

/**
 * The transaction an application's `@nestjs-cls/transactional` (TypeORM adapter) has open in the current async
 * context: where `Outbox.add` writes when given no EntityManager, and what a handler's unit of work lends to
 * the application's services (`TransactionHost.tx` is the unit's EntityManager during a handler call), so that
 * services written for `@Transactional()` and `TransactionHost` can be called from handlers and their writes
 * commit with the unit, exactly once.
 *
 * Found at run time, only when the application registered the plugin for the module's DataSource: the library
 * does not depend on the package. `@nestjs-cls/transactional` keeps no public way to adopt a transaction opened
 * elsewhere; the library sets it through the TransactionHost's own setter, in a CLS context of its own, and
 * checks at detection that the setter is there (a warning, and no ambient transaction, otherwise).
 */
export class AmbientTransactions {
  private constructor(
    private readonly host: TransactionHostLike,
    private readonly cls: ClsLike,
  ) {}

  /** The TransactionHost of `connectionName` (the default one when undefined), if the application has one for `dataSource`. */
  static detect(dataSource: DataSource, connectionName: string | undefined, logger: Logger): AmbientTransactions | undefined {
    let transactional: { TransactionHost: { getInstance(name?: string): unknown } };
    let cls: { ClsServiceManager: { getClsService(): unknown } };
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      transactional = require('@nestjs-cls/transactional');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      cls = require('nestjs-cls');
    } catch {
      return undefined; // not installed: nothing to join
    }
    let host: TransactionHostLike;
    try {
      host = transactional.TransactionHost.getInstance(connectionName) as TransactionHostLike;
    } catch {
      return undefined; // installed, not registered (ClsPluginTransactional) for this connection
    }
    if (typeof host?.isTransactionActive !== 'function' || typeof host.setTxInstance !== 'function') {
      logger.warn('@nestjs-cls/transactional is registered, but its TransactionHost is not one this library knows (3.x): handlers do not lend it their transaction');
      return undefined;
    }
    // Outside a transaction, `tx` is the adapter's fallback: the DataSource's own manager.
    const fallback = host.isTransactionActive() ? undefined : (host.tx as EntityManager | undefined);
    if (fallback && fallback.connection !== dataSource) {
      logger.warn(`@nestjs-cls/transactional's TransactionHost${connectionName ? ` "${connectionName}"` : ''} is for another DataSource than the module's: handlers do not lend it their transaction, and Outbox.add needs an EntityManager (or set ambientTransactions.connectionName)`);
      return undefined;
    }
    return new AmbientTransactions(host, cls.ClsServiceManager.getClsService() as ClsLike);
  }

  /** The EntityManager of the transaction open in this async context, if there is one. */
  active(): EntityManager | undefined {
    return this.host.isTransactionActive() ? (this.host.tx as EntityManager) : undefined;
  }

  /** Runs `call` in a CLS context of its own where the TransactionHost's transaction is `manager`. */
  run<T>(manager: EntityManager, call: () => Promise<T>): Promise<T> {
    return this.cls.run({ ifNested: 'inherit' }, () => {
      this.host.setTxInstance(manager);
      return call();
    });
  }
}
