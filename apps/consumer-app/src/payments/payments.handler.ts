import { createHash } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { consumerAppConfig } from '../consumer-app.config';
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
  private readonly logger = new Logger(PaymentsHandler.name);
  private readonly strayPercent = consumerAppConfig().strayStatementsPercent;

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
    if (this.strayPercent > 0) for (const { event } of events) this.strayAfterCall(event.paymentId, db);
  }

  /**
   * STRAY_STATEMENTS_PERCENT: for a share of payments, a statement through this call's `ctx.db` sent from a timer
   * after the call returned, as a forgotten `await` would send it. Half fail (a payment id that is not a uuid),
   * half write (a `stray-` user): the library refuses both, and what became of each is logged for the verifier.
   */
  private strayAfterCall(paymentId: string, db: unknown): void {
    const digest = createHash('sha256').update(paymentId).digest();
    if (digest[0] % 100 >= this.strayPercent) return;
    const writes = digest[1] % 2 === 0;
    const store = this.data.store(db);
    setTimeout(() => {
      const statement = writes ? store.addUser({ userId: -(digest.readUInt32BE(2) & 0x7fffffff) - 1, email: `stray-${paymentId}`, signedUpAt: new Date() }) : store.paymentFacts([`stray-${paymentId}`]);
      const what = `stray statement after the call (${writes ? 'write' : 'failing read'}, payment ${paymentId})`;
      statement.then(
        () => this.logger.warn(`${what}: ran`),
        (err: Error) => {
          // The data layers wrap the library's refusal (Drizzle keeps it as the cause). Refused: it never reached PostgreSQL.
          const text = `${err?.message ?? err} ${(err?.cause as Error)?.message ?? ''}`;
          if (/UnitConnectionError|call .*is over|lent for has ended|outside the handler's call/.test(text)) this.logger.log(`${what}: refused`);
          else this.logger.warn(`${what}: ran, and failed in PostgreSQL: ${text.slice(0, 200)}`);
        },
      );
    }, digest[6] % 51);
  }
}

/** A payment's ordering key: its account, blank around it ignored (only blanks: none, key-unresolved). */
export function accountOrderingKey(e: PaymentRequested | PaymentRequestedDto): string {
  return e.accountId.trim();
}
