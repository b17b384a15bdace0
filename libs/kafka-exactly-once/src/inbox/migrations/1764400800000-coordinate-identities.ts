import type { MigrationInterface, QueryRunner } from 'typeorm';
import { coordinatesDigest } from '../../engine/record-identity';

/** Rows re-keyed per statement. */
const BATCH = 1000;

/**
 * Records without a `message-id` header are known by their coordinates in a namespace of their own from 0.5 on
 * (engine/record-identity.ts): their inbox key's digest is a SHA3-256, where versions before it used the SHA-256
 * of `topic/partition/offset`, the very digest a header spelling those coordinates gets. This re-keys the rows
 * those versions wrote for such records (with their parked copies and the operators' actions on them), so that
 * such a record delivered again after the upgrade is still a replay, and a forged header no longer reaches them.
 *
 * A row is one of them when its id is coordinates and its digest that id's SHA-256, at those very coordinates
 * (where the record was consumed), or on a retry tier of that topic (a record that moved to one is known by
 * where it was first consumed). A header that spelled another record's coordinates sits at its own record's
 * coordinates: it is not taken. PostgreSQL has no SHA3: the digests are computed here, in batches.
 */
export class CoordinateIdentities1764400800000 implements MigrationInterface {
  name = 'CoordinateIdentities1764400800000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (;;) {
      const rows: Array<{ consumer_group: string; scope: string; digest: string; message_id: string }> = await queryRunner.query(
        `SELECT consumer_group, scope, encode(id_digest, 'hex') AS digest, message_id FROM kafka_eo_inbox i
         WHERE message_id ~ '^[A-Za-z0-9._-]+/[0-9]+/[0-9]+$' AND id_digest = sha256(convert_to(message_id, 'UTF8'))
           AND (message_id = topic || '/' || partition || '/' || "offset" OR starts_with(topic, split_part(message_id, '/', 1) || '.retry.'))
         LIMIT ${BATCH}`,
      );
      if (rows.length === 0) return;
      await rekey(queryRunner, rows.map((r) => ({ group: r.consumer_group, scope: r.scope, from: r.digest, to: coordinatesDigest(r.message_id) })));
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Back to the SHA-256 of the id, for the rows whose digest is their coordinates' SHA3-256.
    let after = '';
    for (;;) {
      const rows: Array<{ consumer_group: string; scope: string; digest: string; message_id: string; sha: string }> = await queryRunner.query(
        `SELECT consumer_group, scope, encode(id_digest, 'hex') AS digest, message_id, encode(sha256(convert_to(message_id, 'UTF8')), 'hex') AS sha FROM kafka_eo_inbox
         WHERE message_id ~ '^[A-Za-z0-9._-]+/[0-9]+/[0-9]+$' AND (consumer_group || scope || encode(id_digest, 'hex')) > $1
         ORDER BY consumer_group || scope || encode(id_digest, 'hex') LIMIT ${BATCH}`,
        [after],
      );
      if (rows.length === 0) return;
      after = `${rows[rows.length - 1].consumer_group}${rows[rows.length - 1].scope}${rows[rows.length - 1].digest}`;
      const back = rows.filter((r) => r.digest === coordinatesDigest(r.message_id)).map((r) => ({ group: r.consumer_group, scope: r.scope, from: r.digest, to: r.sha }));
      if (back.length > 0) await rekey(queryRunner, back);
    }
  }
}

/** Moves rows (and their parked copies and operators' actions) from one digest to another; never onto a row that exists. */
async function rekey(queryRunner: QueryRunner, moves: Array<{ group: string; scope: string; from: string; to: string }>): Promise<void> {
  const params = [moves.map((m) => m.group), moves.map((m) => m.scope), moves.map((m) => m.from), moves.map((m) => m.to)];
  const moved = `unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS m(grp, scope, from_hex, to_hex)`;
  const skipped: Array<{ n: number }> = await queryRunner.query(
    `WITH moved AS (
       UPDATE kafka_eo_inbox i SET id_digest = decode(m.to_hex, 'hex') FROM ${moved}
       WHERE i.consumer_group = m.grp AND i.scope = m.scope AND i.id_digest = decode(m.from_hex, 'hex')
         AND NOT EXISTS (SELECT 1 FROM kafka_eo_inbox j WHERE j.consumer_group = m.grp AND j.scope = m.scope AND j.id_digest = decode(m.to_hex, 'hex'))
       RETURNING 1)
     SELECT ${moves.length} - count(*)::int AS n FROM moved`,
    params,
  );
  await queryRunner.query(
    `UPDATE kafka_eo_parked_records p SET id_digest = decode(m.to_hex, 'hex') FROM ${moved}
     WHERE p.consumer_group = m.grp AND p.scope = m.scope AND p.id_digest = decode(m.from_hex, 'hex')`,
    params,
  );
  await queryRunner.query(
    `UPDATE kafka_eo_audit a SET id_digest = decode(m.to_hex, 'hex') FROM ${moved}
     WHERE a.consumer_group = m.grp AND a.scope = m.scope AND a.id_digest = decode(m.from_hex, 'hex')`,
    params,
  );
  // A row whose new key was taken already (a record handled under both keys) keeps the old one; it would be
  // selected again for ever: set it apart by marking its id.
  if (skipped[0]?.n > 0) {
    await queryRunner.query(
      `UPDATE kafka_eo_inbox i SET message_id = i.message_id || ' (pre-0.5 key)' FROM ${moved}
       WHERE i.consumer_group = m.grp AND i.scope = m.scope AND i.id_digest = decode(m.from_hex, 'hex')`,
      params,
    );
  }
}
