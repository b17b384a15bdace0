import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { EventPublisher } from 'kafka-exactly-once';
import { PublisherModule } from './app.module';
import { config } from './config';

/**
 * `node dist/publish-orders.js <count> <customers>`: publishes orders through EventPublisher (validated,
 * idempotent, spooled to disk while Kafka is away), every tenth twice with the same message id, as a client
 * retrying after a lost reply would. Prints a JSON summary.
 */
async function main(): Promise<void> {
  const [count, customers] = [Number(process.argv[2] ?? 100), Number(process.argv[3] ?? 10)];
  const app = await NestFactory.createApplicationContext(PublisherModule, { logger: ['warn', 'error'] });
  const publisher = app.get(EventPublisher);
  const summary = { published: 0, duplicates: 0, spooled: 0 };
  for (let i = 0; i < count; i++) {
    const order = { orderId: `order-${i}`, customerId: `customer-${i % customers}`, amountCents: BigInt(100 + i) };
    const copies = i % 10 === 0 ? 2 : 1;
    for (let copy = 0; copy < copies; copy++) {
      const result = await publisher.publish(config.ordersTopic, order, { messageId: order.orderId });
      if (result.status === 'spooled') summary.spooled++;
    }
    summary.published++;
    summary.duplicates += copies - 1;
  }
  await app.close();
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
