import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * One handler call's use of its unit of work's connection: live from the call's start until the call is over (its
 * promise settled, or its deadline passed). The call runs in an async context of its own (`runInCall`), which
 * whatever it starts inherits (a promise, a timer, a callback, a TypeORM subscriber): a statement that comes from
 * the context of a call that is over is refused wherever it reaches the unit's connection.
 */
export interface HandlerCall {
  live: boolean;
}

const calls = new AsyncLocalStorage<HandlerCall>();

/** Runs `fn` as the handler call `call`. */
export function runInCall<T>(call: HandlerCall, fn: () => Promise<T>): Promise<T> {
  return calls.run(call, fn);
}

/** The handler call the running code comes from, if any (live or over). */
export function currentCall(): HandlerCall | undefined {
  return calls.getStore();
}

/** Why a statement sent now from a handler call that is over is refused, for every data layer alike. */
export const CALL_IS_OVER =
  "the handler's call this data layer was lent to is over (a statement not awaited, or sent from a timer or callback after the call returned): await every statement inside the handler's call";
