import { Module } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { TypeOrmModule } from '@nestjs/typeorm';
import { KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { clientKafkaExactlyOnce, KafkaExactlyOnceServer } from 'kafka-exactly-once/microservices';
import { config } from './config.js';
import { OrdersController } from './orders.controller.js';
import { OrdersTable } from './orders.table.js';

/** The consuming side: a Nest microservice whose transport is KafkaExactlyOnceServer (src/main.ts). */
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
  controllers: [OrdersController],
  // The transport takes its options from the module above.
  providers: [OrdersTable, KafkaExactlyOnceServer],
})
export class AppModule {}

/** The publishing side alone (no group, no handlers): a ClientProxy over EventPublisher, with a key function per topic. */
@Module({
  imports: [
    KafkaExactlyOnceModule.forRoot({
      isGlobal: true, // ClientsModule's factory injects its EventPublisher
      kafka: { clientId: 'example-orders-publisher', brokers: config.brokers },
      transactionalIdPrefix: 'example-orders-publisher',
      schemas: { directory: config.schemasDirectory },
      topics: { [config.ordersTopic]: { schema: 'com.example.OrderPlaced', key: (order: { customerId: string }) => order.customerId } },
      publisher: { spool: { directory: config.spoolDirectory } },
    }),
    ClientsModule.registerAsync([clientKafkaExactlyOnce('ORDERS')]),
  ],
})
export class PublisherModule {}
