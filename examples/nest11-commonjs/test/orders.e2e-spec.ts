// The example's own end-to-end test under Jest (CommonJS), as a Nest 11 team writes one: the real module, the
// real broker and PostgreSQL (test/global-setup.js), and the kafka-exactly-once/testing helpers.
import 'reflect-metadata';
import { Test, type TestingModule } from '@nestjs/testing';
import { TransactionHost } from '@nestjs-cls/transactional';
import { EventPublisher, KafkaExactlyOnceLifecycle } from 'kafka-exactly-once';
import { createTestTopics, loadedPackageBuilds, waitForCommitted } from 'kafka-exactly-once/testing';
import { DataSource } from 'typeorm';
import { AppModule, PublisherModule } from '../src/app.module';
import { config } from '../src/config';
import { OrderDesk } from '../src/order-desk';

/** Polls until `check` holds (the relay and the consumer run in the background). */
async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 60000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

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

  it('sends an order placed in a @Transactional() method through the outbox, and the handler records it through its TransactionHost service', async () => {
    const dataSource = app.get(DataSource);
    const order = { orderId: `order-desk-${Date.now()}`, customerId: 'customer-2', amountCents: 990n };
    expect(await app.get(OrderDesk).place(order)).toBe(order.orderId);
    await eventually(async () => (await dataSource.query('SELECT 1 FROM example_orders WHERE order_id = $1', [order.orderId])).length === 1, 'the handler to record the order');
    expect(await dataSource.query('SELECT customer_id FROM example_order_requests WHERE order_id = $1', [order.orderId])).toEqual([{ customer_id: 'customer-2' }]);
  });

  it('rolls the outbox event back with the row when the transaction it joined fails', async () => {
    const dataSource = app.get(DataSource);
    const desk = app.get(OrderDesk);
    const abandoned = { orderId: `order-abandoned-${Date.now()}`, customerId: 'customer-3', amountCents: 10n };
    // The caller's transaction (propagation Required: place() joins it) fails after the order is placed.
    await expect(
      app.get(TransactionHost).withTransaction(async () => {
        await desk.place(abandoned);
        throw new Error('payment declined');
      }),
    ).rejects.toThrow('payment declined');
    // A later order of the same customer (same key, so same partition, in order) is recorded: the abandoned one,
    // ahead of it had it been sent, never was.
    const later = { orderId: `order-later-${Date.now()}`, customerId: 'customer-3', amountCents: 20n };
    await desk.place(later);
    await eventually(async () => (await dataSource.query('SELECT 1 FROM example_orders WHERE order_id = $1', [later.orderId])).length === 1, 'the later order to be recorded');
    expect(await dataSource.query('SELECT order_id FROM example_orders WHERE customer_id = $1', ['customer-3'])).toEqual([{ order_id: later.orderId }]);
    expect(await dataSource.query('SELECT order_id FROM example_order_requests WHERE customer_id = $1', ['customer-3'])).toEqual([{ order_id: later.orderId }]);
  });

  it('loads the CommonJS build only', () => {
    expect(loadedPackageBuilds()).toEqual(['commonjs']);
  });
});
