import { Injectable } from '@nestjs/common';
import { IdempotentHandler, OrderedEvent, type EventContext } from 'kafka-exactly-once';
import { config } from './config';
import type { PrismaClient } from './generated/prisma/client';

/** com.example.OrderPlaced (schemas/order-placed.v1.avsc); Avro `long` decodes to bigint. */
export interface OrderPlaced {
  orderId: string;
  customerId: string;
  amountCents: bigint;
}

@Injectable()
export class OrdersHandler {
  /**
   * Records the order and emits OrderAccepted with the customer's running total, exactly once: the insert, the
   * output and the consumer offset commit together or not at all, and a duplicate publish is skipped. Every
   * statement goes through `ctx.db`, the PrismaClient the library lends for this record, bound to the unit of
   * work's transaction (not the application's PrismaService, whose writes would commit on their own). The running
   * total depends on order, which @OrderedEvent keeps per customer even when an order fails for good.
   */
  @IdempotentHandler({ topic: config.ordersTopic, schema: 'com.example.OrderPlaced' })
  @OrderedEvent({ key: (order: OrderPlaced) => order.customerId })
  async onOrderPlaced(order: OrderPlaced, ctx: EventContext<PrismaClient>): Promise<void> {
    // Prisma's own $transaction inside a handler is a savepoint of the unit's transaction: it commits with the
    // unit or not at all, and its timeout is the handler's deadline (consumer.handlerTimeoutMs), not Prisma's 5 s.
    const total = await ctx.db.$transaction(async (tx) => {
      await tx.order.create({ data: { orderId: order.orderId, customerId: order.customerId, amountCents: order.amountCents } });
      const { _sum } = await tx.order.aggregate({ where: { customerId: order.customerId }, _sum: { amountCents: true } });
      return _sum.amountCents ?? 0n;
    });
    ctx.emit(config.acceptedTopic, { ...order, customerTotalCents: total }, { key: order.customerId });
  }
}
