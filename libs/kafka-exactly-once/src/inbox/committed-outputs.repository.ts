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
 * The outputs a partition's own producer is known to have committed in Kafka, recorded before the library aborted a
 * hanging transaction of that producer (ExactlyOnceConsumer), and what each replayed record took from them
 * (DeliveredOutputs), in COMMITTED_OUTPUTS_TABLE (migration CommittedOutputs1764401200000): rows at offset -1 count
 * what is left of each digest, a row at a record's offset what that record took.
 */
export class CommittedOutputsRepository {
  /**
   * Records a read, in a transaction of its own, in place of whatever an earlier read of the partition left (an
   * earlier abort's, or this one's before a crash: the read done again replaces it).
   */
  async record(source: SessionSource, { group, topic, partition }: GroupPartition, until: bigint, committed: ReadonlyMap<string, number>): Promise<void> {
    const runner = source.createQueryRunner();
    try {
      await withDeadline(
        (async () => {
          await runner.connect();
          await runner.startTransaction();
          await runner.query(`DELETE FROM ${COMMITTED_OUTPUTS_TABLE} WHERE ${WHERE_PARTITION}`, [group, topic, partition]);
          const entries = [...committed];
          for (let i = 0; i < entries.length; i += ROWS_PER_STATEMENT) {
            const some = entries.slice(i, i + ROWS_PER_STATEMENT);
            await runner.query(
              `INSERT INTO ${COMMITTED_OUTPUTS_TABLE} (consumer_group, topic, partition, "offset", digest, count, until_offset)
               SELECT $1::text, $2::text, $3::int, -1, d.digest, d.count, $4::bigint FROM unnest($5::text[], $6::int[]) AS d(digest, count)`,
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
   * committed in PostgreSQL before), or else what is left of those digests' counts, the rows locked until the unit
   * of work ends (another unit replaying the partition waits, then sees what this one took).
   */
  async lookUp(db: Statements, { group, topic, partition }: GroupPartition, offset: string, digests: readonly string[]): Promise<{ taken?: string[]; left: Map<string, number> }> {
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
