import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { InboxHealthIndicator } from './health/inbox.health-indicator';
import { PublisherHealthIndicator } from './health/publisher.health-indicator';
import { OutboxHealthIndicator } from './health/outbox.health-indicator';
import { Outbox } from './outbox/outbox';
import { EventPublisher } from './publishing/event-publisher';
import { KafkaHealthIndicator } from './health/kafka.health-indicator';
import { HandlerMetadataAccessor } from './handler-metadata.accessor';
import type { KafkaExactlyOnceModuleOptions } from './interfaces/kafka-exactly-once-options.interface';
import { KAFKA_CLIENT, RESOLVED_OPTIONS } from './kafka-exactly-once.constants';
import { KafkaExactlyOnceExplorer } from './kafka-exactly-once.explorer';
import { HandlerPipeline } from './handler-pipeline';
import { KafkaExactlyOnceLifecycle } from './kafka-exactly-once.lifecycle';
import { KAFKA_EXACTLY_ONCE_OPTIONS, KafkaExactlyOnceConfigurableModule } from './kafka-exactly-once.module-definition';
import { createKafkaClient, logLevel, nestLogCreator } from './kafkajs';
import { useDriverParts } from './client/driver-parts';
import { platformaticParts } from './platformatic/driver-parts';
import { resolveOptions } from './options/resolve-options';
import type { ResolvedOptions } from './options/resolved-options';
import { SchemaRegistry } from './formats/avro/schema-registry';
import { formatRegistry } from './formats/writer-codecs';
import { KafkaExactlyOnceMetrics } from './metrics/kafka-exactly-once.metrics';
import { KafkaExactlyOnceTracing } from './tracing/kafka-exactly-once.tracing';

/**
 * Exactly-once, key-ordered Kafka consumption for the application's @IdempotentHandler methods, with the
 * inbox in the application's TypeORM PostgreSQL DataSource. Its health indicators return results in the shape
 * @nestjs/terminus reads, without depending on it.
 *
 * @example
 * KafkaExactlyOnceModule.forRootAsync({
 *   useFactory: (cfg: ConfigService) => ({
 *     kafka: { clientId: 'consumer-app', brokers: cfg.get('KAFKA_BROKERS').split(',') },
 *     groupId: 'consumer-app',
 *     transactionalIdPrefix: 'consumer-app',
 *     schemas: { directory: join(__dirname, '..', 'schemas') },
 *   }),
 *   inject: [ConfigService],
 * })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: RESOLVED_OPTIONS,
      useFactory: (options: KafkaExactlyOnceModuleOptions) => resolveOptions(options),
      inject: [KAFKA_EXACTLY_ONCE_OPTIONS],
    },
    {
      provide: SchemaRegistry,
      useFactory: (options: ResolvedOptions) => {
        const schemas = options.schemas.directory === '' ? SchemaRegistry.fromSchemas([]) : SchemaRegistry.fromDirectory(options.schemas.directory, { longs: options.schemas.longs });
        if (options.schemaRegistry) schemas.remote = formatRegistry(options.schemaRegistry, options.schemas.longs);
        return schemas;
      },
      inject: [RESOLVED_OPTIONS],
    },
    {
      provide: KAFKA_CLIENT,
      useFactory: (options: ResolvedOptions) => {
        const kafka = createKafkaClient({ ...options.kafka, logLevel: logLevel.INFO, logCreator: nestLogCreator });
        // The library's producers (units, publisher, relay, replays) and its committed-offset reads on the module's driver.
        if (options.driver === 'platformatic') useDriverParts(kafka, platformaticParts(options.kafka));
        return kafka;
      },
      inject: [RESOLVED_OPTIONS],
    },
    {
      provide: KafkaExactlyOnceMetrics,
      useFactory: (options: ResolvedOptions) => new KafkaExactlyOnceMetrics(options),
      inject: [RESOLVED_OPTIONS],
    },
    { provide: KafkaExactlyOnceTracing, useFactory: () => new KafkaExactlyOnceTracing() },
    HandlerMetadataAccessor,
    HandlerPipeline,
    KafkaExactlyOnceExplorer,
    KafkaExactlyOnceLifecycle,
    KafkaHealthIndicator,
    InboxHealthIndicator,
    EventPublisher,
    PublisherHealthIndicator,
    Outbox,
    OutboxHealthIndicator,
  ],
  exports: [KafkaExactlyOnceMetrics, KafkaHealthIndicator, InboxHealthIndicator, PublisherHealthIndicator, EventPublisher, Outbox, OutboxHealthIndicator, SchemaRegistry, KafkaExactlyOnceLifecycle],
})
export class KafkaExactlyOnceModule extends KafkaExactlyOnceConfigurableModule {}
