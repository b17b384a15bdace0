import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Bulk actions of the operator tools (docs/console.md, Bulk actions): replay the dead letters, release the parked
 * keys, retry or discard the outbox's events set aside that a filter matches, at a bounded rate, resumable.
 *
 * - `kafka_eo_bulk_operations`: one row per bulk action, with its filter, its progress (the cursor: the last item
 *   walked, in the order items are walked) and the lease of the instance walking it. A unique partial index keeps
 *   one running operation per group, kind, action and filter: the same bulk action started twice, from anywhere,
 *   is the same operation.
 * - `kafka_eo_audit.bulk_id`: the bulk action an operator action (a replay, a release) was queued by, so that
 *   its progress counts how its items ended.
 * - The dead letters waiting for an operator, indexed in the order a bulk action walks them.
 */
export class BulkOperations1764401400000 implements MigrationInterface {
  name = 'BulkOperations1764401400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_bulk_operations (
        id bigserial PRIMARY KEY,
        consumer_group text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('dead-letters', 'parked-keys', 'outbox-set-aside')),
        action text NOT NULL CHECK (action IN ('replay', 'discard', 'release', 'retry')),
        filter jsonb NOT NULL,
        filter_digest text NOT NULL,
        reason text NOT NULL,
        actor text,
        declared_actor text,
        rate_per_second int NOT NULL CHECK (rate_per_second BETWEEN 1 AND 100),
        state text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'done', 'cancelled', 'failed')),
        matched int NOT NULL,
        matched_at_least boolean NOT NULL DEFAULT false,
        until timestamptz NOT NULL,
        acted int NOT NULL DEFAULT 0,
        skipped int NOT NULL DEFAULT 0,
        skip_reasons jsonb NOT NULL DEFAULT '{}'::jsonb,
        failed int NOT NULL DEFAULT 0,
        cursor text,
        walked_at timestamptz,
        last_error text,
        lease_owner text,
        lease_until timestamptz,
        cancelled_by text,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz
      )`);
    await queryRunner.query(
      `CREATE UNIQUE INDEX IF NOT EXISTS kafka_eo_bulk_operations_running ON kafka_eo_bulk_operations (consumer_group, kind, action, filter_digest) WHERE state = 'running'`,
    );
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_bulk_operations_list ON kafka_eo_bulk_operations (consumer_group, id)`);
    await queryRunner.query(`ALTER TABLE kafka_eo_audit ADD COLUMN IF NOT EXISTS bulk_id bigint`);
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_audit_bulk ON kafka_eo_audit (bulk_id, state) WHERE bulk_id IS NOT NULL`);
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS kafka_eo_inbox_open_dead_letter_order ON kafka_eo_inbox (consumer_group, processed_at, id_digest, scope) WHERE dlq_reason IS NOT NULL AND status IN ('dead-lettered', 'deferred')`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS kafka_eo_inbox_open_dead_letter_order`);
    await queryRunner.query(`DROP INDEX IF EXISTS kafka_eo_audit_bulk`);
    await queryRunner.query(`ALTER TABLE kafka_eo_audit DROP COLUMN IF EXISTS bulk_id`);
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_bulk_operations`);
  }
}
