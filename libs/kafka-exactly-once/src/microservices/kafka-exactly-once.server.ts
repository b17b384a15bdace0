import { Injectable, Logger } from '@nestjs/common';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';
import { CustomTransportStrategy, MessageHandler, Server } from '@nestjs/microservices';
import type { IdempotentHandlerOptions } from '../decorators/idempotent-handler.decorator';
import { HandlerRegistrationError } from '../errors/handler-registration.error';
import { RequestResponseNotSupportedError } from '../errors/request-response-not-supported.error';
import type { TransportHandlerSpec } from '../kafka-exactly-once.explorer';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';

/** `Transport` id of KafkaExactlyOnceServer: `@EventPattern('topic', KAFKA_EXACTLY_ONCE_TRANSPORT)` binds to it only. */
export const KAFKA_EXACTLY_ONCE_TRANSPORT = Symbol('kafka-exactly-once');

// Metadata keys of @nestjs/microservices' pattern decorators (its `constants`, not part of its public entry).
const PATTERN_METADATA = 'microservices:pattern';
const PATTERN_HANDLER_METADATA = 'microservices:handler_type';
const TRANSPORT_METADATA = 'microservices:transport';
const EVENT_HANDLER = 2; // PatternHandler.EVENT

/** What `@EventPattern(topic, extras)` may carry for this transport. */
export interface KafkaExactlyOnceEventExtras {
  /** Full name of the topic's Avro schema; default: the module's `topics[topic].schema`. */
  schema?: string;
  /** The handler's retry policy over the module's (as `@IdempotentHandler({ retry })`). */
  retry?: IdempotentHandlerOptions['retry'];
}

interface BoundPattern {
  pattern: unknown;
  isEventHandler: boolean;
  extras: Record<string, unknown>;
}

/**
 * A Nest microservice transport over the module: `@EventPattern` handlers bound to it are consumed with
 * KafkaExactlyOnceModule's protocol (inbox, one transaction per unit of work, outputs replayed from the inbox,
 * dead letters, `@OrderedEvent` parking) in the module's consumer group, through Nest's pipeline (guards,
 * interceptors, pipes, exception filters). `@Payload()` is the decoded event, `@Ctx()` the `EventContext`
 * (`manager`, `emit`, `message`, `attempt`). Its options are the module's: list it as a provider of a module that
 * imports `KafkaExactlyOnceModule.forRoot(...)`.
 *
 * @example
 * // main.ts: a microservice
 * const app = await NestFactory.createMicroservice(AppModule, {
 *   inject: [KafkaExactlyOnceServer],
 *   useFactory: (server: KafkaExactlyOnceServer) => ({ strategy: server }),
 * });
 * await app.listen();
 * // or a hybrid application
 * app.connectMicroservice({ strategy: app.get(KafkaExactlyOnceServer) });
 * await app.startAllMicroservices();
 */
@Injectable()
export class KafkaExactlyOnceServer extends Server implements CustomTransportStrategy {
  override readonly transportId = KAFKA_EXACTLY_ONCE_TRANSPORT;
  protected override readonly logger = new Logger(KafkaExactlyOnceServer.name);
  private readonly bound: BoundPattern[] = [];
  private readonly scanner = new MetadataScanner();

  constructor(
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
    private readonly modules: ModulesContainer,
  ) {
    super();
  }

  /** Nest binds each pattern handler here before the application's init hooks; the module finds them at its init. */
  override addHandler(pattern: unknown, callback: MessageHandler, isEventHandler = false, extras: Record<string, unknown> = {}): void {
    super.addHandler(pattern, callback, isEventHandler, extras);
    if (this.bound.length === 0) this.lifecycle.useTransport(KafkaExactlyOnceServer.name, () => this.handlerSpecs());
    this.bound.push({ pattern, isEventHandler, extras });
  }

  /**
   * The module's consumer starts at application bootstrap, with its own handlers and these: in a
   * microservice that was before `listen`, in a hybrid application (`startAllMicroservices` before
   * `app.listen`) it is after.
   */
  listen(callback: (...optionalParams: unknown[]) => unknown): void {
    this.logger.log(`${this.bound.length} @EventPattern handler(s) consumed through KafkaExactlyOnceModule`);
    callback();
  }

  /** The module drains the unit of work in flight and disconnects in its shutdown hooks. */
  close(): void {}

  on(): never {
    throw new Error('KafkaExactlyOnceServer has no events to listen to: see the module\'s health indicators and metrics');
  }

  unwrap<T>(): T {
    return this.lifecycle as T;
  }

  private handlerSpecs(): TransportHandlerSpec[] {
    const methods = this.eventMethods();
    return this.bound.map(({ pattern, isEventHandler, extras }) => {
      const found = methods.filter((m) => m.patterns.some((p) => p === pattern));
      const name = found.map((m) => m.name).join(', ') || `pattern ${JSON.stringify(pattern)}`;
      if (!isEventHandler) throw new HandlerRegistrationError(name, new RequestResponseNotSupportedError('@MessagePattern').message);
      if (typeof pattern !== 'string' || pattern.length === 0) {
        throw new HandlerRegistrationError(name, `the pattern of an @EventPattern handler is the topic it consumes, a non-empty string (got ${JSON.stringify(pattern)})`);
      }
      if (found.length !== 1) {
        throw new HandlerRegistrationError(name, `topic "${pattern}" needs exactly one @EventPattern handler in the consumer group (found ${found.length})`);
      }
      const [method] = found;
      const { schema, retry } = extras as KafkaExactlyOnceEventExtras;
      if (schema !== undefined && (typeof schema !== 'string' || schema.length === 0)) {
        throw new HandlerRegistrationError(method.name, `@EventPattern extras "schema" must be a schema's full name (got ${JSON.stringify(schema)})`);
      }
      return { name: method.name, instance: method.instance, methodName: method.methodName, moduleKey: method.moduleKey, isStatic: method.isStatic, topic: pattern, schema, retry };
    });
  }

  /** The @EventPattern methods of the application's controllers that may be bound to this transport. */
  private eventMethods(): Array<{ name: string; instance: object; methodName: string; moduleKey: string; isStatic: boolean; patterns: unknown[] }> {
    const found = [];
    for (const [moduleKey, moduleRef] of this.modules.entries()) {
      for (const wrapper of moduleRef.controllers.values()) {
        const instance = wrapper.instance as Record<string, unknown> | undefined;
        if (!instance) continue;
        const prototype = Object.getPrototypeOf(instance) as object;
        for (const methodName of this.scanner.getAllMethodNames(prototype)) {
          const method = (prototype as Record<string, unknown>)[methodName] as object;
          if (Reflect.getMetadata(PATTERN_HANDLER_METADATA, method) !== EVENT_HANDLER) continue;
          const transport = Reflect.getMetadata(TRANSPORT_METADATA, method) as unknown;
          if (transport !== undefined && transport !== KAFKA_EXACTLY_ONCE_TRANSPORT) continue;
          const patterns = (Reflect.getMetadata(PATTERN_METADATA, method) as unknown[] | undefined) ?? [];
          found.push({ name: `${instance.constructor.name}.${methodName}`, instance, methodName, moduleKey, isStatic: wrapper.isDependencyTreeStatic(), patterns });
        }
      }
    }
    return found;
  }
}
