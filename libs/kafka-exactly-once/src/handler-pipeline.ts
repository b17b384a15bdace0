import { Injectable } from '@nestjs/common';
import type { ParamData } from '@nestjs/common';
import { ExternalContextCreator } from '@nestjs/core';
import { isObservable, lastValueFrom } from 'rxjs';

/** Where Nest keeps a method's parameter decorators (`ROUTE_ARGS_METADATA` of @nestjs/common). */
const ROUTE_ARGS_METADATA = '__routeArguments__';

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
 * Nest's request pipeline around a Kafka handler, as for any microservice handler: guards, interceptors,
 * pipes (for parameters that have decorators: `@Payload()`, `@Ctx()`) and exception filters, with the
 * application's global ones, in the `rpc` context (`context.switchToRpc().getData()` is the event,
 * `getContext()` the EventContext). An exception that escapes them rejects the returned promise with the
 * original error (Nest's RPC exception filter would replace it with `{ status: 'error' }`): the engine needs it
 * to tell a failed handler (retried, then dead-lettered or parked) from a fault of PostgreSQL (retried without
 * end). So does an Observable that errors, as a filter in the RPC style returns. A filter that returns anything
 * else has handled the exception: the record counts as handled.
 */
@Injectable()
export class HandlerPipeline {
  constructor(private readonly contexts: ExternalContextCreator) {}

  create(target: PipelineTarget): (...args: unknown[]) => Promise<unknown> {
    const method = (target.instance as Record<string, unknown>)[target.methodName] as (...args: unknown[]) => unknown;
    let contexts: ExternalContextCreator = this.contexts;
    if (target.moduleKey) {
      // NOTE: ExternalContextCreator finds the module of a provider, not of a controller (it searches providers
      // only), and drops enhancers given by class when it finds none. The key is known here: use it.
      const moduleKey = target.moduleKey;
      contexts = Object.create(this.contexts, {
        getHostModuleKey: { value: () => moduleKey },
        getContextModuleKey: { value: () => moduleKey },
      }) as ExternalContextCreator;
    }
    const call = contexts.create(target.instance as never, method, target.methodName, ROUTE_ARGS_METADATA, rpcParams, undefined, undefined, undefined, 'rpc');
    return async (...args: unknown[]) => {
      const result: unknown = await call(...args);
      // An exception filter in the RPC style answers with an Observable that errors (`throwError(...)`), and a
      // handler may return an Observable: either fails the call when it errors, instead of passing for success.
      if (!isObservable(result)) return result;
      try {
        return await lastValueFrom(result, { defaultValue: undefined });
      } catch (err) {
        // An RPC filter errors with what it answers the caller (`{ status: 'error', message }`): keep it as the cause.
        if (err instanceof Error) throw err;
        throw new Error(`the handler's exception filter answered ${JSON.stringify(err)}`, { cause: err });
      }
    };
  }
}
