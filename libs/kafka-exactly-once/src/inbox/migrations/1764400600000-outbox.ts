import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The transactional outbox (docs/outbox.md). `kafka_eo_outbox` holds the events written by `Outbox.add` in the
 * writers' own transactions until the relay has them in Kafka; its columns `id`, `aggregatetype`, `aggregateid`,
 * `type` and `payload` are those Debezium's outbox event router reads. `position` orders the events of one key
 * in their writers' commit order (a writer takes the key's lock before its row gets a position); `batch` is the
 * relay batch an event was given to (NULL: waiting). `kafka_eo_outbox_relay` is the relay's single row (its `outbox_id`, made when the row
 * is, names this database's outbox in the checkpoint's key: a database made again never reads an old one's);
 * `kafka_eo_outbox_set_aside` keeps the events Kafka refused for good.
 */
export class Outbox1764400600000 implements MigrationInterface {
  name = 'Outbox1764400600000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE kafka_eo_outbox (
        position bigserial PRIMARY KEY,
        id text NOT NULL,
        aggregatetype text NOT NULL,
        aggregateid bytea NOT NULL,
        type text NOT NULL,
        payload bytea NOT NULL,
        headers bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        batch bigint
      )`);
    await queryRunner.query(`CREATE INDEX kafka_eo_outbox_waiting ON kafka_eo_outbox (position) WHERE batch IS NULL`);
    await queryRunner.query(`CREATE INDEX kafka_eo_outbox_batch ON kafka_eo_outbox (batch) WHERE batch IS NOT NULL`);
    await queryRunner.query(`
      CREATE TABLE kafka_eo_outbox_relay (
        id int PRIMARY KEY CHECK (id = 1),
        name text NOT NULL,
        outbox_id uuid NOT NULL DEFAULT gen_random_uuid(),
        last_batch bigint NOT NULL DEFAULT 0,
        relayed_batch bigint NOT NULL DEFAULT 0,
        relayed bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`
      CREATE TABLE kafka_eo_outbox_set_aside (
        position bigint PRIMARY KEY,
        id text NOT NULL,
        aggregatetype text NOT NULL,
        aggregateid bytea NOT NULL,
        type text NOT NULL,
        payload bytea NOT NULL,
        headers bytea NOT NULL,
        created_at timestamptz NOT NULL,
        set_aside_at timestamptz NOT NULL DEFAULT now(),
        reason text NOT NULL,
        state text NOT NULL DEFAULT 'set-aside' CHECK (state IN ('set-aside', 'retried', 'discarded')),
        resolved_at timestamptz,
        resolved_by text,
        note text
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_outbox_set_aside`);
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_outbox_relay`);
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_outbox`);
  }
}
