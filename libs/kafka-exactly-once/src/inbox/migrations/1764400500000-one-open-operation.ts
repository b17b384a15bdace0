import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * At most one open (pending or running) replay per dead letter and one open release per parked key, held by
 * PostgreSQL: two operators asking at the same moment get the same queued operation instead of two. Open
 * duplicates queued before these indexes existed are closed as failed, naming the operation that carries the
 * request out (the oldest, which the consumer runs first).
 */
export class OneOpenOperation1764400500000 implements MigrationInterface {
  name = 'OneOpenOperation1764400500000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const [action, columns] of [
      ['replay', ['scope', 'id_digest']],
      ['release', ['topic', 'key_digest']],
    ] as const) {
      const same = columns.map((c) => `b.${c} = a.${c}`).join(' AND ');
      await queryRunner.query(`
        UPDATE kafka_eo_audit a
        SET state = 'failed', finished_at = now(),
            result = jsonb_build_object('error', jsonb_build_object('name', 'DuplicateRequest', 'message',
              'a second open ${action} of the same ${action === 'replay' ? 'dead letter' : 'key'}; operation ' || (
                SELECT min(b.id) FROM kafka_eo_audit b WHERE b.consumer_group = a.consumer_group AND b.action = a.action AND ${same} AND b.state IN ('pending', 'running')) || ' carries it out'))
        WHERE a.action = '${action}' AND a.state IN ('pending', 'running')
          AND EXISTS (SELECT 1 FROM kafka_eo_audit b WHERE b.consumer_group = a.consumer_group AND b.action = a.action AND ${same} AND b.state IN ('pending', 'running') AND b.id < a.id)`);
      await queryRunner.query(
        `CREATE UNIQUE INDEX IF NOT EXISTS kafka_eo_audit_open_${action} ON kafka_eo_audit (consumer_group, ${columns.join(', ')}) WHERE action = '${action}' AND state IN ('pending', 'running')`,
      );
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const action of ['replay', 'release']) await queryRunner.query(`DROP INDEX IF EXISTS kafka_eo_audit_open_${action}`);
  }
}
