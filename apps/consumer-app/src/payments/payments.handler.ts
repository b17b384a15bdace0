import { Injectable, Logger } from '@nestjs/common';
import { EventContext, IdempotentHandler } from 'kafka-exactly-once';
import { DEMO_TOPICS } from '../topics/demo-topics';
import { Account } from './account.entity';
import { LedgerEntry } from './ledger-entry.entity';
import type { PaymentProcessed, PaymentRequested } from './payment.events';

/**
 * Applies payments to accounts, in order per account and exactly once: a withdrawal is accepted only if the
 * balance covers it. Every outcome is written to the ledger and published as PaymentProcessed.
 */
@Injectable()
export class PaymentsHandler {
  private readonly logger = new Logger(PaymentsHandler.name);

  @IdempotentHandler({ topic: DEMO_TOPICS.paymentsRequested, schema: 'com.example.PaymentRequested' })
  async onPaymentRequested(event: PaymentRequested, ctx: EventContext): Promise<void> {
    const manager = ctx.manager;
    // Same payment republished under another message id: the ledger already has it, so it is a no-op.
    if (await manager.existsBy(LedgerEntry, { paymentId: event.paymentId })) {
      this.logger.warn(`payment ${event.paymentId} is already in the ledger; ignoring message ${ctx.message.messageId}`);
      return;
    }
    await manager.createQueryBuilder().insert().into(Account).values({ accountId: event.accountId, balanceCents: 0n }).orIgnore().execute();
    const account = await manager.findOneOrFail(Account, { where: { accountId: event.accountId }, lock: { mode: 'pessimistic_write' } });

    const candidate = account.balanceCents + event.amountCents;
    const accepted = candidate >= 0n;
    if (accepted) {
      account.balanceCents = candidate;
      await manager.save(account);
    }
    const outcome: PaymentProcessed = {
      paymentId: event.paymentId,
      accountId: event.accountId,
      amountCents: event.amountCents,
      status: accepted ? 'ACCEPTED' : 'REJECTED_INSUFFICIENT_FUNDS',
      balanceAfterCents: account.balanceCents,
    };
    await manager.insert(LedgerEntry, { ...outcome, processedAt: new Date() });
    ctx.emit(DEMO_TOPICS.paymentsProcessed, outcome, { key: event.accountId });
  }
}
