import { Controller } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { OrderedEvent, type EventContext } from 'kafka-exactly-once';
import { config } from './config.js';

/** com.example.OrderPlaced (schemas/order-placed.v1.avsc); Avro `long` decodes to bigint. */
export interface OrderPlaced {
  orderId: string;
  customerId: string;
  amountCents: bigint;
}

/**
 * A Nest microservice handler under KafkaExactlyOnceServer (src/main.ts): the same exactly-once protocol as
 * an @IdempotentHandler, with Nest's @EventPattern, @Payload() and @Ctx().
 */
@Controller()
export class OrdersController {
  /**
   * Records the order and emits OrderAccepted with the customer's running total, exactly once: the insert, the
   * output and the consumer offset commit together or not at all, and a duplicate publish is skipped. The
   * running total depends on order, which @OrderedEvent keeps per customer even when an order fails for good.
   */
  // <string>: the untyped form of Nest 12's @EventPattern (its typed form wants `...args: unknown[]` after the
  // payload, which an @Ctx() parameter of type EventContext is not).
  @EventPattern<string>(config.ordersTopic, { schema: 'com.example.OrderPlaced' })
  @OrderedEvent({ key: (order: OrderPlaced) => order.customerId })
  async onOrderPlaced(@Payload() order: OrderPlaced, @Ctx() ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO example_orders (order_id, customer_id, amount_cents) VALUES ($1, $2, $3)', [
      order.orderId,
      order.customerId,
      order.amountCents.toString(),
    ]);
    const [{ total }] = await ctx.manager.query('SELECT sum(amount_cents)::text AS total FROM example_orders WHERE customer_id = $1', [order.customerId]);
    ctx.emit(config.acceptedTopic, { ...order, customerTotalCents: BigInt(total) }, { key: order.customerId });
  }
}
