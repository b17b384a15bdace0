import { Inject, Injectable, Logger } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { IdempotentHandlerOptions } from './decorators/idempotent-handler.decorator';
import type { OrderedEventOptions } from './decorators/ordered-event.decorator';
import { HandlerRegistrationError } from './errors/handler-registration.error';
import { InvalidOptionsError } from './errors/invalid-options.error';
import { registryFramingOf, resolveJsonLimits, resolveRetry } from './options/resolve-options';
import { eventReader, type EventReader } from './formats/event-reader';
import { eventValidator, validationName, validationProblem, type EventValidator } from './formats/event-validator';
import type { JsonLimits } from './interfaces/format-options.interface';
import { HandlerMetadataAccessor } from './handler-metadata.accessor';
import { RESOLVED_OPTIONS } from './kafka-exactly-once.constants';
import type { ResolvedOptions } from './options/resolved-options';
import { SchemaRegistry, type LoadedSchema } from './formats/avro/schema-registry';
import type { HandlerDefinition } from './engine/handler-definition';
import { HandlerPipeline } from './handler-pipeline';
import { resolveRetryTiers } from './retry/retry-tiers';
import { eventKeySource, messageIdFromProblem } from './engine/event-identity';
import { assertPeersInstalled } from './optional-peers';
import { formatPeersNeeded } from './formats/registry-boot';

/**
 * A handler that a transport found for the module (an `@EventPattern` method bound to KafkaExactlyOnceServer):
 * the module checks it like an @IdempotentHandler and consumes its topic in the same consumer group.
 */
export interface TransportHandlerSpec {
  /** `Class.method`, for logs and errors. */
  name: string;
  instance: object;
  methodName: string;
  /** Key of the module that declares the class (a controller's enhancers given by class are found there). */
  moduleKey?: string;
  /** Whether the class and everything it depends on are singletons. */
  isStatic: boolean;
  /** Topic, without the module's topicPrefix. */
  topic: string;
  /** What the topic's values are; undefined: the module's `topics[topic].format`, else `avro`. */
  format?: IdempotentHandlerOptions['format'];
  /** Schema full name; undefined: the module's `topics[topic].schema`. */
  schema?: string;
  /** How each event is validated before the handler (a DTO class or a Standard Schema). */
  validate?: IdempotentHandlerOptions['validate'];
  /** JSON reading over the module's `json` option. */
  json?: IdempotentHandlerOptions['json'];
  /** Format `json`: whether values in the registry's framing are read as such; undefined: the topic's, else true. */
  registryFraming?: IdempotentHandlerOptions['registryFraming'];
  retry?: IdempotentHandlerOptions['retry'];
  retryTopics?: IdempotentHandlerOptions['retryTopics'];
  /** Where a record without a `message-id` takes its identity from; undefined: the module's `topics[topic].messageIdFrom`. */
  messageIdFrom?: IdempotentHandlerOptions['messageIdFrom'];
  /** Where the options come from, for boot errors: `@EventPattern extras`. */
  source?: string;
}

