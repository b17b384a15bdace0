import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the library learnt before it aborted a hanging transaction of a partition's own producer: the records that
 * producer had already committed in Kafka (a counted digest of each record's topic, key, value and headers), so
 * that whichever member replays the partition's records next (another process after a rebalance or a crash, or
 * this one) leaves those outputs out of the replay (docs/protocol.md, "A hanging transaction of the partition's
 * own producer"). Rows with `offset` -1 are what is left of each digest's count; a row with the offset of a
 * replayed record holds what that record took from them, in its unit of work's transaction, so that the record
 * run again leaves out the same outputs. Every row of a read carries `until_offset`, the input partition's high
 * watermark before the abort: once the group's committed offset reaches it, the rows are of no further use and are
 * deleted (by the consumer, or by inbox retention).
 */
export class CommittedOutputs1764401200000 implements MigrationInterface {
  name = 'CommittedOutputs1764401200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS kafka_eo_committed_outputs (
        consumer_group text NOT NULL,
        topic text NOT NULL,
        partition integer NOT NULL,
        "offset" bigint NOT NULL,
        digest text NOT NULL,
        count integer NOT NULL,
        until_offset bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer_group, topic, partition, "offset", digest)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Without them, records that come again after such an abort send their outputs a second time (never fewer).
    await queryRunner.query(`DROP TABLE IF EXISTS kafka_eo_committed_outputs`);
  }
}
