import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'users' })
export class User {
  @PrimaryColumn({ name: 'user_id', type: 'int' })
  userId: number;

  @Column({ type: 'text' })
  email: string;

  @Column({ name: 'signed_up_at', type: 'timestamptz' })
  signedUpAt: Date;
}
