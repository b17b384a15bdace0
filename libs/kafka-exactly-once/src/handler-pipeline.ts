import { HttpException, HttpStatus, Injectable } from '@nestjs/common';
import type { ParamData } from '@nestjs/common';
import { ExternalContextCreator } from '@nestjs/core';
import { AsyncLocalStorage } from 'async_hooks';
import { isObservable, lastValueFrom } from 'rxjs';
import { REFUSED_BY_PIPELINE } from './engine/error-classification';

/** Where Nest keeps a method's parameter decorators (`ROUTE_ARGS_METADATA` of @nestjs/common). */
const ROUTE_ARGS_METADATA = '__routeArguments__';
/** Where Nest keeps the guards, interceptors, pipes and exception filters bound to a class or a method (@nestjs/common's constants). */
const ENHANCER_METADATA = ['__guards__', '__interceptors__', '__pipes__', '__exceptionFilters__'];

/** Whether anything of Nest's pipeline applies to this handler: an enhancer on its class or method, or a parameter decorator. */
function hasPipeline(target: PipelineTarget, method: object): boolean {
  const type = target.instance.constructor;
  if (ENHANCER_METADATA.some((key) => Reflect.getMetadata(key, type) !== undefined || Reflect.getMetadata(key, method) !== undefined)) return true;
  return Reflect.getMetadata(ROUTE_ARGS_METADATA, type, target.methodName) !== undefined;
}

/**
 * The values of `RpcParamtype` in @nestjs/microservices (`@Payload()` and `@Ctx()`), which this module reads
 * without depending on that package.
 */
const RPC_PAYLOAD = 3;
const RPC_CONTEXT = 6;

/** `@Payload()` is the event (or one of its fields: `@Payload('accountId')`), `@Ctx()` the EventContext. */
const rpcParams = {
  exchangeKeyForValue(type: number, data: ParamData | undefined, args: unknown[]): unknown {
    if (type === RPC_PAYLOAD) {
      const payload = args[0] as Record<string, unknown> | undefined;
      return data !== undefined && payload !== null && typeof payload === 'object' ? payload[data as string] : payload;
    }
    if (type === RPC_CONTEXT) return args[1];
    return undefined;
  },
};

/**
 * What a guard, a pipe or an interceptor throws to refuse an event before its handler runs: an HttpException of
 * a 4xx status (ForbiddenException of a guard that returns false, BadRequestException of a ValidationPipe), but
 * not 408 or 429 (a timeout, a rate limit: they pass), or an RpcException of @nestjs/microservices.
 */
export function isRefusal(err: unknown): boolean {
  if (err instanceof HttpException) {
    const status = err.getStatus();
    return status >= 400 && status < 500 && status !== HttpStatus.REQUEST_TIMEOUT && status !== HttpStatus.TOO_MANY_REQUESTS;
  }
  for (let proto = typeof err === 'object' && err !== null ? Object.getPrototypeOf(err) : null; proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    if ((proto as { constructor?: { name?: string } }).constructor?.name === 'RpcException') return true;
  }
  return false;
}

/** An Error for what a pipeline rejected with (an RPC filter answers with `{ status: 'error', message }`). */
function asError(value: unknown): unknown {
  if (value instanceof Error) return value;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return new Error(`the handler's pipeline failed with ${text.slice(0, 300)}`, { cause: value });
}

async function settle(answer: unknown): Promise<unknown> {
  return isObservable(answer) ? lastValueFrom(answer, { defaultValue: undefined }) : answer;
}

interface ContextCreator {
  getGlobalMetadata?(...args: unknown[]): unknown[];
}
interface ExceptionsHandler {
  next(exception: unknown, host: unknown): unknown;
  invokeCustomFilters(exception: unknown, host: unknown): unknown;
}
interface FiltersContextCreator extends ContextCreator {
  create(...args: unknown[]): ExceptionsHandler;
}

/** The same enhancers, without the application's global ones. */
function withoutGlobals<T extends ContextCreator>(creator: T): T {
  return Object.create(creator, { getGlobalMetadata: { value: () => [] } }) as T;
}

/**
 * The handler's exception filters, without Nest's default one (it would log every failed attempt at error
 * level, with messages that can carry a record's bytes; the engine logs each outcome once, bounded), and
 * without their power to answer for the exception: a filter sees it (and may map it by throwing another Error),
 * then the handler has failed all the same.
 */
function observingFilters(filters: FiltersContextCreator): FiltersContextCreator {
  return Object.create(filters, {
    create: {
      value: (...args: unknown[]): ExceptionsHandler => {
        const handler = filters.create.apply(filters, args);
        if (typeof handler?.invokeCustomFilters !== 'function') return handler;
        handler.next = async (exception: unknown, host: unknown) => {
          const answer = handler.invokeCustomFilters(exception, host);
          if (answer) {
            try {
              await settle(answer);
            } catch (mapped) {
              if (mapped instanceof Error) throw mapped;
            }
          }
          throw exception;
        };
        return handler;
      },
    },
  }) as FiltersContextCreator;
}

/** One call of a handler through the pipeline: whether its method ran, and how it ended. */
interface Invocation {
  entered: boolean;
  running: Promise<unknown>[];
  failed?: { error: unknown };
}

