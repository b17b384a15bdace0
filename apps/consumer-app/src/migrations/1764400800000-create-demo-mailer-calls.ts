import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The fake mail gateway's own record of the calls it got, by the idempotency key its caller gave, as a real
 * gateway keeps them outside the consumer's transactions: every call (`calls`), those it failed (`failed`), and
 * when it sent the email (`sent_at`, at the first call it did not fail; a later call with the key sends nothing).
 */
export class CreateDemoMailerCalls1764400800000 implements MigrationInterface {
  name = 'CreateDemoMailerCalls1764400800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS demo_mailer_calls (
      idempotency_key text PRIMARY KEY, user_id int NOT NULL, email text NOT NULL,
      calls int NOT NULL DEFAULT 0, failed int NOT NULL DEFAULT 0, sent_at timestamptz)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS demo_mailer_calls`);
  }
}
