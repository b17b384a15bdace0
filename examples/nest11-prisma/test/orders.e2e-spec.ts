// The example's own end-to-end test under Jest (CommonJS), as a team on Prisma writes one: the real module, the
// real broker and PostgreSQL (test/global-setup.js), and the kafka-exactly-once/testing helpers.
import 'reflect-metadata';
import { Test, type TestingModule } from '@nestjs/testing';
import { EventPublisher, KafkaExactlyOnceLifecycle, Outbox } from 'kafka-exactly-once';
import { createTestTopics, loadedPackageBuilds, waitForCommitted } from 'kafka-exactly-once/testing';
import { AppModule, PublisherModule } from '../src/app.module';
import { config } from '../src/config';
import { OrderDesk } from '../src/order-desk';
import { PrismaService } from '../src/prisma.module';

/** Polls until `check` holds (the relay and the consumer run in the background). */
async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 60000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe('orders, written through Prisma', () => {
  let app: TestingModule;
  let publisherModule: TestingModule;
  let prisma: PrismaService;

  beforeAll(async () => {
    await createTestTopics(config.brokers, [
      { topic: config.ordersTopic, numPartitions: 3 },
      { topic: config.acceptedTopic, numPartitions: 3 },
    ]);
    app = await Test.createTestingModule({ imports: [AppModule] }).compile();
    await app.init(); // the @IdempotentHandler's consumer starts here (no HTTP server needed)
    await app.get(KafkaExactlyOnceLifecycle).whenRunning(60000);
    prisma = app.get(PrismaService);
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
    const first = await publisher.publish(config.ordersTopic, order, { messageId: order.orderId });
    const again = await publisher.publish(config.ordersTopic, order, { messageId: order.orderId }); // a retried publish
    expect([first.status, again.status]).toEqual(['sent', 'sent']);

    await waitForCommitted(app, { topic: config.ordersTopic, ...again });

    // One row: the second delivery was skipped (applied again, it would have failed on the primary key and been
    // dead-lettered, and this row's sum would not be the order's amount).
    expect(await prisma.order.findMany({ where: { orderId: order.orderId } })).toEqual([{ orderId: order.orderId, customerId: 'customer-1', amountCents: 1250n }]);
  });

  it('sends an order placed in prisma.$transaction through the outbox, and the handler records it through ctx.db', async () => {
    const order = { orderId: `order-desk-${Date.now()}`, customerId: 'customer-2', amountCents: 990n };
    expect(await app.get(OrderDesk).place(order)).toBe(order.orderId);
    await eventually(async () => (await prisma.order.count({ where: { orderId: order.orderId } })) === 1, 'the handler to record the order');
    expect(await prisma.orderRequest.findUnique({ where: { orderId: order.orderId } })).toEqual({ orderId: order.orderId, customerId: 'customer-2' });
  });

  it('rolls the outbox event back with the row when the transaction it joined fails', async () => {
    const desk = app.get(OrderDesk);
    const outbox = app.get(Outbox);
    const abandoned = { orderId: `order-abandoned-${Date.now()}`, customerId: 'customer-3', amountCents: 10n };
    // The same writes as OrderDesk.place, in a transaction that fails after them (a payment declined, say).
    await expect(
      prisma.$transaction(async (tx) => {
        await tx.orderRequest.create({ data: { orderId: abandoned.orderId, customerId: abandoned.customerId } });
        await outbox.add(tx, config.ordersTopic, abandoned, { messageId: abandoned.orderId });
        throw new Error('payment declined');
      }),
    ).rejects.toThrow('payment declined');
    // A later order of the same customer (same key, so same partition, in order) is recorded: the abandoned one,
    // ahead of it had it been sent, never was.
    const later = { orderId: `order-later-${Date.now()}`, customerId: 'customer-3', amountCents: 20n };
    await desk.place(later);
    await eventually(async () => (await prisma.order.count({ where: { orderId: later.orderId } })) === 1, 'the later order to be recorded');
    expect(await prisma.order.findMany({ where: { customerId: 'customer-3' }, select: { orderId: true } })).toEqual([{ orderId: later.orderId }]);
    expect(await prisma.orderRequest.findMany({ where: { customerId: 'customer-3' }, select: { orderId: true } })).toEqual([{ orderId: later.orderId }]);
  });

  it('runs without TypeORM installed, on the CommonJS build of the package', () => {
    expect(() => require.resolve('typeorm')).toThrow();
    expect(() => require.resolve('@nestjs/typeorm')).toThrow();
    expect(loadedPackageBuilds()).toEqual(['commonjs']);
  });
});