export interface PipelineTarget {
  /** The provider or controller instance. */
  instance: object;
  methodName: string;
  /**
   * Key of the module that declares the class, when it is a controller: Nest looks up the class's guards,
   * interceptors, pipes and filters given by class (`@UseGuards(TenantGuard)`) in that module, and finds
   * providers' modules by itself but not controllers'.
   */
  moduleKey?: string;
}

/**
 * Nest's request pipeline around a Kafka handler: the guards, interceptors, pipes (for parameters that have
 * decorators: `@Payload()`, `@Ctx()`) and exception filters bound to its class or method, in the `rpc` context
 * (`context.switchToRpc().getData()` is the event, `getContext()` the EventContext). The application's global
 * enhancers are left out: an HTTP application's global guard would refuse every event.
 *
 * What money needs from it, whatever the enhancers do:
 * - A handler that throws has failed: its writes are rolled back. No filter's answer and no interceptor's
 *   `catchError` turns that into success (a filter may map the error by throwing another Error).
 * - The original error reaches the engine, which tells a failed handler (retried, then dead-lettered or parked)
 *   from a fault of PostgreSQL (retried without end).
 * - A handler an interceptor gave up on (a timeout) is waited for: it writes through the unit's transaction.
 * - A refusal before the handler ran (see isRefusal) is not retried: the same event meets it every time.
 */
@Injectable()
export class HandlerPipeline {
  private readonly invocations = new AsyncLocalStorage<Invocation>();

  constructor(private readonly contexts: ExternalContextCreator) {}

  create(target: PipelineTarget): (...args: unknown[]) => Promise<unknown> {
    const method = (target.instance as Record<string, unknown>)[target.methodName] as (...args: unknown[]) => unknown;
    if (!hasPipeline(target, method)) {
      // Nothing of the pipeline applies: the method is called as the pipeline would call it, without its cost per
      // event (on Node.js before 24, the AsyncLocalStorage below makes every promise of the process pay a hook).
      const instance = target.instance;
      return async (...args: unknown[]) => {
        try {
          return await settle(await method.apply(instance, args));
        } catch (err) {
          throw asError(err);
        }
      };
    }
    const base = this.contexts as unknown as Record<string, ContextCreator | undefined>;
    const overrides: PropertyDescriptorMap = {};
    for (const name of ['guardsContextCreator', 'interceptorsContextCreator', 'pipesContextCreator']) {
      const creator = base[name];
      if (creator) overrides[name] = { value: withoutGlobals(creator) };
    }
    const filters = base.filtersContextCreator as FiltersContextCreator | undefined;
    if (filters) overrides.filtersContextCreator = { value: observingFilters(withoutGlobals(filters)) };
    if (target.moduleKey) {
      // NOTE: ExternalContextCreator finds the module of a provider, not of a controller (it searches providers
      // only), and drops enhancers given by class when it finds none. The key is known here: use it.
      const moduleKey = target.moduleKey;
      overrides.getHostModuleKey = { value: () => moduleKey };
      overrides.getContextModuleKey = { value: () => moduleKey };
    }
    const contexts = Object.create(this.contexts, overrides) as ExternalContextCreator;
    const call = contexts.create(target.instance as never, this.tracked(method), target.methodName, ROUTE_ARGS_METADATA, rpcParams, undefined, undefined, undefined, 'rpc');

    return async (...args: unknown[]) => {
      const invocation: Invocation = { entered: false, running: [] };
      let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
      try {
        // A handler may return an Observable: it fails the call when it errors.
        outcome = { ok: true, value: await settle(await this.invocations.run(invocation, () => call(...args))) };
      } catch (err) {
        outcome = { ok: false, error: err };
      }
      await Promise.allSettled(invocation.running);
      if (!outcome.ok) {
        const error = asError(outcome.error);
        if (!invocation.entered && isRefusal(error)) {
          try {
            Object.defineProperty(error, REFUSED_BY_PIPELINE, { value: true });
          } catch {
            // A frozen error: it is retried like any other, then dead-lettered.
          }
        }
        throw error;
      }
      if (invocation.failed) throw asError(invocation.failed.error);
      return outcome.value;
    };
  }

  /**
   * The method, noting in the current invocation that it ran and how it ended. It carries the method's
   * metadata and name, which guards and interceptors read through `context.getHandler()`.
   */
  private tracked(method: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
    const invocations = this.invocations;
    const tracked = function (this: unknown, ...args: unknown[]): unknown {
      const invocation = invocations.getStore();
      if (!invocation) return method.apply(this, args);
      invocation.entered = true;
      let result: unknown;
      try {
        result = method.apply(this, args);
      } catch (err) {
        invocation.failed ??= { error: err };
        throw err;
      }
      if (result instanceof Promise) {
        invocation.running.push(
          result.then(undefined, (err: unknown) => {
            invocation.failed ??= { error: err };
          }),
        );
      }
      return result;
    };
    for (const key of Reflect.getMetadataKeys(method)) Reflect.defineMetadata(key, Reflect.getMetadata(key, method), tracked);
    Object.defineProperty(tracked, 'name', { value: method.name });
    return tracked;
  }
}
