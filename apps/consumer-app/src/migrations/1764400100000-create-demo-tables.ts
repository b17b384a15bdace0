import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The demo's tables (docs/demo.md). */
export class CreateDemoTables1764400100000 implements MigrationInterface {
  name = 'CreateDemoTables1764400100000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS accounts (account_id text PRIMARY KEY, balance_cents bigint NOT NULL)`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS ledger_entries (
        payment_id uuid PRIMARY KEY,
        account_id text NOT NULL,
        amount_cents bigint NOT NULL,
        status text NOT NULL,
        balance_after_cents bigint NOT NULL,
        processed_at timestamptz NOT NULL
      )`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS ledger_entries_account_idx ON ledger_entries (account_id)`);
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS users (user_id int PRIMARY KEY, email text NOT NULL, signed_up_at timestamptz NOT NULL)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS users`);
    await queryRunner.query(`DROP TABLE IF EXISTS ledger_entries`);
    await queryRunner.query(`DROP TABLE IF EXISTS accounts`);
  }
}
