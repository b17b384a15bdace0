import { Module } from '@nestjs/common';
import { KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { prismaDatabase } from 'kafka-exactly-once/prisma';
import type { Pool } from 'pg';
import { config } from './config';
import { PrismaClient } from './generated/prisma/client';
import { OrderDesk } from './order-desk';
import { OrdersHandler } from './orders.handler';
import { OrdersTable } from './orders.table';
import { PG_POOL, PrismaModule } from './prisma.module';

/** What ctx.emit and the outbox may write, and with which schema. */
const topics = {
  [config.acceptedTopic]: { schema: 'com.example.OrderAccepted' },
  [config.ordersTopic]: { schema: 'com.example.OrderPlaced', key: (order: { customerId: string }) => order.customerId },
};

@Module({
  imports: [
    PrismaModule,
    KafkaExactlyOnceModule.forRootAsync({
      inject: [PG_POOL],
      useFactory: (pool: Pool) => ({
        kafka: { clientId: 'example-orders-prisma', brokers: config.brokers },
        groupId: config.groupId,
        transactionalIdPrefix: 'example-orders-prisma',
        schemas: { directory: config.schemasDirectory },
        topics,
        // The data layer: the library's own SQL (inbox, outbox, offsets) runs on this pool, and each handler call
        // gets `ctx.db`, a PrismaClient built by this factory whose statements run in the unit of work's transaction.
        database: prismaDatabase({ pool, client: (settings) => new PrismaClient(settings) }),
        // OrderDesk's events; the relay runs in this application.
        outbox: { checkpointTopic: config.outboxCheckpointTopic },
      }),
    }),
  ],
  providers: [OrdersTable, OrdersHandler, OrderDesk],
})
export class AppModule {}

/** The publishing side alone (no group, no handlers, no database): EventPublisher with its key function per topic. */
@Module({
  imports: [
    KafkaExactlyOnceModule.forRoot({
      kafka: { clientId: 'example-orders-prisma-publisher', brokers: config.brokers },
      transactionalIdPrefix: 'example-orders-prisma-publisher',
      schemas: { directory: config.schemasDirectory },
      topics: { [config.ordersTopic]: topics[config.ordersTopic] },
      publisher: { spool: { directory: config.spoolDirectory } },
    }),
  ],
})
export class PublisherModule {}
