import type { MigrationInterface, QueryRunner } from 'typeorm';
import { FaultInjector } from '../../engine/fault-injector';
import { coordinatesDigest, sha256Hex } from '../../engine/record-identity';

/**
 * Rows re-keyed per page. A page is one transaction when the migration runs outside one (as the library's migrator
 * runs it): well under a second of row locks, and what an interrupted run keeps.
 */
const PAGE = 5000;

/** The cursor over the rows to re-key (a name of the migrating session's own). */
const CURSOR = 'kafka_eo_coordinate_identities';

/**
 * An index on the audit's keys while the migration runs: the audit has none on them, and each page's update of the
 * operators' actions would read the whole audit again.
 */
const AUDIT_INDEX = 'kafka_eo_audit_coordinate_identities';

/** A row written before 0.5 for a record without a `message-id`: its id is coordinates, its digest their SHA-256. */
const WRITTEN_FOR_COORDINATES = `message_id ~ '^[A-Za-z0-9._-]+/[0-9]+/[0-9]+$' AND id_digest = sha256(convert_to(message_id, 'UTF8'))
  AND (message_id = topic || '/' || partition || '/' || "offset" OR starts_with(topic, split_part(message_id, '/', 1) || '.retry.'))`;

/** A row whose id has the shape of coordinates (a candidate for the way back). */
const COORDINATES_SHAPED = `message_id ~ '^[A-Za-z0-9._-]+/[0-9]+/[0-9]+$'`;

type Move = { group: string; scope: string; from: string; to: string };
type Row = { consumer_group: string; scope: string; id_digest: Buffer; message_id: string };

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
 * coordinates: it is not taken. PostgreSQL has no SHA3: the digests are computed here.
 *
 * The inbox is read once (one sequential scan picks the rows), and the rows picked are re-keyed page by page: the
 * time grows with the inbox, not with its square. Run outside a transaction (the library's migrator does), each
 * page commits on its own, so an interrupted run keeps what it did, and the next run finishes it: a re-keyed row
 * no longer has its id's SHA-256, so it is never picked again. Run inside one (TypeORM's `migrationsTransactionMode`
 * `all` or `each`), it is all or nothing, and an interrupted run starts over.
 */
export class CoordinateIdentities1764400800000 implements MigrationInterface {
  name = 'CoordinateIdentities1764400800000';

  /** Commits page by page when run outside a transaction: the library's migrator runs it apart from the others. */
  readonly commitsInPages = true;

  async up(queryRunner: QueryRunner): Promise<void> {
    await inPages(queryRunner, WRITTEN_FOR_COORDINATES, (rows) =>
      rows.map((r) => ({ group: r.consumer_group, scope: r.scope, from: r.id_digest.toString('hex'), to: coordinatesDigest(r.message_id) })),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Back to the SHA-256 of the id, for the rows whose digest is their coordinates' SHA3-256.
    await inPages(queryRunner, `${COORDINATES_SHAPED} AND id_digest <> sha256(convert_to(message_id, 'UTF8'))`, (rows) =>
      rows
        .filter((r) => r.id_digest.toString('hex') === coordinatesDigest(r.message_id))
        .map((r) => ({ group: r.consumer_group, scope: r.scope, from: r.id_digest.toString('hex'), to: sha256Hex(Buffer.from(r.message_id, 'utf8')) })),
    );
  }
}

/**
 * Picks the inbox rows `selected` names, in one pass over the table, and moves them `PAGE` at a time as `moves`
 * says. The cursor holds what the pass picked (PostgreSQL keeps it past each page's commit), so no page reads the
 * table again. A run interrupted leaves the audit's index behind; the next one uses it, and drops it.
 */
async function inPages(queryRunner: QueryRunner, selected: string, moves: (rows: Row[]) => Move[]): Promise<void> {
  const own = !queryRunner.isTransactionActive;
  const faults = new FaultInjector();
  await queryRunner.query(`CREATE INDEX IF NOT EXISTS ${AUDIT_INDEX} ON kafka_eo_audit (consumer_group, scope, id_digest) WHERE id_digest IS NOT NULL`);
  await queryRunner.query(`DECLARE ${CURSOR} CURSOR WITH HOLD FOR SELECT consumer_group, scope, id_digest, message_id FROM kafka_eo_inbox WHERE ${selected}`);
  try {
    for (;;) {
      if (own) await queryRunner.startTransaction();
      const rows: Row[] = await queryRunner.query(`FETCH ${PAGE} FROM ${CURSOR}`);
      const todo = moves(rows);
      if (todo.length > 0) await rekey(queryRunner, todo);
      if (own) {
        await queryRunner.commitTransaction();
        faults.reach('migration-after-page-commit');
      }
      if (rows.length < PAGE) break;
    }
    await queryRunner.query(`DROP INDEX ${AUDIT_INDEX}`);
  } catch (err) {
    if (own && queryRunner.isTransactionActive) await queryRunner.rollbackTransaction().catch(() => undefined);
    throw err;
  } finally {
    // Inside a transaction that failed, the cursor went with it (and CLOSE fails too).
    await queryRunner.query(`CLOSE ${CURSOR}`).catch(() => undefined);
  }
}

/** Moves rows (and their parked copies and operators' actions) from one digest to another; never onto a row that exists. */
async function rekey(queryRunner: QueryRunner, moves: Move[]): Promise<void> {
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
