import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A key's story (the console, the admin API's `GET /kafka-eo/story?key=`, `kafka-eo story --key`) and the dead
 * letters of a key read one page of records, whatever number of records the key has: each of the places a key's
 * records are found in is indexed in the order a key's story pages them (the time the library set the record aside:
 * dead-lettered, moved to a retry tier or parked), so that a page reads its records and stops. The indexes by
 * hash of OperatorQueries1764400900000 (a hash index keeps no order: a page of a key of 10,000 records read all of
 * them, then sorted) are replaced by ordered ones on an MD5 of the key, which keeps an entry small whatever the
 * key's length. Plain `CREATE INDEX`, as for OperatorQueries1764400900000 (docs/guarantees.md, Upgrades); the
 * indexes it replaces are dropped, so that a record written costs no more index entries than before.
 */
export class OperatorPaging1764401100000 implements MigrationInterface {
  name = 'OperatorPaging1764401100000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const [name, definition] of PAGING_INDEXES) await queryRunner.query(`CREATE INDEX IF NOT EXISTS ${name} ON ${definition}`);
    for (const [name] of REPLACED_INDEXES) await queryRunner.query(`DROP INDEX IF EXISTS ${name}`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const [name, definition] of REPLACED_INDEXES) await queryRunner.query(`CREATE INDEX IF NOT EXISTS ${name} ON ${definition}`);
    for (const [name] of PAGING_INDEXES) await queryRunner.query(`DROP INDEX IF EXISTS ${name}`);
  }
}

/** Each index: its name, and its table and definition (build them ahead with `CREATE INDEX CONCURRENTLY IF NOT EXISTS`). */
export const PAGING_INDEXES: ReadonlyArray<readonly [string, string]> = [
  // Dead letters and records on a retry tier by their record key (base64, as recorded), in the order they were set
  // aside: a key's story, and the dead letters of a key (newest first: the same index read backwards).
  [
    'kafka_eo_inbox_letter_key_order',
    `kafka_eo_inbox (consumer_group, md5(outputs->0->>'key'), processed_at, id_digest, scope) WHERE dlq_reason IS NOT NULL OR status = 'retrying'`,
  ],
  // Records parked under an ordering key, or with a record key, in the order they were parked.
  ['kafka_eo_parked_records_key_order', `kafka_eo_parked_records (consumer_group, key_digest, parked_at, id_digest, scope)`],
  ['kafka_eo_parked_records_record_key_order', `kafka_eo_parked_records (consumer_group, md5(record_key), parked_at, id_digest, scope)`],
];

/** The indexes of OperatorQueries1764400900000 these replace, as that migration made them. */
const REPLACED_INDEXES: ReadonlyArray<readonly [string, string]> = [
  ['kafka_eo_inbox_letter_key', `kafka_eo_inbox USING hash ((outputs->0->>'key')) WHERE dlq_reason IS NOT NULL OR status = 'retrying'`],
  ['kafka_eo_parked_records_key_digest', `kafka_eo_parked_records (consumer_group, key_digest)`],
  ['kafka_eo_parked_records_record_key', `kafka_eo_parked_records USING hash (record_key)`],
];
