import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The audit's `actor` is who the admin API authenticated (the application's `actorOf`, or the token that acted,
 * `token:<name>`); the name a caller gives of itself is kept apart, in `declared_actor` (and, for the outbox's
 * events set aside, `declared_by` beside `resolved_by`), so that nobody reading the audit takes a self-declared
 * label for an identity. Rows written before keep their actor as it was.
 */
export class AuditDeclaredActor1764401000000 implements MigrationInterface {
  name = 'AuditDeclaredActor1764401000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE kafka_eo_audit ADD COLUMN IF NOT EXISTS declared_actor text`);
    await queryRunner.query(`ALTER TABLE kafka_eo_outbox_set_aside ADD COLUMN IF NOT EXISTS declared_by text`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE kafka_eo_outbox_set_aside DROP COLUMN IF EXISTS declared_by`);
    await queryRunner.query(`ALTER TABLE kafka_eo_audit DROP COLUMN IF EXISTS declared_actor`);
  }
}
