import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Indexes for the operator tools (the console, the admin API and `kafka-eo`), so that each of their requests reads
 * the rows it shows and not whole tables, whatever their size: a story by coordinates, by key or by message id,
 * the overview's counts, the lists of dead letters, records on retry tiers and parked keys, a key's parked records
 * and the operators' actions on a record.
 *
 * Keys and message ids can be any length (a btree entry cannot be over about 2.7 kB, and a write that made one
 * would fail): they are indexed by hash, which keeps a 32-bit hash of any value. Plain `CREATE INDEX` (the
 * library's migrations run in one transaction, where `CONCURRENTLY` cannot): it holds off writes to the table for
 * the time it takes (docs/guarantees.md, Upgrades, gives it on 1,000,000 inbox rows and how to build them ahead
 * without that lock: under these names, `IF NOT EXISTS` then skips them).
 */
export class OperatorQueries1764400900000 implements MigrationInterface {
  name = 'OperatorQueries1764400900000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const [name, definition] of INDEXES) await queryRunner.query(`CREATE INDEX IF NOT EXISTS ${name} ON ${definition}`);
    // The dead letters' index, with the list's tie-break: a page is read from it in order, with no sort.
    await queryRunner.query(`DROP INDEX IF EXISTS kafka_eo_inbox_dead_letters`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE INDEX IF NOT EXISTS kafka_eo_inbox_dead_letters ON kafka_eo_inbox (consumer_group, processed_at) WHERE dlq_reason IS NOT NULL`);
    for (const [name] of INDEXES) await queryRunner.query(`DROP INDEX IF EXISTS ${name}`);
  }
}

/** Each index: its name, and its table and definition. */
export const INDEXES: ReadonlyArray<readonly [string, string]> = [
  // A story by coordinates (and an operator's divert of a record's outputs).
  ['kafka_eo_inbox_coordinates', `kafka_eo_inbox (consumer_group, topic, partition, "offset")`],
  // The dead-letter list, newest first, and the overview's count of those waiting for an operator (read from the
  // index alone).
  ['kafka_eo_inbox_dead_letter_list', `kafka_eo_inbox (consumer_group, processed_at, id_digest) WHERE dlq_reason IS NOT NULL`],
  ['kafka_eo_inbox_open_dead_letters', `kafka_eo_inbox (consumer_group) WHERE dlq_reason IS NOT NULL AND status IN ('dead-lettered', 'deferred')`],
  // Records on retry tiers: the list, the longest waiting first, and the overview's count (read from the index alone).
  ['kafka_eo_inbox_retrying', `kafka_eo_inbox (consumer_group, processed_at, id_digest) WHERE status = 'retrying'`],
  ['kafka_eo_inbox_waiting_retries', `kafka_eo_inbox (consumer_group) WHERE dlq_reason IS NULL AND status = 'retrying'`],
  // A dead letter's or a waiting retry's record key (base64, as recorded): a story by key, the dead letters of a key.
  ['kafka_eo_inbox_letter_key', `kafka_eo_inbox USING hash ((outputs->0->>'key')) WHERE dlq_reason IS NOT NULL OR status = 'retrying'`],
  // A story by key: the records parked under an ordering key or with a record key, whatever their state.
  ['kafka_eo_parked_records_key_digest', `kafka_eo_parked_records (consumer_group, key_digest)`],
  ['kafka_eo_parked_records_record_key', `kafka_eo_parked_records USING hash (record_key)`],
  // Parked keys by key (any topic), and their list, the oldest first.
  ['kafka_eo_parked_keys_key_digest', `kafka_eo_parked_keys (consumer_group, key_digest)`],
  ['kafka_eo_parked_keys_list', `kafka_eo_parked_keys (consumer_group, parked_at, key_digest)`],
  // The operators' actions on a record (a dead letter's history, a story) and on a key.
  ['kafka_eo_audit_record', `kafka_eo_audit (consumer_group, id_digest)`],
  ['kafka_eo_audit_key', `kafka_eo_audit (consumer_group, topic, key_digest)`],
  // A story's outbox events, by message id or key.
  ['kafka_eo_outbox_id', `kafka_eo_outbox USING hash (id)`],
  ['kafka_eo_outbox_key', `kafka_eo_outbox USING hash (aggregateid)`],
  ['kafka_eo_outbox_set_aside_id', `kafka_eo_outbox_set_aside USING hash (id)`],
  ['kafka_eo_outbox_set_aside_key', `kafka_eo_outbox_set_aside USING hash (aggregateid)`],
  // The events still set aside (the table keeps those retried or discarded, as their audit): the overview's count.
  ['kafka_eo_outbox_set_aside_open', `kafka_eo_outbox_set_aside (position) WHERE state = 'set-aside'`],
];
