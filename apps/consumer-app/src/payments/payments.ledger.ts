import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { BatchEvent, NonRetriableHandlerError } from 'kafka-exactly-once';
import { APPROVAL_LIMIT_CENTS, EVENT_FORMAT } from '../consumer-app.config';
import type { DemoStore } from '../data-layer/demo-store';
import { jsonInteger } from '../formats/event-format';
import { DEMO_TOPICS } from '../topics/demo-topics';
import type { PaymentProcessed, PaymentRequested } from './payment.events';

/**
 * Applies payments to accounts, in order per account: a withdrawal is accepted only if the balance covers it.
 * Every outcome is written to the ledger and published as PaymentProcessed. The handlers call it in their
 * unit of work's transaction (exactly once, in order per account, is theirs to give): PaymentsHandler with the
 * new payments of a unit of work at once, PaymentsController with one payment at a time.
 *
 * It applies a batch with a handful of set-based statements whatever its number, instead of a few statements
 * per payment, through the data layer the application runs (DATA_LAYER: TypeORM, Prisma, Drizzle or Kysely, each
 * a DemoStore over the handler's `ctx.db`), with the same outcomes in each. A payment that fails throws, and so
 * fails the batch.
 *
 * A payment of the approval limit or more (PAYMENT_APPROVAL_LIMIT_CENTS, default $10,000) is applied only once
 * a row in `payment_approvals` approves it; without one it fails for good. @OrderedEvent then parks its
 * account: the account's later payments wait (a withdrawal must not be judged against a balance that misses
 * an earlier deposit) until an operator approves it and releases the account (docs/operations.md).
 */
@Injectable()
export class PaymentsLedger {
  private readonly logger = new Logger(PaymentsLedger.name);

  constructor(
    @Optional() @Inject(APPROVAL_LIMIT_CENTS) private readonly approvalLimitCents: bigint = 1_000_000n,
    @Optional() @Inject(EVENT_FORMAT) private readonly eventFormat: 'avro' | 'json' = 'avro',
  ) {}

  /**
   * Applies `events` (in offset order) through `store`: the demo's statements over the handler's `ctx.db`, in
   * whatever data layer the application runs (DATA_LAYER), always in the unit of work's transaction.
   */
  async apply(events: ReadonlyArray<BatchEvent<PaymentRequested>>, store: DemoStore): Promise<void> {
    // 1. One round trip: each payment's canonical id, whether the ledger has it, whether it is approved. A
    //    payment id that is not a uuid fails the statement, and so the batch; alone, it fails its own payment.
    const facts = await store.paymentFacts(events.map((e) => e.event.paymentId));
    const seen = new Set<string>();
    const apply: Array<{ item: BatchEvent<PaymentRequested>; id: string }> = [];
    for (const [i, item] of events.entries()) {
      const { id, known, approved } = facts[i];
      // Same payment republished under another message id (earlier, or earlier in this batch): a no-op.
      if (known || seen.has(id)) {
        this.logger.warn(`payment ${item.event.paymentId} is already in the ledger; ignoring message ${item.ctx.message.messageId}`);
        continue;
      }
      seen.add(id);
      const { amountCents, accountId } = item.event;
      const size = amountCents < 0n ? -amountCents : amountCents;
      if (size >= this.approvalLimitCents && !approved) {
        throw new NonRetriableHandlerError(
          `payment ${item.event.paymentId} of ${amountCents} cents on ${accountId} needs an approval (at or over ${this.approvalLimitCents} cents): insert it into payment_approvals, then release the account`,
        );
      }
      apply.push({ item, id });
    }
    if (apply.length === 0) return;

    // 2. One round trip creates the accounts that are new and locks every account of the batch, in account order
    //    so that two partitions sharing accounts cannot deadlock, returning the balances the rule is judged against.
    const accountIds = [...new Set(apply.map((a) => a.item.event.accountId))].sort();
    const balances = await store.lockAccounts(accountIds);

    // 3. The rule, folded in offset order per account.
    const outcomes = apply.map(({ item }) => {
      const { paymentId, accountId, amountCents } = item.event;
      const balance = balances.get(accountId)!;
      const candidate = balance + amountCents;
      const accepted = candidate >= 0n;
      if (accepted) balances.set(accountId, candidate);
      const outcome: PaymentProcessed = {
        paymentId,
        accountId,
        amountCents,
        status: accepted ? 'ACCEPTED' : 'REJECTED_INSUFFICIENT_FUNDS',
        balanceAfterCents: accepted ? candidate : balance,
      };
      return outcome;
    });

    // 4. One round trip each for the balances and the ledger (a balance out of bigint's range fails here).
    await store.setBalances(balances);
    await store.addLedgerEntries(
      outcomes.map((o, i) => ({ paymentId: apply[i].id, accountId: o.accountId, amountCents: o.amountCents, status: o.status, balanceAfterCents: o.balanceAfterCents })),
      new Date(),
    );
    for (const [i, { item }] of apply.entries()) item.ctx.emit(DEMO_TOPICS.paymentsProcessed, this.written(outcomes[i]), { key: outcomes[i].accountId });
  }

  /** PaymentProcessed as its topic carries it: Avro's longs as bigint, or JSON's integers (EVENT_FORMAT=json). */
  private written(outcome: PaymentProcessed): object {
    if (this.eventFormat === 'avro') return outcome;
    return { ...outcome, amountCents: jsonInteger(outcome.amountCents, 'amountCents'), balanceAfterCents: jsonInteger(outcome.balanceAfterCents, 'balanceAfterCents') };
  }
}
