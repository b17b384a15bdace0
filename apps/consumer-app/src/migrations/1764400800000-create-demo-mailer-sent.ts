import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the fake mail gateway sent, by the idempotency key its caller gave: as a real gateway keeps them, outside
 * the consumer's transactions. A second call with a key it knows sends nothing and is counted in `calls`.
 */
export class CreateDemoMailerSent1764400800000 implements MigrationInterface {
  name = 'CreateDemoMailerSent1764400800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS demo_mailer_sent (
      idempotency_key text PRIMARY KEY, user_id int NOT NULL, email text NOT NULL, calls int NOT NULL DEFAULT 1, first_at timestamptz NOT NULL DEFAULT now())`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS demo_mailer_sent`);
  }
}
