import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { BatchEvent, NonRetriableHandlerError } from 'kafka-exactly-once';
import type { EntityManager } from 'typeorm';
import { APPROVAL_LIMIT_CENTS, EVENT_FORMAT } from '../consumer-app.config';
import { jsonInteger } from '../formats/event-format';
import { DEMO_TOPICS } from '../topics/demo-topics';
import type { PaymentProcessed, PaymentRequested } from './payment.events';

/** What the database knows of a payment of the batch (one row per event, in event order). */
interface PaymentFacts {
  /** The payment id in PostgreSQL's canonical uuid form, so that two spellings of one id are one payment. */
  id: string;
  /** Already in the ledger: republished under another message id. */
  known: boolean;
  approved: boolean;
}

/**
 * Applies payments to accounts, in order per account: a withdrawal is accepted only if the balance covers it.
 * Every outcome is written to the ledger and published as PaymentProcessed. The handlers call it in their
 * unit of work's transaction (exactly once, in order per account, is theirs to give): PaymentsHandler with the
 * new payments of a unit of work at once, PaymentsController with one payment at a time.
 *
 * It applies a batch with a handful of set-based statements whatever its number, instead of a few statements
 * per payment. A payment that fails throws, and so fails the batch.
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

  async apply(events: ReadonlyArray<BatchEvent<PaymentRequested>>, manager: EntityManager): Promise<void> {
    // 1. One round trip: each payment's canonical id, whether the ledger has it, whether it is approved. A
    //    payment id that is not a uuid fails the statement, and so the batch; alone, it fails its own payment.
    const facts = await manager.query<PaymentFacts[]>(
      `SELECT v.p::uuid::text AS id,
              EXISTS (SELECT 1 FROM ledger_entries l WHERE l.payment_id = v.p::uuid) AS known,
              EXISTS (SELECT 1 FROM payment_approvals a WHERE a.payment_id = v.p::uuid) AS approved
         FROM unnest($1::text[]) WITH ORDINALITY AS v(p, n) ORDER BY v.n`,
      [events.map((e) => e.event.paymentId)],
    );
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

    // 2. One round trip creates the accounts that are new and locks every account of the batch (ON CONFLICT DO
    //    UPDATE takes the row lock, as SELECT ... FOR UPDATE would), in account order so that two partitions
    //    sharing accounts cannot deadlock, returning the balances the rule is judged against.
    const accountIds = [...new Set(apply.map((a) => a.item.event.accountId))].sort();
    const rows = await manager.query<Array<{ account_id: string; balance_cents: string }>>(
      `INSERT INTO accounts (account_id, balance_cents) SELECT unnest($1::text[]), 0
         ON CONFLICT (account_id) DO UPDATE SET account_id = EXCLUDED.account_id RETURNING account_id, balance_cents`,
      [accountIds],
    );
    const balances = new Map(rows.map((r) => [r.account_id, BigInt(r.balance_cents)]));

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
    await manager.query(`UPDATE accounts a SET balance_cents = v.b FROM unnest($1::text[], $2::bigint[]) AS v(id, b) WHERE a.account_id = v.id`, [
      [...balances.keys()],
      [...balances.values()].map(String),
    ]);
    await manager.query(
      `INSERT INTO ledger_entries (payment_id, account_id, amount_cents, status, balance_after_cents, processed_at)
       SELECT p, a, c, s, b, $6::timestamptz FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[]) AS v(p, a, c, s, b)`,
      [apply.map((a) => a.id), outcomes.map((o) => o.accountId), outcomes.map((o) => String(o.amountCents)), outcomes.map((o) => o.status), outcomes.map((o) => String(o.balanceAfterCents)), new Date()],
    );
    for (const [i, { item }] of apply.entries()) item.ctx.emit(DEMO_TOPICS.paymentsProcessed, this.written(outcomes[i]), { key: outcomes[i].accountId });
  }

  /** PaymentProcessed as its topic carries it: Avro's longs as bigint, or JSON's integers (EVENT_FORMAT=json). */
  private written(outcome: PaymentProcessed): object {
    if (this.eventFormat === 'avro') return outcome;
    return { ...outcome, amountCents: jsonInteger(outcome.amountCents, 'amountCents'), balanceAfterCents: jsonInteger(outcome.balanceAfterCents, 'balanceAfterCents') };
  }
}
