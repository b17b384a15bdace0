import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outputs of a unit of work recorded once per unit (a binary blob of every plainly handled record's outputs,
 * each with the record's offset) instead of on each record's inbox row: a unit of 500 records writes one row here
 * instead of updating 500 rows. A row handled that way holds `[{"unit": "<id>"}]` in its `outputs`; an earlier
 * version of the library that meets such a row fails to send it (the output names no topic) instead of sending
 * nothing, so run only this version or later against the inbox once this migration ran. Kept as long as its inbox
 * rows (inbox retention deletes both).
 */
export class UnitOutputs1764400700000 implements MigrationInterface {
  name = 'UnitOutputs1764400700000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE SEQUENCE IF NOT EXISTS kafka_eo_unit_seq`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_unit_outputs (
        id bigint PRIMARY KEY,
        consumer_group text NOT NULL,
        topic text NOT NULL,
        partition integer NOT NULL,
        last_offset bigint NOT NULL,
        outputs bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    // Events are mostly compressed or random bytes already: storing them as they are costs less CPU than pglz.
    await queryRunner.query(`ALTER TABLE kafka_eo_unit_outputs ALTER COLUMN outputs SET STORAGE EXTERNAL`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_unit_outputs_retention ON kafka_eo_unit_outputs (consumer_group, topic, partition, last_offset)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Inbox rows that point to a unit's outputs would lose them with the table (and, the sequence started again,
    // could point to another unit's later): refused while there are any.
    const [pointing] = await queryRunner.query(
      `SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE jsonb_typeof(outputs) = 'array' AND jsonb_array_length(outputs) = 1 AND outputs->0 ? 'unit'`,
    );
    if (pointing.n > 0) {
      throw new Error(
        `UnitOutputs1764400700000 cannot be reverted: ${pointing.n} inbox rows hold their outputs in kafka_eo_unit_outputs. Let inbox retention delete them (or delete the rows of records whose Kafka transactions committed) first`,
      );
    }
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_unit_outputs`);
    await queryRunner.query(`DROP SEQUENCE IF EXISTS kafka_eo_unit_seq`);
  }
}
