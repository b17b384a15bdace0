import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { TypeOrmModule } from '@nestjs/typeorm';
import { KafkaExactlyOnceAdminModule, KafkaExactlyOnceMetricsController, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { join } from 'path';
import { APPROVAL_LIMIT_CENTS, EVENT_FORMAT, consumerAppConfig } from './consumer-app.config';
import { DemoDataLayerModule } from './data-layer/data-layer.module';
import { DATA_LAYER, type DemoDataLayer } from './data-layer/demo-store';
import { HealthController } from './health/health.controller';
import { CreateDemoTables1764400100000 } from './migrations/1764400100000-create-demo-tables';
import { CreatePaymentApprovals1764400500000 } from './migrations/1764400500000-create-payment-approvals';
import { CreateWelcomeEmails1764400700000 } from './migrations/1764400700000-create-welcome-emails';
import { CreateDemoMailerCalls1764400800000 } from './migrations/1764400800000-create-demo-mailer-calls';
import { DemoMailer } from './notifications/demo-mailer';
import { WelcomeEmailsHandler } from './notifications/welcome-emails.handler';
import { Account } from './payments/account.entity';
import { LedgerEntry } from './payments/ledger-entry.entity';
import { KafkaExactlyOnceServer } from 'kafka-exactly-once/microservices';
import { PaymentsController } from './payments/payments.controller';
import { PaymentsHandler } from './payments/payments.handler';
import { PaymentsLedger } from './payments/payments.ledger';
import { DemoTopicsInitializer } from './topics/demo-topics.initializer';
import { DEMO_TOPICS } from './topics/demo-topics';
import { User } from './users/user.entity';
import { UsersHandler } from './users/users.handler';

/** The schemas directory: SCHEMAS_DIR, else schemas/ at the repository root (works from src and from dist). */
export function schemasDirectory(): string {
  if (process.env.SCHEMAS_DIR) return process.env.SCHEMAS_DIR;
  let dir = __dirname;
  for (let i = 0; i < 8; i++) {
    if (require('fs').existsSync(join(dir, 'schemas', 'payment-requested.v1.avsc'))) return join(dir, 'schemas');
    dir = join(dir, '..');
  }
  return 'schemas';
}

const microservice = consumerAppConfig().transport === 'microservice';

@Module({
  imports: [
    // The tables are TypeORM's migrations' whatever DATA_LAYER says: the same tables for every data layer.
    TypeOrmModule.forRootAsync({
      useFactory: () => ({
        type: 'postgres',
        url: consumerAppConfig().databaseUrl,
        entities: [Account, LedgerEntry, User],
        migrations: [CreateDemoTables1764400100000, CreatePaymentApprovals1764400500000, CreateWelcomeEmails1764400700000, CreateDemoMailerCalls1764400800000],
        migrationsRun: true,
        synchronize: false,
        // A connection per partition handled at once: the demo topics, 6 partitions each, and the welcome emails' retry tiers.
        extra: { max: 40 },
      }),
    }),
    DemoDataLayerModule,
    KafkaExactlyOnceModule.forRootAsync({
      imports: [DemoDataLayerModule],
      inject: [DATA_LAYER],
      useFactory: (data: DemoDataLayer) => {
        const config = consumerAppConfig();
        return {
          kafka: { clientId: 'consumer-app', brokers: config.kafkaBrokers },
          // KAFKA_CLIENT=platformatic: the consumer group on @platformatic/kafka (Node.js 22.22+ or 24.6+).
          driver: config.kafkaClient,
          // DATA_LAYER=prisma|drizzle|kysely: that ORM over a pool of DATABASE_URL, lent to the handlers as ctx.db.
          // TypeORM (the default): no option, the DataSource of TypeOrmModule above.
          ...(data.database ? { database: data.database } : {}),
          groupId: config.groupId,
          transactionalIdPrefix: 'consumer-app',
          schemas: { directory: schemasDirectory() },
          topicPrefix: config.topicPrefix,
          // EVENT_FORMAT=json: the outputs are plain JSON (the handlers read JSON, each saying so with its DTO).
          topics:
            config.eventFormat === 'json'
              ? { [DEMO_TOPICS.paymentsProcessed]: { format: 'json' }, [DEMO_TOPICS.welcomeEmail]: { format: 'json' } }
              : {
                  [DEMO_TOPICS.paymentsProcessed]: { schema: 'com.example.PaymentProcessed' },
                  [DEMO_TOPICS.welcomeEmail]: { schema: 'com.example.WelcomeEmailRequested' },
                },
          // SCHEMA_REGISTRY_URL: inputs of both framings are read; WIRE_FORMAT=schema-registry writes the outputs in the registry's.
          wireFormat: config.wireFormat,
          ...(config.schemaRegistryUrl ? { schemaRegistry: { url: config.schemaRegistryUrl } } : {}),
          // KAFKA_GROUP_PROTOCOL=consumer: Kafka 4's consumer groups (KIP-848), with KAFKA_CLIENT=platformatic.
          consumer: { groupProtocol: config.groupProtocol, sessionTimeout: config.sessionTimeoutMs, stallAfterMs: config.stallAfterMs },
          ...(config.transactionTimeoutMs ? { transactionTimeoutMs: config.transactionTimeoutMs } : {}),
          inbox: { idleInTransactionTimeoutMs: config.idleInTransactionTimeoutMs, lockTimeoutMs: config.lockTimeoutMs },
          // REPORT_INTERVAL_MS: how often this instance reports to the console of any instance (0: off).
          // STEP_LOG: each committed unit's step times appended to this file (a diagnostic; bench --tail-steps).
          operations: { reportIntervalMs: config.reportIntervalMs, stepLog: config.stepLog },
          metrics: {}, // kafka_eo_* on prom-client's registry, served at GET /metrics
          // Started by DemoTopicsInitializer once the demo topics exist (in the background: Kafka may be away).
          autoStart: false,
        };
      },
    }),
    TerminusModule,
    // Operators' REST endpoints and console (dead letters, parked accounts, retry tiers, the outbox), only with a
    // token (ADMIN_TOKEN); the console at /kafka-eo/ unless ADMIN_CONSOLE says otherwise.
    ...(consumerAppConfig().adminToken
      ? [
          KafkaExactlyOnceAdminModule.forRoot({
            token: consumerAppConfig().adminToken!,
            readOnlyToken: consumerAppConfig().adminReadOnlyToken,
            console: consumerAppConfig().adminConsole,
          }),
        ]
      : []),
  ],
  controllers: [HealthController, KafkaExactlyOnceMetricsController, ...(microservice ? [PaymentsController] : [])],
  providers: [
    DemoTopicsInitializer,
    PaymentsLedger,
    UsersHandler,
    DemoMailer,
    WelcomeEmailsHandler,
    // payments.requested: an @IdempotentHandler, or an @EventPattern handler under KafkaExactlyOnceServer.
    ...(microservice ? [KafkaExactlyOnceServer] : [PaymentsHandler]),
    { provide: APPROVAL_LIMIT_CENTS, useFactory: () => consumerAppConfig().approvalLimitCents },
    { provide: EVENT_FORMAT, useFactory: () => consumerAppConfig().eventFormat },
  ],
})
export class ConsumerAppModule {}
