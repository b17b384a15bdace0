import { Injectable } from '@nestjs/common';
import { Outbox } from 'kafka-exactly-once';
import { config } from './config';
import { PrismaService } from './prisma.module';

/**
 * Where orders come in (an HTTP controller would call it): the request's row and its OrderPlaced event are written
 * in one interactive transaction of the application's PrismaClient. `Outbox.add(tx, ...)` writes the event in
 * that transaction: it reaches Kafka if and only if the row commits.
 */
@Injectable()
export class OrderDesk {
  constructor(
    private readonly prisma: PrismaService,
    private readonly outbox: Outbox,
  ) {}

  /** Places an order: its request row and its OrderPlaced event, both or neither. */
  async place(order: { orderId: string; customerId: string; amountCents: bigint }): Promise<string> {
    return this.prisma.$transaction(async (tx) => {
      await tx.orderRequest.create({ data: { orderId: order.orderId, customerId: order.customerId } });
      // The order id is the message id: placing the same order twice fails on the primary key above, and a
      // consumer would skip a second event with it anyway.
      const { messageId } = await this.outbox.add(tx, config.ordersTopic, order, { messageId: order.orderId });
      return messageId;
    });
  }
}
