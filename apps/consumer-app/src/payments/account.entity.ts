import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintColumn } from '../bigint.transformer';

@Entity({ name: 'accounts' })
export class Account {
  @PrimaryColumn({ name: 'account_id', type: 'text' })
  accountId: string;

  @Column({ name: 'balance_cents', type: 'bigint', transformer: bigintColumn })
  balanceCents: bigint;
}
