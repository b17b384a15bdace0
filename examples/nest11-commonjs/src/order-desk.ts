import { Injectable } from '@nestjs/common';
import { Transactional, TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Outbox } from 'kafka-exactly-once';
import { config } from './config';

/**
 * Where orders come in (an HTTP controller would call it): the request's row and its OrderPlaced event are written
 * in one transaction, opened by @Transactional(). Outbox.add joins it: no EntityManager is passed, and the event
 * reaches Kafka if and only if the row commits.
 */
@Injectable()
export class OrderDesk {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly outbox: Outbox,
  ) {}

  @Transactional()
  async place(order: { orderId: string; customerId: string; amountCents: bigint }): Promise<string> {
    await this.txHost.tx.query('INSERT INTO example_order_requests (order_id, customer_id) VALUES ($1, $2)', [order.orderId, order.customerId]);
    // The order id is the message id: placing the same order twice fails on the primary key above, and a
    // consumer would skip a second event with it anyway.
    const { messageId } = await this.outbox.add(config.ordersTopic, order, { messageId: order.orderId });
    return messageId;
  }
}
