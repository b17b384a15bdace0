import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Outbox } from 'kafka-exactly-once';
import { DataSource } from 'typeorm';
import { PaymentRequested, TOPICS } from '../demo-events';

/** What POST /payments answers in outbox mode, once the transaction committed. */
export type PaymentRequestOutcome = { status: 'committed'; paymentId: string; messageId: string } | { status: 'duplicate'; paymentId: string };

/** A request the demo rolls back on purpose after writing its row and its event (x-demo-roll-back): neither may be seen. */
export class RolledBackOnPurpose extends Error {}

/**
 * The outbox path of POST /payments (PAYMENTS_MODE=outbox): the request's row in `payment_requests` and its
 * PaymentRequested event in one PostgreSQL transaction, answered only after the commit. The same paymentId twice
 * is one row and one event (the second request finds the row and writes nothing).
 */
@Injectable()
export class PaymentRequestsService implements OnModuleInit {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly outbox: Outbox,
  ) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query(
      `CREATE TABLE IF NOT EXISTS payment_requests (payment_id uuid PRIMARY KEY, account_id text NOT NULL, amount_cents bigint NOT NULL, requested_at timestamptz NOT NULL)`,
    );
  }

  async request(event: PaymentRequested, options: { messageId?: string; rollBack?: boolean } = {}): Promise<PaymentRequestOutcome> {
    return this.dataSource.transaction(async (manager) => {
      // Validated and encoded first (a bad event throws before anything is written), then the row, then the event.
      const inserted: unknown[] = await manager.query(
        `INSERT INTO payment_requests (payment_id, account_id, amount_cents, requested_at) VALUES ($1, $2, $3, $4) ON CONFLICT (payment_id) DO NOTHING RETURNING payment_id`,
        [event.paymentId, event.accountId, String(event.amountCents), event.requestedAt],
      );
      if (inserted.length === 0) return { status: 'duplicate', paymentId: event.paymentId };
      const { messageId } = await this.outbox.add(manager, TOPICS.paymentsRequested, event, { messageId: options.messageId });
      if (options.rollBack) throw new RolledBackOnPurpose(`payment ${event.paymentId} rolled back on purpose (x-demo-roll-back)`);
      return { status: 'committed', paymentId: event.paymentId, messageId };
    });
  }
}
