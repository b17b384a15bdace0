import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * @OrderedEvent parking and the operator tools: parked keys and their records (with the original bytes), the
 * audit of operator actions (which doubles as the queue of releases and replays the consumer carries out), and
 * the outputs of replays until their Kafka transaction is known to have committed.
 */
export class ParkedKeys1764400400000 implements MigrationInterface {
  name = 'ParkedKeys1764400400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // Why a record was dead-lettered, on its inbox row: what operators list and filter by.
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox ADD COLUMN IF NOT EXISTS dlq_reason text, ADD COLUMN IF NOT EXISTS dlq_error jsonb, ADD COLUMN IF NOT EXISTS replayed_at timestamptz`);
    // Dead letters recorded before: their reason and error from the headers of the recorded letter (base64 pairs
    // since 0.2, a text object in 0.1 rows), so that operators see them too.
    const header = (name: string) => `COALESCE(
        (SELECT convert_from(decode(e->>1, 'base64'), 'UTF8') FROM jsonb_array_elements(CASE WHEN jsonb_typeof(outputs->0->'h') = 'array' THEN outputs->0->'h' ELSE '[]'::jsonb END) e
         WHERE e->>0 = '${Buffer.from(name).toString('base64')}' AND e->>1 IS NOT NULL LIMIT 1),
        outputs->0->'headers'->>'${name}')`;
    await queryRunner.query(`
      UPDATE kafka_eo_inbox
      SET dlq_reason = ${header('dlq-reason')},
          dlq_error = jsonb_build_object('name', ${header('dlq-error-class')}, 'message', ${header('dlq-error-message')}, 'stack', ${header('dlq-error-stack')}, 'reason', ${header('dlq-reason')})
      WHERE status IN ('dead-lettered', 'deferred') AND dlq_reason IS NULL AND jsonb_typeof(outputs) = 'array' AND jsonb_array_length(outputs) > 0`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_inbox_dead_letters ON kafka_eo_inbox (consumer_group, processed_at) WHERE dlq_reason IS NOT NULL`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_parked_keys (
        consumer_group text NOT NULL,
        topic text NOT NULL,
        key_digest bytea NOT NULL,
        ordering_key text NOT NULL,
        reason text NOT NULL,
        error jsonb,
        partition int NOT NULL,
        "offset" bigint NOT NULL,
        message_id text NOT NULL,
        parked_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer_group, topic, key_digest)
      )`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_parked_records (
        seq bigserial PRIMARY KEY,
        consumer_group text NOT NULL,
        topic text NOT NULL,
        key_digest bytea NOT NULL,
        partition int NOT NULL,
        "offset" bigint NOT NULL,
        scope text NOT NULL,
        id_digest bytea NOT NULL,
        message_id text NOT NULL,
        record_key bytea,
        value bytea,
        headers jsonb NOT NULL DEFAULT '[]'::jsonb,
        record_timestamp text,
        reason text NOT NULL,
        error jsonb,
        state text NOT NULL DEFAULT 'parked',
        release_failures int NOT NULL DEFAULT 0,
        last_release_error jsonb,
        parked_at timestamptz NOT NULL DEFAULT now(),
        resolved_at timestamptz,
        UNIQUE (consumer_group, topic, partition, "offset")
      )`);
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS kafka_eo_parked_records_by_key ON kafka_eo_parked_records (consumer_group, topic, key_digest, seq) WHERE state = 'parked'`,
    );
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_audit (
        id bigserial PRIMARY KEY,
        consumer_group text NOT NULL,
        action text NOT NULL,
        topic text NOT NULL,
        key_digest bytea,
        ordering_key text,
        scope text,
        id_digest bytea,
        message_id text,
        parked_seq bigint,
        reason text,
        actor text,
        state text NOT NULL,
        result jsonb,
        requested_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz
      )`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_audit_open ON kafka_eo_audit (consumer_group, id) WHERE state IN ('pending', 'running')`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_replays (
        seq bigserial PRIMARY KEY,
        consumer_group text NOT NULL,
        topic text NOT NULL,
        partition int NOT NULL,
        audit_id bigint NOT NULL,
        outputs jsonb NOT NULL,
        settled boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_replays_by_audit ON kafka_eo_replays (audit_id)`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_parked_records_by_id ON kafka_eo_parked_records (consumer_group, scope, id_digest)`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_replays_unsettled ON kafka_eo_replays (consumer_group, seq) WHERE NOT settled`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['kafka_eo_replays', 'kafka_eo_audit', 'kafka_eo_parked_records', 'kafka_eo_parked_keys']) await queryRunner.query(`DROP TABLE IF EXISTS ${table}`);
    await queryRunner.query(`DROP INDEX IF EXISTS kafka_eo_inbox_dead_letters`);
    await queryRunner.query(`ALTER TABLE kafka_eo_inbox DROP COLUMN IF EXISTS dlq_reason, DROP COLUMN IF EXISTS dlq_error, DROP COLUMN IF EXISTS replayed_at`);
  }
}
