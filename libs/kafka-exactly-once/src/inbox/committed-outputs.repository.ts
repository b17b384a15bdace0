import type { SessionSource } from '../database/database.port';
import { queryWithin, releaseClean } from '../engine/clean-release';
import { withDeadline } from '../engine/deadline';
import { COMMITTED_OUTPUTS_TABLE } from '../kafka-exactly-once.constants';

/** What runs the statements of a unit of work (its session, in its transaction). */
interface Statements {
  query(sql: string, params?: unknown[]): Promise<any>;
}

/** A partition of a consumer group. */
export interface GroupPartition {
  group: string;
  topic: string;
  partition: number;
}

/** Rows written per statement when a read is recorded. */
const ROWS_PER_STATEMENT = 5000;
/** How long recording a read may take in all (it may hold many digests). */
const RECORD_TIMEOUT_MS = 120000;
const WHERE_PARTITION = 'consumer_group = $1 AND topic = $2 AND partition = $3';
/**
 * The class of the transaction-scoped advisory locks (two-int form) that serialise, per partition of a group, what
 * takes from or adds to its recorded reads. Other classes of the library's two-int advisory locks: the parking
 * replay worker's 736_421_191; the relay's and the migrations' locks are of the one-bigint form, a space of its own.
 */
const COMMITTED_OUTPUTS_LOCK = 736_421_192;

/** Takes the partition's lock, held until the transaction of `db` ends. */
async function lockPartition(db: Statements, { group, topic, partition }: GroupPartition): Promise<void> {
  await db.query(`SELECT pg_advisory_xact_lock($1::int, hashtext($2::text)) AS locked`, [COMMITTED_OUTPUTS_LOCK, JSON.stringify([group, topic, partition])]);
}

/**
 * The outputs a partition's own producer is known to have committed in Kafka, recorded before the library aborted a
 * hanging transaction of that producer (ExactlyOnceConsumer), and what each replayed record took from them
 * (DeliveredOutputs), in COMMITTED_OUTPUTS_TABLE (migration CommittedOutputs1764401200000): rows at offset -1 count
 * what is left of each digest, a row at a record's offset what that record took.
 */
export class CommittedOutputsRepository {
  /**
   * Records a read, in a transaction of its own, merged into whatever earlier reads of the partition left: a digest
   * counts as many times as the read that found it most often says (each read counts records Kafka holds committed,
   * and one read may be cut short where another was not: a member that recorded a whole read and died before its
   * abort, read again in part by the next), and what replayed records took stays theirs. A read that found nothing
   * changes nothing.
   */
  async record(source: SessionSource, where: GroupPartition, until: bigint, committed: ReadonlyMap<string, number>): Promise<void> {
    if (committed.size === 0) return;
    const { group, topic, partition } = where;
    const runner = source.createQueryRunner();
    try {
      await withDeadline(
        (async () => {
          await runner.connect();
          await runner.startTransaction();
          await lockPartition(runner, where);
          const entries = [...committed];
          for (let i = 0; i < entries.length; i += ROWS_PER_STATEMENT) {
            const some = entries.slice(i, i + ROWS_PER_STATEMENT);
            await runner.query(
              `INSERT INTO ${COMMITTED_OUTPUTS_TABLE} AS c (consumer_group, topic, partition, "offset", digest, count, until_offset)
               SELECT $1::text, $2::text, $3::int, -1, d.digest, d.count, $4::bigint FROM unnest($5::text[], $6::int[]) AS d(digest, count)
               ON CONFLICT (consumer_group, topic, partition, "offset", digest)
               DO UPDATE SET count = GREATEST(c.count, EXCLUDED.count), until_offset = GREATEST(c.until_offset, EXCLUDED.until_offset)`,
              [group, topic, partition, until.toString(), some.map(([digest]) => digest), some.map(([, count]) => count)],
            );
          }
          await runner.commitTransaction();
        })(),
        RECORD_TIMEOUT_MS,
        'PostgreSQL',
      );
    } finally {
      await releaseClean(runner);
    }
  }

