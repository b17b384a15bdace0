import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What a claim took over (a `failing` row, or a `deferred` one delivered again from other coordinates), kept
 * on the row until the claim completes, so that a claim given back (a chunk cut short) restores the row.
 */
export class InboxTakeovers1764400300000 implements MigrationInterface {
  name = 'InboxTakeovers1764400300000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox ADD COLUMN IF NOT EXISTS taken_over jsonb`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox DROP COLUMN IF EXISTS taken_over`);
  }
}
