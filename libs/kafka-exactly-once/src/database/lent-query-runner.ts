import type { QueryRunner } from 'typeorm';
import { CALL_IS_OVER, type HandlerCall } from './handler-calls';
import { statementEffect } from './transaction-control';
import { UnitConnectionError } from './unit-connection';

/** What a handler's call was lent of a TypeORM unit: its own EntityManager over a guarded view of the unit's QueryRunner. */
export interface LentQueryRunner {
  readonly runner: QueryRunner;
  /** The handler call the view is lent to: its statements, however late, are checked against it (runInCall). */
  readonly call: HandlerCall;
  /**
   * From now on every statement through this view is refused (the handler's call is over). A transaction of the
   * call's own left open (`manager.transaction(...)` not awaited) is undone, and the call fails (rejects).
   */
  close(failed: boolean): Promise<void>;
}

const ENDS_UNIT = "a handler cannot end its unit of work's transaction: the library commits it with the record's offset (throw from the handler to undo the record's writes)";

/**
 * A view of the unit of work's TypeORM QueryRunner for one handler call (what `ctx.manager` runs on). It is the
 * runner itself for everything but what could end or outlive the unit's transaction:
 * - once `close` is called (the call is over), every statement is refused: an unawaited promise, a timer or a
 *   callback of the call cannot run inside the unit after the handler's part of it, nor after its COMMIT;
 * - a statement text that would end or change the unit's transaction (COMMIT, ROLLBACK, END, PREPARE TRANSACTION,
 *   SET TRANSACTION, several statements with one of them...) is refused; TypeORM's own nested transactions
 *   (`manager.transaction(...)`, savepoints) go through as they are;
 * - committing or rolling back the unit's own level of the transaction, and releasing the runner, are refused.
 *
 * A JavaScript Proxy, so that TypeORM's own methods run with `this` being the view (their statements are checked
 * too) while every field they read or write is the runner's (the transaction depth stays one).
 */
export function lentQueryRunner(
  runner: QueryRunner,
  /** The handler call it is lent to: over already when the view is built after the call (a closed view). */
  call: HandlerCall = { live: true },
  /** The runner's transaction depth when the call began. */
  depthAtOpen: number | undefined = (runner as unknown as { transactionDepth?: number }).transactionDepth,
): LentQueryRunner {
  // The EntityManager built over the view sets itself as the view's manager: kept here, not on the unit's runner.
  let manager: unknown;
  const refused = (): UnitConnectionError | undefined => (call.live ? undefined : new UnitConnectionError(CALL_IS_OVER));
  const checked = (text: unknown): UnitConnectionError | undefined => {
    const late = refused();
    if (late) return late;
    const effect = statementEffect(typeof text === 'string' ? text : '');
    if (effect.kind === 'other') return undefined;
    if (effect.kind === 'refused') return new UnitConnectionError(`a statement that would end or change the unit of work's transaction was refused: ${effect.why}`);
    return new UnitConnectionError(`${ENDS_UNIT}; for a transaction of the handler's own, use manager.transaction(...) (a savepoint)`);
  };
  const depth = () => (runner as unknown as { transactionDepth?: number }).transactionDepth ?? 1;
  /**
   * The end of a transaction of the call's own, after the call: refused, and its level forgotten as TypeORM would
   * forget it (TypeORM counts a level once its SAVEPOINT is answered, which may be after the call; every statement of
   * that transaction after the call was refused, so its savepoint holds nothing).
   */
  const lateEnd = (late: UnitConnectionError): Promise<never> => {
    if (depthAtOpen !== undefined && depth() > depthAtOpen) (runner as unknown as { transactionDepth: number }).transactionDepth = depth() - 1;
    return Promise.reject(late);
  };
  const guarded: Record<string, (...args: any[]) => unknown> = {
    query(this: QueryRunner, text: string, ...rest: unknown[]) {
      const refusal = checked(text);
      return refusal ? Promise.reject(refusal) : (runner.query as (...a: unknown[]) => unknown).call(this, text, ...rest);
    },
    stream(this: QueryRunner, text: string, ...rest: unknown[]) {
      const refusal = checked(text);
      return refusal ? Promise.reject(refusal) : (runner.stream as (...a: unknown[]) => unknown).call(this, text, ...rest);
    },
    startTransaction(this: QueryRunner, ...args: unknown[]) {
      const late = refused();
      return late ? Promise.reject(late) : (runner.startTransaction as (...a: unknown[]) => unknown).apply(this, args);
    },
    commitTransaction(this: QueryRunner) {
      const late = refused();
      if (late) return lateEnd(late);
      return depth() <= 1 ? Promise.reject(new UnitConnectionError(ENDS_UNIT)) : runner.commitTransaction.call(this);
    },
    rollbackTransaction(this: QueryRunner) {
      const late = refused();
      if (late) return lateEnd(late);
      return depth() <= 1 ? Promise.reject(new UnitConnectionError("a handler cannot roll back its unit of work's transaction: throw from the handler instead")) : runner.rollbackTransaction.call(this);
    },
    release() {
      return Promise.reject(new UnitConnectionError("a handler cannot release its unit of work's connection: the library releases it"));
    },
  };
  const view = new Proxy(runner, {
    get(target, property, receiver) {
      if (property === 'manager') return manager;
      // Once the call is over, TypeORM's own checks would refuse with "already released" when the unit has ended by
      // then, or let the statement through when it has not: our refusal, with its reason, comes first either way.
      if (property === 'isReleased' && !call.live) return false;
      if (typeof property === 'string' && Object.prototype.hasOwnProperty.call(guarded, property)) return guarded[property];
      return Reflect.get(target, property, receiver);
    },
    set(target, property, value) {
      if (property === 'manager') {
        manager = value;
        return true;
      }
      return Reflect.set(target, property, value);
    },
  });
  return {
    runner: view,
    call,
    close: async (failed: boolean) => {
      call.live = false;
      const depth = (runner as unknown as { transactionDepth?: number }).transactionDepth;
      if (depthAtOpen === undefined || depth === undefined || depth <= depthAtOpen) return;
      // TypeORM names the savepoint of a transaction opened at depth d `typeorm_${d}`. Its depth is reset whatever
      // happens: left higher, the unit's own commit would release a savepoint instead of committing.
      const name = `typeorm_${depthAtOpen}`;
      (runner as unknown as { transactionDepth: number }).transactionDepth = depthAtOpen;
      // A failed call's attempt is undone whole by the unit (its savepoint, or the unit's rollback).
      if (failed || runner.isReleased) return;
      await runner.query(`ROLLBACK TO SAVEPOINT ${name}`);
      await runner.query(`RELEASE SAVEPOINT ${name}`);
      const left = depth - depthAtOpen;
      throw new UnitConnectionError(
        `the handler's call returned with ${left} transaction${left === 1 ? '' : 's'} of its own still open (manager.transaction(...) not awaited): its writes were undone; await the transaction inside the handler's call`,
      );
    },
  };
}
