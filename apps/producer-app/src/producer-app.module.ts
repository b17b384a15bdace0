import { Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import { KafkaExactlyOnceMetricsController, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { HealthController } from './health/health.controller';
import { EventsController } from './http/events.controller';
import { PublishErrorsFilter } from './http/publish-errors.filter';
import { producerAppConfig } from './producer-app.config';
import { PaymentRequested, TOPICS, UserSignedUp } from './demo-events';
import { schemasDirectory } from './schemas-directory';
import { TypeOrmModule } from '@nestjs/typeorm';
import { PaymentRequestsService } from './outbox/payment-requests.service';

const outboxMode = () => producerAppConfig().paymentsMode === 'outbox';

/** The publishing side: the library's EventPublisher with the demo topics, their schemas and key functions. */
export const publisherModule = () =>
  KafkaExactlyOnceModule.forRootAsync({
    useFactory: () => {
      const config = producerAppConfig();
      return {
        kafka: { clientId: 'producer-app', brokers: config.kafkaBrokers, ...(config.kafkaRequestTimeoutMs ? { requestTimeout: config.kafkaRequestTimeoutMs } : {}) },
        transactionalIdPrefix: 'producer-app',
        // KAFKA_CLIENT=platformatic: the publisher and the relay on @platformatic/kafka (Node.js 22.22+ or 24.6+).
        driver: config.kafkaClient,
        schemas: { directory: schemasDirectory() },
        topicPrefix: config.topicPrefix,
        topics: {
          // One key per user and per account: each entity's events stay in order, load spreads over partitions.
          // EVENT_FORMAT=json: plain JSON instead of the Avro records.
          [TOPICS.usersSignedUp]: { ...(config.eventFormat === 'json' ? { format: 'json' } : { schema: 'com.example.UserSignedUp' }), key: (e: UserSignedUp) => `user-${e.userId}` },
          [TOPICS.paymentsRequested]: { ...(config.eventFormat === 'json' ? { format: 'json' } : { schema: 'com.example.PaymentRequested' }), key: (e: PaymentRequested) => e.accountId },
        },
        publisher: { spool: { directory: config.spoolDirectory }, sendTimeoutMs: config.sendTimeoutMs, missingTopicGraceMs: config.missingTopicGraceMs },
        // PAYMENTS_MODE=outbox: POST /payments writes its row and event in one transaction; the relay sends the event.
        ...(config.paymentsMode === 'outbox' ? { outbox: config.outboxCheckpointTopic ? { checkpointTopic: config.outboxCheckpointTopic } : {} } : {}),
        metrics: {}, // kafka_eo_* on prom-client's registry, served at GET /metrics
      };
    },
  });

@Module({
  imports: [
    ...(outboxMode() ? [TypeOrmModule.forRoot({ type: 'postgres', url: producerAppConfig().databaseUrl })] : []),
    publisherModule(),
    TerminusModule,
  ],
  controllers: [EventsController, HealthController, KafkaExactlyOnceMetricsController],
  providers: [{ provide: APP_FILTER, useClass: PublishErrorsFilter }, ...(outboxMode() ? [PaymentRequestsService] : [])],
})
export class ProducerAppModule {}

/** The same publisher without HTTP, for the load command. */
@Module({ imports: [publisherModule()] })
export class ProducerCliModule {}
