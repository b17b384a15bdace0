import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The inbox: one row per handled message id and consumer group, with the outputs its handling emitted (so a
 * redelivery can re-send them without calling the handler again). Idempotent (IF NOT EXISTS), so it can run
 * both from the library at boot and from an application's own TypeORM migrations.
 */
export class CreateKafkaEoInbox1764400000000 implements MigrationInterface {
  name = 'CreateKafkaEoInbox1764400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_inbox (
        consumer_group text NOT NULL,
        message_id text NOT NULL,
        topic text NOT NULL,
        partition integer NOT NULL,
        "offset" bigint NOT NULL,
        status text NOT NULL DEFAULT 'claimed',
        attempts integer NOT NULL DEFAULT 0,
        outputs jsonb NOT NULL DEFAULT '[]'::jsonb,
        claimed_at timestamptz NOT NULL DEFAULT now(),
        processed_at timestamptz,
        CONSTRAINT kafka_eo_inbox_pkey PRIMARY KEY (consumer_group, message_id)
      )`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_inbox_processed_at_idx ON kafka_eo_inbox (processed_at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_inbox`);
  }
}
