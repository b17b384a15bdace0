import type { Logger } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import { AmbientTransactionError, type AmbientTransactionProblem } from '../errors/ambient-transaction.error';

/** What the library uses of `@nestjs-cls/transactional`'s TransactionHost (with its TypeORM adapter). */
export interface TransactionHostLike {
  readonly tx: unknown;
  isTransactionActive(): boolean;
  /** NOTE: not public in its typings; present at run time in @nestjs-cls/transactional 3.x (checked at detection). */
  setTxInstance(tx: unknown): void;
}

export interface ClsLike {
  run<T>(options: { ifNested: 'inherit' }, callback: () => T): T;
}

/** Why a TransactionHost that is there cannot be joined, and what the application changes. */
interface JoinProblem {
  kind: AmbientTransactionProblem;
  /** What is wrong, as a clause: "its TransactionHost is for another DataSource than the module's (...)". */
  cause: string;
  /** The way out, as a sentence. */
  fix: string;
}

/** Set `ambientTransactions: false` only when nothing a handler calls uses the TransactionHost. */
const OPT_OUT = 'if no handler calls services that use TransactionHost, set the module option ambientTransactions: false';

/** The DataSource of a TypeORM EntityManager (`dataSource` from TypeORM 1, `connection` before). */
function dataSourceOf(manager: unknown): unknown {
  const m = manager as { dataSource?: unknown; connection?: unknown } | undefined;
  return m?.dataSource ?? m?.connection;
}

/**
 * The transaction an application's `@nestjs-cls/transactional` (TypeORM adapter) has open in the current async
 * context: where `Outbox.add` writes when given no EntityManager, and what a handler's unit of work lends to
 * the application's services (`TransactionHost.tx` is the unit's EntityManager during a handler call), so that
 * services written for `@Transactional()` and `TransactionHost` can be called from handlers and their writes
 * commit with the unit, exactly once.
 *
 * Found at run time, only when the application registered the plugin: the library does not depend on the
 * package. `@nestjs-cls/transactional` keeps no public way to adopt a transaction opened elsewhere; the library
 * sets it through the TransactionHost's own setter, in a CLS context of its own, and checks in every unit, before
 * the handler runs, that `TransactionHost.tx` then IS the unit's transaction. A TransactionHost that cannot be
 * joined (another DataSource's, a version the library does not know, a join that does not take) refuses the unit
 * as a fault of the set-up (AmbientTransactionError): run anyway, the handler's services would commit outside the
 * unit, and again on every redelivery.
 */
export class AmbientTransactions {
  /** Built by {@link detect}; `problem`: the host is there but cannot be joined. */
  constructor(
    private readonly host: TransactionHostLike,
    private readonly cls: ClsLike,
    private readonly problem?: JoinProblem,
  ) {}

  /**
   * The TransactionHost of `connectionName` (the default one when undefined), if the application has one;
   * undefined when the package is not installed or no ClsPluginTransactional is registered under that name
   * (nothing to join). A host that cannot be joined is returned with its problem (and a warning is logged), so
   * that units refuse to run with it.
   */
  static detect(dataSource: DataSource | undefined, connectionName: string | undefined, logger: Logger, dataSourceName?: string): AmbientTransactions | undefined {
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
    const named = connectionName ? ` "${connectionName}"` : '';
    let problem: JoinProblem | undefined;
    if (typeof host?.isTransactionActive !== 'function' || typeof host.setTxInstance !== 'function') {
      problem = {
        kind: 'unknown-host',
        cause: `its TransactionHost${named} is not one this library can join (it joins @nestjs-cls/transactional 3.x, whose TransactionHost has setTxInstance)`,
        fix: `Use @nestjs-cls/transactional 3.x; ${OPT_OUT}.`,
      };
    } else if (dataSource && dataSourceOf(host.tx) !== dataSource) {
      // (TypeORM only: another data layer's TransactionHost is checked by the join itself, in every unit.)
      // Outside a transaction `tx` is the adapter's fallback, the manager of the DataSource it names; inside one,
      // the manager of that transaction, of the same DataSource.
      const token = dataSourceName ? `getDataSourceToken('${dataSourceName}')` : 'getDataSourceToken()';
      problem = {
        kind: 'other-data-source',
        cause: `its TransactionHost${named} is for another DataSource than the module's (dataSourceName ${JSON.stringify(dataSourceName ?? 'default')}), or its adapter is not TransactionalAdapterTypeOrm`,
        fix:
          `Name the module's DataSource in the adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: ${token} }), or set ambientTransactions: { connectionName } to the ClsPluginTransactional whose adapter does; ` +
          `${OPT_OUT}.`,
      };
    }
    const found = new AmbientTransactions(host, cls.ClsServiceManager.getClsService() as ClsLike, problem);
    if (problem) logger.warn(`@nestjs-cls/transactional cannot be joined: ${problem.cause}. Handlers' units of work are refused until this is fixed (a service a handler calls would commit outside the unit), and Outbox.add needs an EntityManager. ${problem.fix}`);
    return found;
  }

  /** Why `Outbox.add` without an EntityManager cannot use this TransactionHost, if it cannot. */
  get refusal(): string | undefined {
    return this.problem && `${this.problem.cause}. ${this.problem.fix}`;
  }

  /** The EntityManager of the transaction open in this async context, if there is one (and it can be used). */
  active(): EntityManager | undefined {
    if (this.problem) return undefined;
    return this.host.isTransactionActive() ? (this.host.tx as EntityManager) : undefined;
  }


  /**
   * Runs `call` in a CLS context of its own where the TransactionHost's transaction is `manager`. Rejects with
   * AmbientTransactionError, without calling `call`, when that is not so once set (see the class).
   */
  run<T>(manager: EntityManager, call: () => Promise<T>): Promise<T> {
    if (this.problem) return Promise.reject(this.refused(this.problem));
    return this.cls.run({ ifNested: 'inherit' }, () => {
      let why: string | undefined;
      try {
        this.host.setTxInstance(manager);
        if (this.host.tx !== manager || !this.host.isTransactionActive()) why = 'TransactionHost.tx was another object than the transaction just set';
      } catch (err) {
        why = `setting it failed: ${(err as Error)?.message ?? err}`;
      }
      if (why) {
        return Promise.reject(
          this.refused({
            kind: 'join-not-taken',
            cause: `the join did not take (${why})`,
            fix:
              'This happens when the application and this library load different copies of nestjs-cls or @nestjs-cls/transactional (npm ls nestjs-cls @nestjs-cls/transactional; dedupe them), or with an adapter other than TransactionalAdapterTypeOrm; ' +
              `${OPT_OUT}.`,
          }),
        );
      }
      return call();
    });
  }

  private refused(problem: JoinProblem): AmbientTransactionError {
    return new AmbientTransactionError(
      problem.kind,
      `the unit of work's transaction cannot be lent to @nestjs-cls/transactional: ${problem.cause}; a service the handler calls through TransactionHost (@Transactional()) would commit outside the unit, and again on redelivery, so the handler was not called. ${problem.fix}`,
    );
  }
}
