// The example's own end-to-end test under Jest (CommonJS), as a Nest 11 team writes one: the real module, the
// real broker and PostgreSQL (test/global-setup.js), and the kafka-exactly-once/testing helpers.
import 'reflect-metadata';
import { Test, type TestingModule } from '@nestjs/testing';
import { EventPublisher, KafkaExactlyOnceLifecycle } from 'kafka-exactly-once';
import { createTestTopics, loadedPackageBuilds, waitForCommitted } from 'kafka-exactly-once/testing';
import { DataSource } from 'typeorm';
import { AppModule, PublisherModule } from '../src/app.module';
import { config } from '../src/config';

describe('orders', () => {
  let app: TestingModule;
  let publisherModule: TestingModule;

  beforeAll(async () => {
    await createTestTopics(config.brokers, [
      { topic: config.ordersTopic, numPartitions: 3 },
      { topic: config.acceptedTopic, numPartitions: 3 },
    ]);
    app = await Test.createTestingModule({ imports: [AppModule] }).compile();
    await app.init(); // the @IdempotentHandler's consumer starts here (no HTTP server needed)
    await app.get(KafkaExactlyOnceLifecycle).whenRunning(60000);
    publisherModule = await Test.createTestingModule({ imports: [PublisherModule] }).compile();
    await publisherModule.init();
  });

  afterAll(async () => {
    await publisherModule?.close();
    await app?.close();
  });

  it('applies an order once, even when it is published twice', async () => {
    const publisher = publisherModule.get(EventPublisher);
    const order = { orderId: `order-${Date.now()}`, customerId: 'customer-1', amountCents: 1250n };
    await publisher.publish(config.ordersTopic, order, { messageId: order.orderId });
    const again = await publisher.publish(config.ordersTopic, order, { messageId: order.orderId }); // a retried publish
    expect(again.status).toBe('sent');

    await waitForCommitted(app, { topic: config.ordersTopic, ...again });

    const rows = await app.get(DataSource).query('SELECT customer_id, amount_cents::text AS amount FROM example_orders WHERE order_id = $1', [order.orderId]);
    expect(rows).toEqual([{ customer_id: 'customer-1', amount: '1250' }]);
  });

  it('loads the CommonJS build only', () => {
    expect(loadedPackageBuilds()).toEqual(['commonjs']);
  });
});
