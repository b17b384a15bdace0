import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What each instance of a group reports for the operator console of any other (docs/console.md, "The whole
 * group"): `kafka_eo_instances`, one row per running process, written again every `operations.reportIntervalMs`
 * (its partitions, their lag, activity and last error, its memory and event-loop delay, its version), and
 * `kafka_eo_samples`, each partition's counts and gauges over a bucket of time: 10 s buckets for the last hour,
 * folded into 1 min buckets up to 6 h and 5 min buckets up to a day and a bit, then deleted (`span_s` is the
 * bucket's length). Neither is read by the consumer's protocol: dropping them loses the console's history only.
 */
export class InstanceReports1764401300000 implements MigrationInterface {
  name = 'InstanceReports1764401300000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_instances (
        consumer_group text NOT NULL,
        instance_id text NOT NULL,
        started_at timestamptz NOT NULL,
        reported_at timestamptz NOT NULL,
        interval_ms integer NOT NULL,
        stopped_at timestamptz,
        report jsonb NOT NULL,
        PRIMARY KEY (consumer_group, instance_id)
      )`);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_samples (
        consumer_group text NOT NULL,
        topic text NOT NULL,
        partition integer NOT NULL,
        span_s integer NOT NULL,
        at timestamptz NOT NULL,
        records bigint NOT NULL DEFAULT 0,
        units bigint NOT NULL DEFAULT 0,
        dead_letters bigint NOT NULL DEFAULT 0,
        parks bigint NOT NULL DEFAULT 0,
        retry_moves bigint NOT NULL DEFAULT 0,
        lag bigint,
        unit_p50_ms real,
        unit_p99_ms real,
        outbox_waiting bigint,
        outbox_oldest_ms bigint,
        PRIMARY KEY (consumer_group, span_s, at, topic, partition)
      )`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_samples_by_time ON kafka_eo_samples (consumer_group, at)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // The console then shows this instance only, and no history.
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_samples`);
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_instances`);
  }
}
