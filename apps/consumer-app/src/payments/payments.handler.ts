import { Inject, Injectable } from '@nestjs/common';
import { BatchContext, BatchEvent, IdempotentHandler, OrderedEvent } from 'kafka-exactly-once';
import { DATA_LAYER, type DemoDataLayer } from '../data-layer/demo-store';
import { readAs } from '../formats/event-format';
import { DEMO_TOPICS } from '../topics/demo-topics';
import type { PaymentRequested } from './payment.events';
import { PaymentRequestedJson, type PaymentRequestedDto, paymentRequested } from './payment-requested.dto';
import { PaymentsLedger } from './payments.ledger';

/**
 * payments.requested, applied exactly once and in order per account (the application's default way, with
 * @IdempotentHandler). A batch handler: it gets the new payments of a unit of work at once (in offset order)
 * for PaymentsLedger's set-based statements. When any payment of the batch fails, the library rolls the batch
 * back and hands the payments over one at a time, so only the failing one is retried and parks its account.
 */
@Injectable()
export class PaymentsHandler {
  constructor(
    private readonly ledger: PaymentsLedger,
    @Inject(DATA_LAYER) private readonly data: DemoDataLayer,
  ) {}

  @IdempotentHandler({ topic: DEMO_TOPICS.paymentsRequested, ...readAs('com.example.PaymentRequested', PaymentRequestedJson), batch: true })
  // The ordering key is the account (blank around it ignored): an account id of only blanks has none, and such a
  // payment is dead-lettered (key-unresolved) instead of parking anything.
  @OrderedEvent({ key: accountOrderingKey })
  async onPaymentsRequested(events: ReadonlyArray<BatchEvent<PaymentRequested | PaymentRequestedDto>>, { db }: BatchContext<unknown>): Promise<void> {
    // ctx.db: the data layer of DATA_LAYER on the unit of work's transaction (TypeORM's EntityManager by default).
    await this.ledger.apply(events.map(({ event, ctx }) => ({ event: paymentRequested(event), ctx })), this.data.store(db));
  }
}

/** A payment's ordering key: its account, blank around it ignored (only blanks: none, key-unresolved). */
export function accountOrderingKey(e: PaymentRequested | PaymentRequestedDto): string {
  return e.accountId.trim();
}
