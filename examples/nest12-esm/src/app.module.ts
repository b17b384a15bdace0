import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { config } from './config.js';
import { OrdersHandler } from './orders.handler.js';
import { OrdersTable } from './orders.table.js';

@Module({
  imports: [
    TypeOrmModule.forRoot({ type: 'postgres', url: config.databaseUrl }),
    KafkaExactlyOnceModule.forRoot({
      kafka: { clientId: 'example-orders', brokers: config.brokers },
      groupId: config.groupId,
      transactionalIdPrefix: 'example-orders',
      schemas: { directory: config.schemasDirectory },
      // What ctx.emit may write, and with which schema.
      topics: { [config.acceptedTopic]: { schema: 'com.example.OrderAccepted' } },
    }),
  ],
  providers: [OrdersTable, OrdersHandler],
})
export class AppModule {}

/** The publishing side alone (no group, no handlers): EventPublisher with its key function per topic. */
@Module({
  imports: [
    KafkaExactlyOnceModule.forRoot({
      kafka: { clientId: 'example-orders-publisher', brokers: config.brokers },
      transactionalIdPrefix: 'example-orders-publisher',
      schemas: { directory: config.schemasDirectory },
      topics: { [config.ordersTopic]: { schema: 'com.example.OrderPlaced', key: (order: { customerId: string }) => order.customerId } },
      publisher: { spool: { directory: config.spoolDirectory } },
    }),
  ],
})
export class PublisherModule {}