  /** The partition's recorded read, if any: the offset below which its records may find outputs in it. */
  async until(db: Statements, { group, topic, partition }: GroupPartition): Promise<bigint | undefined> {
    const [row]: Array<{ until: string | null }> = await db.query(`SELECT max(until_offset)::text AS until FROM ${COMMITTED_OUTPUTS_TABLE} WHERE ${WHERE_PARTITION}`, [group, topic, partition]);
    return row?.until == null ? undefined : BigInt(row.until);
  }

  /**
   * For the record at `offset` replayed with outputs of `digests`: what it took already (a unit of work of it that
   * committed in PostgreSQL before), or else what is left of those digests' counts. The partition is locked first,
   * until the unit of work ends, and the rows are read in a statement of their own after it: another unit replaying
   * the partition at the same time (a zombie's, and the new owner's) waits, then sees what this one took, rows it
   * inserted included (in READ COMMITTED, a statement that waited on a row lock sees the rows it waited for as they
   * are now, but none inserted after it began).
   */
  async lookUp(db: Statements, where: GroupPartition, offset: string, digests: readonly string[]): Promise<{ taken?: string[]; left: Map<string, number> }> {
    const { group, topic, partition } = where;
    await lockPartition(db, where);
    // FOR UPDATE still: the deletions past a partition's committed offset (forget, inbox retention) take no lock.
    const rows: Array<{ offset: string; digest: string; count: number }> = await db.query(
      `SELECT "offset"::text AS offset, digest, count FROM ${COMMITTED_OUTPUTS_TABLE}
       WHERE ${WHERE_PARTITION} AND until_offset > $4 AND ("offset" = $4 OR ("offset" = -1 AND count > 0 AND digest = ANY($5::text[])))
       FOR UPDATE`,
      [group, topic, partition, offset, [...new Set(digests)]],
    );
    const mine = rows.filter((r) => r.offset === offset);
    if (mine.length > 0) return { taken: mine.flatMap((r) => Array<string>(r.count).fill(r.digest)), left: new Map() };
    return { left: new Map(rows.map((r) => [r.digest, r.count])) };
  }

  /** The record at `offset` takes `taken` from the counts left (in the unit of work's transaction). */
  async take(db: Statements, { group, topic, partition }: GroupPartition, offset: string, taken: readonly string[]): Promise<void> {
    const counts = new Map<string, number>();
    for (const digest of taken) counts.set(digest, (counts.get(digest) ?? 0) + 1);
    await db.query(
      `WITH taken(digest, n) AS (SELECT * FROM unnest($5::text[], $6::int[])),
         spent AS (
           UPDATE ${COMMITTED_OUTPUTS_TABLE} c SET count = c.count - taken.n FROM taken
           WHERE c.consumer_group = $1 AND c.topic = $2 AND c.partition = $3 AND c."offset" = -1 AND c.digest = taken.digest
           RETURNING c.digest, c.until_offset)
       INSERT INTO ${COMMITTED_OUTPUTS_TABLE} (consumer_group, topic, partition, "offset", digest, count, until_offset)
       SELECT $1::text, $2::text, $3::int, $4::bigint, taken.digest, taken.n, spent.until_offset FROM taken JOIN spent USING (digest)`,
      [group, topic, partition, offset, [...counts.keys()], [...counts.values()]],
    );
  }

  /** Deletes the partition's reads that no record at or past `committed` (the group's committed offset) can use. */
  async forget(source: SessionSource, { group, topic, partition }: GroupPartition, committed: bigint): Promise<void> {
    await queryWithin(source, `DELETE FROM ${COMMITTED_OUTPUTS_TABLE} WHERE ${WHERE_PARTITION} AND until_offset <= $4`, [group, topic, partition, committed.toString()], 60000);
  }
}