/** Finds the @IdempotentHandler methods of the application's providers and checks them (fail fast at boot). */
@Injectable()
export class KafkaExactlyOnceExplorer {
  private readonly logger = new Logger(KafkaExactlyOnceExplorer.name);

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: HandlerMetadataAccessor,
    private readonly registry: SchemaRegistry,
    private readonly pipeline: HandlerPipeline,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
  ) {}

  /** The @IdempotentHandler methods of the application's providers, and the handlers transports found. */
  explore(transportHandlers: TransportHandlerSpec[] = []): HandlerDefinition[] {
    const handlers: HandlerDefinition[] = [];
    for (const { wrapper, name, methodName, method } of this.methodsOf(this.discovery.getProviders())) {
      const metadata = this.accessor.idempotentHandler(method);
      const ordering = this.accessor.orderedEvent(method);
      if (metadata) {
        handlers.push(
          this.define({ name, instance: wrapper.instance as object, methodName, isStatic: wrapper.isDependencyTreeStatic(), topic: metadata.topic, format: metadata.format, schema: metadata.schema, validate: metadata.validate, json: metadata.json, registryFraming: metadata.registryFraming, retry: metadata.retry, retryTopics: metadata.retryTopics, messageIdFrom: metadata.messageIdFrom }, metadata.batch ?? false, ordering),
        );
      } else if (ordering) {
        throw new HandlerRegistrationError(name, '@OrderedEvent needs @IdempotentHandler on the same method (it orders the records that handler consumes)');
      }
    }
    for (const spec of transportHandlers) {
      handlers.push(this.define(spec, false, this.accessor.orderedEvent((spec.instance as Record<string, (...args: unknown[]) => unknown>)[spec.methodName])));
    }
    this.checkUnique(handlers);
    this.warnUnconsumedOrdering(handlers);
    if (handlers.length > 0 && !this.options.groupId) {
      throw new HandlerRegistrationError(handlers[0].name, 'handlers need a consumer group: set the module option "groupId"');
    }
    // Before anything is consumed: a record must never be refused for a package an install provides.
    assertPeersInstalled(formatPeersNeeded(this.options, handlers.map((h) => ({ name: h.name, format: h.reader.format }))));
    for (const handler of handlers) {
      const order = `${handler.invokeBatch ? ', in batches' : ''}${handler.ordering ? `, @OrderedEvent by ${handler.ordering.key ? 'a key function' : 'the record key'}${handler.ordering.lanes > 1 ? `, ${handler.ordering.lanes} key lanes` : ''}` : ''}${handler.retryTopics ? `, retry topics after ${handler.retryTopics.delaysMs.map((ms) => `${ms} ms`).join(', ')}` : ''}${handler.messageIdFrom ? `, records without a message id known by ${handler.messageIdFrom.describe}` : ''}`;
      this.logger.log(`${handler.name} handles ${handler.topic} (${handler.reader.describe}, group ${this.options.groupId}${order})`);
    }
    return handlers;
  }

  private define(spec: TransportHandlerSpec, batch: boolean, ordering?: OrderedEventOptions): HandlerDefinition {
    const name = spec.name;
    if (!spec.isStatic) {
      throw new HandlerRegistrationError(
        name,
        'request- or transient-scoped providers cannot be Kafka handlers (there is no request); make the provider a singleton',
      );
    }
    const reader = this.reader(spec);
    if (batch && (ordering?.lanes ?? 1) > 1) {
      throw new HandlerRegistrationError(name, '@OrderedEvent({ lanes }) is for handlers called once per event; a batch handler already gets the events of a unit of work at once (leave lanes out)');
    }
    if (spec.retryTopics !== undefined && ordering) {
      throw new HandlerRegistrationError(
        name,
        'retryTopics and @OrderedEvent cannot go together: a record waiting on a retry topic lets later records of its key overtake it. For per-key order under failure, leave retryTopics out (a record that fails for good parks its key); for non-blocking retries, leave @OrderedEvent out (docs/retries.md)',
      );
    }
    const topic = `${this.options.topicPrefix}${spec.topic}`;
    const source = spec.source ?? '@IdempotentHandler';
    const retryTopics = spec.retryTopics === undefined ? undefined : this.handlerTiers(name, topic, spec.retryTopics, source);
    const inPlace = spec.retryTopics?.maxInPlaceAttempts;
    // Guards, interceptors, pipes and exception filters run around the method, as for a microservice handler.
    const call = this.pipeline.create({ instance: spec.instance, methodName: spec.methodName, moduleKey: spec.moduleKey });
    return {
      name,
      topic,
      reader,
      messageIdFrom: this.messageIdFrom(spec, source),
      retry: this.handlerRetry(name, inPlace === undefined ? spec.retry : { ...spec.retry, attempts: inPlace }, source, inPlace === undefined ? 'retry' : 'retryTopics.maxInPlaceAttempts'),
      retryTopics,
      ordering: ordering ? { key: ordering.key, lanes: ordering.lanes ?? 1 } : undefined,
      // A batch handler gets one event as a batch of one (a failed batch's events one at a time, a release's replays),
      // with the event's data layer: `db` is the unit's, whatever it is; `manager` is read only when the handler reads
      // it (outside TypeORM, reading it throws).
      invoke: batch
        ? async (event, ctx) => {
            await call([{ event, ctx }], {
              get db() {
                return ctx.db;
              },
              get manager() {
                return ctx.manager;
              },
              attempt: ctx.attempt,
            });
          }
        : async (event, ctx) => {
            await call(event, ctx);
          },
      invokeBatch: batch
        ? async (events, batchContext) => {
            await call(events, batchContext);
          }
        : undefined,
    };
  }

  /** The handler's own retry policy over the module's, held to the same rules (a boot error names the handler). */
  private handlerRetry(name: string, retry: IdempotentHandlerOptions['retry'], source: string, field: string): HandlerDefinition['retry'] {
    try {
      return resolveRetry(retry, this.options.retry, this.options.inbox.idleInTransactionTimeoutMs);
    } catch (err) {
      if (err instanceof InvalidOptionsError) {
        const named = field === 'retry' || !err.field.endsWith('.attempts') ? err.field : field;
        throw new HandlerRegistrationError(name, `${source} option "${named}" ${err.problem}`);
      }
      throw err;
    }
  }

  /** Where a record without a message id takes its identity from: the handler's `messageIdFrom`, else its topic's. */
  private messageIdFrom(spec: TransportHandlerSpec, source: string): HandlerDefinition['messageIdFrom'] {
    const from = spec.messageIdFrom ?? this.options.topics[spec.topic]?.messageIdFrom;
    if (from === undefined) return undefined;
    const problem = messageIdFromProblem(from);
    if (problem) throw new HandlerRegistrationError(spec.name, `${spec.messageIdFrom === undefined ? `topics["${spec.topic}"]` : source} "messageIdFrom" ${problem}`);
    return eventKeySource(from);
  }

  /** How the handler reads its records: its format (its own, the topic's, else Avro), its schema, its validation. */
  private reader(spec: TransportHandlerSpec): EventReader {
    const name = spec.name;
    const declared = this.options.topics[spec.topic];
    const format = spec.format ?? declared?.format ?? 'avro';
    const source = spec.source ?? '@IdempotentHandler';
    let schema: LoadedSchema | undefined;
    if (format === 'avro') {
      const schemaName = spec.schema ?? declared?.schema;
      if (!schemaName) {
        const how = spec.source ? `@EventPattern('${spec.topic}', { schema: '<full name>' })` : `@IdempotentHandler({ topic: '${spec.topic}', schema: '<full name>' })`;
        throw new HandlerRegistrationError(name, `no schema for topic "${spec.topic}": its format is Avro (the default); give it with ${how} or declare topics["${spec.topic}"].schema in the module options, or say format: 'json' for JSON`);
      }
      if (!this.registry.has(schemaName)) {
        const where = this.options.schemas.directory === '' ? 'the module has no schemas directory (option schemas)' : `it is not in the schemas directory "${this.options.schemas.directory}" (known: ${this.registry.names().join(', ') || 'none'})`;
        throw new HandlerRegistrationError(name, `schema "${schemaName}" cannot be read: ${where}`);
      }
      schema = this.registry.current(schemaName);
    } else if (spec.schema !== undefined) {
      throw new HandlerRegistrationError(name, `${source} "schema" names an Avro record, and the handler reads ${format}: leave it out`);
    }
    if (format === 'protobuf' && !this.registry.remote) {
      throw new HandlerRegistrationError(name, "format 'protobuf' is read from a Schema Registry's framing: it needs the module option schemaRegistry ({ url: ... })");
    }
    let validator: EventValidator | undefined;
    let validatorName: string | undefined;
    if (spec.validate !== undefined) {
      const problem = validationProblem(spec.validate);
      if (problem) throw new HandlerRegistrationError(name, `${source} "validate" ${problem}`);
      try {
        validator = eventValidator(spec.validate);
      } catch (err) {
        throw new HandlerRegistrationError(name, (err as Error).message);
      }
      validatorName = validationName(spec.validate);
    }
    let json: JsonLimits;
    let registryFraming: boolean | undefined;
    try {
      json = resolveJsonLimits(`${source} json`, spec.json, this.options.json);
      registryFraming = registryFramingOf(`${source} registryFraming`, spec.registryFraming, format, !!this.registry.remote) ?? (format === 'json' ? declared?.registryFraming : undefined);
    } catch (err) {
      throw new HandlerRegistrationError(name, (err as Error).message);
    }
    return eventReader(this.registry, { format, schema, json, validator, validatorName, registryFraming, topic: `${this.options.topicPrefix}${spec.topic}` });
  }

  /** The handler's retry tiers, checked (a boot error names the handler and the option). */
  private handlerTiers(name: string, topic: string, retryTopics: NonNullable<IdempotentHandlerOptions['retryTopics']>, source: string): HandlerDefinition['retryTopics'] {
    try {
      return resolveRetryTiers(topic, retryTopics);
    } catch (err) {
      if (err instanceof InvalidOptionsError) throw new HandlerRegistrationError(name, `${source} option "${err.field}" ${err.problem}`);
      throw err;
    }
  }

  /**
   * @OrderedEvent on a controller method that this module does not consume (an @EventPattern of another
   * transport, or no KafkaExactlyOnceServer in the application) orders nothing: said at boot.
   */
  private warnUnconsumedOrdering(handlers: HandlerDefinition[]): void {
    const consumed = new Set(handlers.map((h) => h.name));
    for (const { name, method } of this.methodsOf(this.discovery.getControllers())) {
      if (this.accessor.orderedEvent(method) && !consumed.has(name)) {
        this.logger.warn(`${name} has @OrderedEvent but this module does not consume it: it orders only @IdempotentHandler methods and @EventPattern handlers bound to KafkaExactlyOnceServer`);
      }
    }
  }

  /** Every method of these providers' or controllers' classes, named `Class.method`. */
  private *methodsOf(wrappers: InstanceWrapper[]): Generator<{ wrapper: InstanceWrapper; name: string; methodName: string; method: (...args: unknown[]) => unknown }> {
    for (const wrapper of wrappers) {
      const metatype = (wrapper.instance?.constructor ?? wrapper.metatype) as (new (...args: unknown[]) => unknown) | undefined;
      if (!metatype || typeof metatype !== 'function' || !metatype.prototype) continue;
      for (const methodName of this.scanner.getAllMethodNames(metatype.prototype)) {
        const method = metatype.prototype[methodName as keyof typeof metatype.prototype] as (...args: unknown[]) => unknown;
        yield { wrapper, name: `${metatype.name}.${methodName}`, methodName, method };
      }
    }
  }

  private checkUnique(handlers: HandlerDefinition[]): void {
    const byTopic = new Map<string, string>();
    for (const handler of handlers) {
      for (const topic of [handler.topic, ...(handler.retryTopics?.topics ?? [])]) {
        const other = byTopic.get(topic);
        if (other) {
          throw new HandlerRegistrationError(
            handler.name,
            `topic "${topic}" already has a handler in group "${this.options.groupId}" (${other}); one topic, one handler`,
          );
        }
        byTopic.set(topic, topic === handler.topic ? handler.name : `${handler.name}, as a retry topic`);
      }
    }
  }
}
