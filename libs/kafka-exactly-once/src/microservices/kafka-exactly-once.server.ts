import { Injectable, Logger } from '@nestjs/common';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';
import { CustomTransportStrategy, Server } from '@nestjs/microservices';
import type { Subscription } from 'rxjs';
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
const PATTERN_EXTRAS_METADATA = 'microservices:pattern_extras';
const EVENT_HANDLER = 2; // PatternHandler.EVENT

/** What `@EventPattern(topic, extras)` may carry for this transport. */
export interface KafkaExactlyOnceEventExtras {
  /** What the topic's values are (`avro`, `json`, `protobuf`); default: the module's `topics[topic].format`, else `avro`. */
  format?: IdempotentHandlerOptions['format'];
  /** Full name of the topic's Avro schema; default: the module's `topics[topic].schema`. */
  schema?: string;
  /** Validation before the handler (as `@IdempotentHandler({ validate })`): a DTO class or a Standard Schema. */
  validate?: IdempotentHandlerOptions['validate'];
  /** JSON reading over the module's `json` option (as `@IdempotentHandler({ json })`). */
  json?: IdempotentHandlerOptions['json'];
  /** Format `json`: false reads the topic as plain JSON only (as `@IdempotentHandler({ registryFraming })`). */
  registryFraming?: IdempotentHandlerOptions['registryFraming'];
  /** The handler's retry policy over the module's (as `@IdempotentHandler({ retry })`). */
  retry?: IdempotentHandlerOptions['retry'];
  /** Non-blocking retries through retry topics (as `@IdempotentHandler({ retryTopics })`, docs/retries.md). */
  retryTopics?: IdempotentHandlerOptions['retryTopics'];
  /** Where a record without a `message-id` header takes its identity from (as `@IdempotentHandler({ messageIdFrom })`). */
  messageIdFrom?: IdempotentHandlerOptions['messageIdFrom'];
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
  private readonly scanner = new MetadataScanner();
  private readonly registration: Subscription;
  private refused?: Error;

  constructor(
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
    private readonly modules: ModulesContainer,
  ) {
    super();
    // A Nest microservice registers its transport as an RPC target when it is created, before the application's
    // init hooks in every way of starting one (createMicroservice, connectMicroservice, init() or listen()
    // first): from then on the module consumes the @EventPattern handlers Nest binds to this transport.
    this.registration = this.modules.getRpcTargetRegistry().subscribe((target) => {
      if (target !== this) return;
      try {
        this.lifecycle.useTransport(this, KafkaExactlyOnceServer.name, () => this.handlerSpecs());
      } catch (err) {
        // Too late (the module found its handlers already): the microservice's listen fails with it.
        this.refused = err as Error;
      }
    });
  }

  /**
   * The module's consumer starts at application bootstrap, with its own handlers and these: in a
   * microservice that was before `listen`, in a hybrid application (`startAllMicroservices` before
   * `app.listen`) it is after.
   */
  listen(callback: (...optionalParams: unknown[]) => unknown): void {
    if (this.refused) {
      callback(this.refused);
      return;
    }
    // Counted now: in a hybrid application listen comes before the module's init hooks found the handlers.
    let count: number;
    try {
      count = this.handlerSpecs().length;
    } catch (err) {
      callback(err); // the same error the module's boot reports
      return;
    }
    this.logger.log(`${count} @EventPattern handler(s) bound to KafkaExactlyOnceServer, consumed by KafkaExactlyOnceModule in group ${this.lifecycle.groupId}`);
    callback();
  }

  /** The module drains the unit of work in flight and disconnects in its shutdown hooks. */
  close(): void {
    this.registration.unsubscribe();
  }

  on(): never {
    throw new Error("KafkaExactlyOnceServer has no events to listen to: see the module's health indicators and metrics");
  }

  unwrap<T>(): T {
    return this.lifecycle as T;
  }

  /**
   * The pattern handlers of the application's controllers that Nest binds to this transport (those without a
   * transport, and those of KAFKA_EXACTLY_ONCE_TRANSPORT), as the module's handler specs; what cannot be
   * consumed exactly once is a boot error.
   */
  private handlerSpecs(): TransportHandlerSpec[] {
    const specs: TransportHandlerSpec[] = [];
    for (const [moduleKey, moduleRef] of this.modules.entries()) {
      for (const wrapper of moduleRef.controllers.values()) {
        const instance = wrapper.instance as Record<string, unknown> | undefined;
        if (!instance) continue;
        const prototype = Object.getPrototypeOf(instance) as object;
        for (const methodName of this.scanner.getAllMethodNames(prototype)) {
          const method = (prototype as Record<string, unknown>)[methodName] as object;
          const kind = Reflect.getMetadata(PATTERN_HANDLER_METADATA, method) as number | undefined;
          if (kind === undefined) continue;
          const transport = Reflect.getMetadata(TRANSPORT_METADATA, method) as unknown;
          if (transport !== undefined && transport !== KAFKA_EXACTLY_ONCE_TRANSPORT) continue;
          const name = `${instance.constructor.name}.${methodName}`;
          if (kind !== EVENT_HANDLER) throw new HandlerRegistrationError(name, new RequestResponseNotSupportedError('@MessagePattern').message);
          const extras = (Reflect.getMetadata(PATTERN_EXTRAS_METADATA, method) ?? {}) as KafkaExactlyOnceEventExtras;
          if (extras.schema !== undefined && (typeof extras.schema !== 'string' || extras.schema.length === 0)) {
            throw new HandlerRegistrationError(name, `@EventPattern extras "schema" must be a schema's full name (got ${JSON.stringify(extras.schema)})`);
          }
          for (const pattern of (Reflect.getMetadata(PATTERN_METADATA, method) as unknown[] | undefined) ?? []) {
            if (typeof pattern !== 'string' || pattern.length === 0) {
              throw new HandlerRegistrationError(name, `the pattern of an @EventPattern handler is the topic it consumes, a non-empty string (got ${JSON.stringify(pattern)})`);
            }
            specs.push({ name, instance, methodName, moduleKey, isStatic: wrapper.isDependencyTreeStatic(), topic: pattern, format: extras.format, schema: extras.schema, validate: extras.validate, json: extras.json, registryFraming: extras.registryFraming, retry: extras.retry, retryTopics: extras.retryTopics, messageIdFrom: extras.messageIdFrom, source: '@EventPattern extras' });
          }
        }
      }
    }
    return specs;
  }
}
