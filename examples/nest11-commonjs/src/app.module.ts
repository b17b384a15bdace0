import { Module } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsPluginTransactional } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { ClsModule } from 'nestjs-cls';
import { config } from './config';
import { OrderDesk } from './order-desk';
import { OrdersHandler } from './orders.handler';
import { OrdersLedger } from './orders.ledger';
import { OrdersTable } from './orders.table';

@Module({
  imports: [
    TypeOrmModule.forRoot({ type: 'postgres', url: config.databaseUrl }),
    // The application's transactions through @nestjs-cls/transactional: OrderDesk opens one with @Transactional()
    // and Outbox.add joins it; in a handler, the library lends the unit of work's transaction to TransactionHost.
    ClsModule.forRoot({
      global: true,
      plugins: [new ClsPluginTransactional({ imports: [TypeOrmModule], adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })],
    }),
    KafkaExactlyOnceModule.forRoot({
      kafka: { clientId: 'example-orders', brokers: config.brokers },
      groupId: config.groupId,
      transactionalIdPrefix: 'example-orders',
      schemas: { directory: config.schemasDirectory },
      // What ctx.emit and the outbox may write, and with which schema.
      topics: {
        [config.acceptedTopic]: { schema: 'com.example.OrderAccepted' },
        [config.ordersTopic]: { schema: 'com.example.OrderPlaced', key: (order: { customerId: string }) => order.customerId },
      },
      // OrderDesk's events; the relay runs in this application.
      outbox: { checkpointTopic: config.outboxCheckpointTopic },
    }),
  ],
  providers: [OrdersTable, OrdersLedger, OrdersHandler, OrderDesk],
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
