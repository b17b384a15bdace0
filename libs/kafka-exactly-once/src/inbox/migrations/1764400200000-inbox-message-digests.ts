import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Keys the inbox by the SHA-256 of a message id's raw bytes within a scope (the topic, or '' for a group-wide
 * scope), so that an id PostgreSQL cannot store or index as text (NUL, invalid UTF-8, megabytes long) still
 * deduplicates, and two topics may reuse an id. Adds the per-record failure count that bounds the isolation of
 * a record whose unit of work keeps failing (it survives restarts). Existing rows get scope = their topic.
 */
export class InboxMessageDigests1764400200000 implements MigrationInterface {
  name = 'InboxMessageDigests1764400200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE kafka_eo_inbox
        ADD COLUMN IF NOT EXISTS scope text,
        ADD COLUMN IF NOT EXISTS id_digest bytea,
        ADD COLUMN IF NOT EXISTS failures integer NOT NULL DEFAULT 0,
        ADD COLUMN IF NOT EXISTS last_error jsonb`);
    await queryRunner.query(`UPDATE kafka_eo_inbox SET scope = topic, id_digest = sha256(convert_to(message_id, 'UTF8')) WHERE id_digest IS NULL`);
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox ALTER COLUMN scope SET NOT NULL, ALTER COLUMN id_digest SET NOT NULL`);
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox DROP CONSTRAINT IF EXISTS kafka_eo_inbox_pkey`);
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox ADD CONSTRAINT kafka_eo_inbox_pkey PRIMARY KEY (consumer_group, scope, id_digest)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // The previous version knows neither isolated failures nor deferred dead letters: a failing record is
    // handled afresh, a deferred one counts as dead-lettered.
    await queryRunner.query(`DELETE FROM kafka_eo_inbox WHERE status IN ('failing', 'claimed')`);
    await queryRunner.query(`UPDATE kafka_eo_inbox SET status = 'dead-lettered' WHERE status = 'deferred'`);
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox DROP CONSTRAINT IF EXISTS kafka_eo_inbox_pkey`);
    await queryRunner.query(`DELETE FROM kafka_eo_inbox a USING kafka_eo_inbox b WHERE a.consumer_group = b.consumer_group AND a.message_id = b.message_id AND a.ctid < b.ctid`);
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox ADD CONSTRAINT kafka_eo_inbox_pkey PRIMARY KEY (consumer_group, message_id)`);
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox DROP COLUMN scope, DROP COLUMN id_digest, DROP COLUMN failures, DROP COLUMN last_error`);
  }
}
