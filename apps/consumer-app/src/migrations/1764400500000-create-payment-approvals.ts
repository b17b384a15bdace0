import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Approvals of large payments (a payment at or over the approval limit is applied only once approved). */
export class CreatePaymentApprovals1764400500000 implements MigrationInterface {
  name = 'CreatePaymentApprovals1764400500000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS payment_approvals (payment_id uuid PRIMARY KEY, approved_by text NOT NULL, approved_at timestamptz NOT NULL DEFAULT now())`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS payment_approvals`);
  }
}
