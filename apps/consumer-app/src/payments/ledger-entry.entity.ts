import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintColumn } from '../bigint.transformer';

export type PaymentStatus = 'ACCEPTED' | 'REJECTED_INSUFFICIENT_FUNDS';

@Entity({ name: 'ledger_entries' })
export class LedgerEntry {
  @PrimaryColumn({ name: 'payment_id', type: 'uuid' })
  paymentId: string;

  @Column({ name: 'account_id', type: 'text' })
  accountId: string;

  @Column({ name: 'amount_cents', type: 'bigint', transformer: bigintColumn })
  amountCents: bigint;

  @Column({ type: 'text' })
  status: PaymentStatus;

  @Column({ name: 'balance_after_cents', type: 'bigint', transformer: bigintColumn })
  balanceAfterCents: bigint;

  @Column({ name: 'processed_at', type: 'timestamptz' })
  processedAt: Date;
}
