import { Controller, Inject, UseGuards, UseInterceptors } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { EventContext, OrderedEvent } from 'kafka-exactly-once';
import type { KafkaExactlyOnceEventExtras } from 'kafka-exactly-once/microservices';
import { DATA_LAYER, type DemoDataLayer } from '../data-layer/demo-store';
import { readAs } from '../formats/event-format';
import { DEMO_TOPICS } from '../topics/demo-topics';
import { FrozenAccountsGuard } from './frozen-accounts.guard';
import { HandlerCallsInterceptor } from './handler-calls.interceptor';
import type { PaymentRequested } from './payment.events';
import { PaymentRequestedJson, type PaymentRequestedDto, paymentRequested } from './payment-requested.dto';
import { accountOrderingKey } from './payments.handler';
import { PaymentsLedger } from './payments.ledger';

/**
 * payments.requested as a Nest microservice handler (CONSUMER_APP_TRANSPORT=microservice): an @EventPattern
 * method under KafkaExactlyOnceServer, with the same promises as PaymentsHandler (exactly once, in order per
 * account, a failure parks the account), one payment per call, with Nest's guards and interceptors around it.
 */
@Controller()
@UseGuards(FrozenAccountsGuard)
@UseInterceptors(HandlerCallsInterceptor)
export class PaymentsController {
  constructor(
    private readonly ledger: PaymentsLedger,
    @Inject(DATA_LAYER) private readonly data: DemoDataLayer,
  ) {}

  @EventPattern(DEMO_TOPICS.paymentsRequested, readAs('com.example.PaymentRequested', PaymentRequestedJson) satisfies KafkaExactlyOnceEventExtras)
  @OrderedEvent({ key: accountOrderingKey })
  async onPaymentRequested(@Payload() payment: PaymentRequested | PaymentRequestedDto, @Ctx() ctx: EventContext<unknown>): Promise<void> {
    await this.ledger.apply([{ event: paymentRequested(payment), ctx }], this.data.store(ctx.db));
  }
}
