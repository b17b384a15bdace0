import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Welcome emails sent (one row per sending: exactly once means one row per message id), and the fake mail
 * gateway's outages (a test or an operator of the demo inserts one to make the gateway fail for a while).
 */
export class CreateWelcomeEmails1764400700000 implements MigrationInterface {
  name = 'CreateWelcomeEmails1764400700000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS welcome_emails_sent (
      id bigserial PRIMARY KEY, user_id int NOT NULL, email text NOT NULL, message_id text NOT NULL, topic text NOT NULL, attempt int NOT NULL, sent_at timestamptz NOT NULL DEFAULT now())`);
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS demo_mailer_outages (
      id serial PRIMARY KEY, down_until timestamptz NOT NULL, every_nth_user int NOT NULL DEFAULT 1 CHECK (every_nth_user >= 1))`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS welcome_emails_sent`);
    await queryRunner.query(`DROP TABLE IF EXISTS demo_mailer_outages`);
  }
}
