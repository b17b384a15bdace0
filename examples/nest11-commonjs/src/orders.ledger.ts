import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';

/**
 * A service as a team already has it, written for @nestjs-cls/transactional: it writes through TransactionHost.tx
 * and knows nothing of Kafka. Called from a handler (orders.handler.ts), its writes are in the handler's unit of
 * work (the library lends the unit's transaction to TransactionHost), so they are applied exactly once.
 */
@Injectable()
export class OrdersLedger {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  /** Records an order; the customer's running total after it. */
  async record(order: { orderId: string; customerId: string; amountCents: bigint }): Promise<bigint> {
    await this.txHost.tx.query('INSERT INTO example_orders (order_id, customer_id, amount_cents) VALUES ($1, $2, $3)', [
      order.orderId,
      order.customerId,
      order.amountCents.toString(),
    ]);
    const [{ total }] = await this.txHost.tx.query('SELECT sum(amount_cents)::text AS total FROM example_orders WHERE customer_id = $1', [order.customerId]);
    return BigInt(total);
  }
}
