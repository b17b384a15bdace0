import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { EventContext, IdempotentHandler, NonRetriableHandlerError, OrderedEvent } from 'kafka-exactly-once';
import { APPROVAL_LIMIT_CENTS } from '../consumer-app.config';
import { DEMO_TOPICS } from '../topics/demo-topics';
import { Account } from './account.entity';
import { LedgerEntry } from './ledger-entry.entity';
import type { PaymentProcessed, PaymentRequested } from './payment.events';

/**
 * Applies payments to accounts, in order per account and exactly once: a withdrawal is accepted only if the
 * balance covers it. Every outcome is written to the ledger and published as PaymentProcessed.
 *
 * A payment of the approval limit or more (PAYMENT_APPROVAL_LIMIT_CENTS, default $10,000) is applied only once
 * a row in `payment_approvals` approves it; without one it fails for good. @OrderedEvent then parks its
 * account: the account's later payments wait (a withdrawal must not be judged against a balance that misses
 * an earlier deposit) until an operator approves it and releases the account (docs/operations.md).
 */
@Injectable()
export class PaymentsHandler {
  private readonly logger = new Logger(PaymentsHandler.name);

  constructor(@Optional() @Inject(APPROVAL_LIMIT_CENTS) private readonly approvalLimitCents: bigint = 1_000_000n) {}

  @IdempotentHandler({ topic: DEMO_TOPICS.paymentsRequested, schema: 'com.example.PaymentRequested' })
  // The ordering key is the account (blank around it ignored): an account id of only blanks has none, and such a
  // payment is dead-lettered (key-unresolved) instead of parking anything.
  @OrderedEvent({ key: (e: PaymentRequested) => e.accountId.trim() })
  async onPaymentRequested(event: PaymentRequested, ctx: EventContext): Promise<void> {
    const manager = ctx.manager;
    // Same payment republished under another message id: the ledger already has it, so it is a no-op.
    if (await manager.existsBy(LedgerEntry, { paymentId: event.paymentId })) {
      this.logger.warn(`payment ${event.paymentId} is already in the ledger; ignoring message ${ctx.message.messageId}`);
      return;
    }
    const size = event.amountCents < 0n ? -event.amountCents : event.amountCents;
    if (size >= this.approvalLimitCents && (await manager.query('SELECT 1 FROM payment_approvals WHERE payment_id = $1', [event.paymentId])).length === 0) {
      throw new NonRetriableHandlerError(
        `payment ${event.paymentId} of ${event.amountCents} cents on ${event.accountId} needs an approval (at or over ${this.approvalLimitCents} cents): insert it into payment_approvals, then release the account`,
      );
    }
    // One round trip creates the account when it is new and locks its row either way (ON CONFLICT DO UPDATE takes
    // the row lock, as SELECT ... FOR UPDATE would), returning the balance the rule is judged against.
    const [{ balance_cents: current }] = await manager.query<{ balance_cents: string }[]>(
      'INSERT INTO accounts (account_id, balance_cents) VALUES ($1, 0) ON CONFLICT (account_id) DO UPDATE SET account_id = EXCLUDED.account_id RETURNING balance_cents',
      [event.accountId],
    );
    const balance = BigInt(current);
    const candidate = balance + event.amountCents;
    const accepted = candidate >= 0n;
    if (accepted) await manager.update(Account, { accountId: event.accountId }, { balanceCents: candidate });
    const outcome: PaymentProcessed = {
      paymentId: event.paymentId,
      accountId: event.accountId,
      amountCents: event.amountCents,
      status: accepted ? 'ACCEPTED' : 'REJECTED_INSUFFICIENT_FUNDS',
      balanceAfterCents: accepted ? candidate : balance,
    };
    await manager.insert(LedgerEntry, { ...outcome, processedAt: new Date() });
    ctx.emit(DEMO_TOPICS.paymentsProcessed, outcome, { key: event.accountId });
  }
}
