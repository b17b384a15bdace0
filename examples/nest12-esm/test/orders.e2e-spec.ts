// The example's own end-to-end test, as a team writes one for its service: the real module, the real broker
// and PostgreSQL (test/global-setup.js), and the kafka-exactly-once/testing helpers. The same file runs under
// Vitest (`npm test`) and under Jest in ESM mode (`npm run test:jest`).
import 'reflect-metadata';
import type { INestMicroservice } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { EventPublisher, KafkaExactlyOnceLifecycle } from 'kafka-exactly-once';
import { KafkaExactlyOnceServer } from 'kafka-exactly-once/microservices';
import { createTestTopics, loadedPackageBuilds, waitForCommitted } from 'kafka-exactly-once/testing';
import { DataSource } from 'typeorm';
import { AppModule, PublisherModule } from '../src/app.module.js';
import { config } from '../src/config.js';

describe('orders', () => {
  let consumer: INestMicroservice;
  let publisherModule: TestingModule;

  beforeAll(async () => {
    await createTestTopics(config.brokers, [
      { topic: config.ordersTopic, numPartitions: 3 },
      { topic: config.acceptedTopic, numPartitions: 3 },
    ]);
    const consumerModule = await Test.createTestingModule({ imports: [AppModule] }).compile();
    consumer = consumerModule.createNestMicroservice({ strategy: consumerModule.get(KafkaExactlyOnceServer) });
    await consumer.listen();
    await consumer.get(KafkaExactlyOnceLifecycle).whenRunning(60000); // the group joined
    publisherModule = await Test.createTestingModule({ imports: [PublisherModule] }).compile();
    await publisherModule.init();
  });

  afterAll(async () => {
    await publisherModule?.close();
    await consumer?.close();
  });

  it('applies an order once, even when it is published twice', async () => {
    const publisher = publisherModule.get(EventPublisher);
    const order = { orderId: `order-${Date.now()}`, customerId: 'customer-1', amountCents: 1250n };
    const first = await publisher.publish(config.ordersTopic, order, { messageId: order.orderId });
    const again = await publisher.publish(config.ordersTopic, order, { messageId: order.orderId }); // a retried publish
    expect([first.status, again.status]).toEqual(['sent', 'sent']);

    await waitForCommitted(consumer, { topic: config.ordersTopic, ...again });

    const rows = await consumer.get(DataSource).query('SELECT customer_id, amount_cents::text AS amount FROM example_orders WHERE order_id = $1', [order.orderId]);
    expect(rows).toEqual([{ customer_id: 'customer-1', amount: '1250' }]);
  });

  it('loads one build of the package (ES modules), so that its classes are one set of injection tokens', () => {
    expect(loadedPackageBuilds()).toEqual(['esm']);
  });
});
