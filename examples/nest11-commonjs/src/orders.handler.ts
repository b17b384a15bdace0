import { Injectable } from '@nestjs/common';
import { IdempotentHandler, OrderedEvent, type EventContext } from 'kafka-exactly-once';
import { config } from './config';
import { OrdersLedger } from './orders.ledger';

/** com.example.OrderPlaced (schemas/order-placed.v1.avsc); Avro `long` decodes to bigint. */
export interface OrderPlaced {
  orderId: string;
  customerId: string;
  amountCents: bigint;
}

@Injectable()
export class OrdersHandler {
  constructor(private readonly ledger: OrdersLedger) {}

  /**
   * Records the order and emits OrderAccepted with the customer's running total, exactly once: the insert, the
   * output and the consumer offset commit together or not at all, and a duplicate publish is skipped. The
   * running total depends on order, which @OrderedEvent keeps per customer even when an order fails for good.
   */
  @IdempotentHandler({ topic: config.ordersTopic, schema: 'com.example.OrderPlaced' })
  @OrderedEvent({ key: (order: OrderPlaced) => order.customerId })
  async onOrderPlaced(order: OrderPlaced, ctx: EventContext): Promise<void> {
    // The application's own service, through TransactionHost: its writes are in this unit of work's transaction.
    const total = await this.ledger.record(order);
    ctx.emit(config.acceptedTopic, { ...order, customerTotalCents: total }, { key: order.customerId });
  }
}
