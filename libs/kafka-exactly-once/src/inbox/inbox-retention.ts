import { Logger } from '@nestjs/common';
import type { SessionSource } from '../database/database.port';
import { queryWithin } from '../engine/clean-release';
import { AUDIT_TABLE, BULK_OPERATIONS_TABLE, COMMITTED_OUTPUTS_TABLE, INBOX_TABLE, PARKED_RECORDS_TABLE, REPLAYS_TABLE, UNIT_OUTPUTS_TABLE } from '../kafka-exactly-once.constants';

/** The group's committed offsets of partitions of a topic, read stable (-1 for none). */
export type CommittedOffsets = (topic: string, partitions: number[]) => Promise<Map<number, bigint>>;

export interface InboxRetentionOptions {
  /** Days (a fraction is allowed) a handled row is kept. */
  retentionDays: number;
  /** Days a finished operator operation, a settled replay and a resolved parked record are kept (audit trail). */
  operationsRetentionDays: number;
  retentionIntervalMs: number;
  retentionBatchSize: number;
}

/** Rows old enough to go: handled (processed, dead-lettered, replayed, discarded) or failing, never parked or waiting on a retry tier. */
const EXPIRED = `((COALESCE(replayed_at, processed_at) < now() - make_interval(secs => $2::float8 * 86400) AND status NOT IN ('parked', 'retrying'))
  OR (status = 'failing' AND claimed_at < now() - make_interval(secs => $2::float8 * 86400)))`;

/**
 * A unit of work's outputs row old enough to go: its records were handled when it was written (their rows share its
 * time), so it goes with the last of them (below the committed offset, like them).
 */
const UNIT_EXPIRED = `created_at < now() - make_interval(secs => $2::float8 * 86400)`;

/** What is settled in the operator tables, by table: never an open operation, an unsettled replay or a parked record. */
const SETTLED = [
  { table: AUDIT_TABLE, where: `state NOT IN ('pending', 'running') AND COALESCE(finished_at, requested_at) < now() - make_interval(secs => $2::float8 * 86400)` },
  { table: REPLAYS_TABLE, where: `settled AND created_at < now() - make_interval(secs => $2::float8 * 86400)` },
  { table: PARKED_RECORDS_TABLE, where: `state <> 'parked' AND resolved_at < now() - make_interval(secs => $2::float8 * 86400)` },
  { table: BULK_OPERATIONS_TABLE, where: `state <> 'running' AND finished_at < now() - make_interval(secs => $2::float8 * 86400)` },
];

/**
 * Deletes the group's inbox rows older than the retention window, in small batches so that no statement holds
 * many locks or runs long, and only those whose record the group has committed in Kafka (offset below the
 * partition's stable committed offset). A row whose PostgreSQL transaction committed while its Kafka transaction
 * did not (a crash between the two, a partition stuck since) is what tells the next delivery of the record that
 * it was handled: deleted, the record would be handled a second time. A message id whose row is gone is no longer
 * recognised as a duplicate: keep the window longer than any redelivery or republish you expect. The operator
 * tables are pruned too, of what is settled and older than `operationsRetentionDays`, and the outputs a hanging
 * transaction's abort found committed once the partition's committed offset is past the records they are for.
 */
export class InboxRetention {
  private readonly logger = new Logger(InboxRetention.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<number>;

  constructor(
    private readonly dataSource: SessionSource,
    private readonly groupId: string,
    private readonly committed: CommittedOffsets,
    private readonly options: InboxRetentionOptions,
  ) {}

  start(): void {
    if (this.options.retentionIntervalMs <= 0 || this.timer) return;
    this.timer = setInterval(() => void this.runOnce().catch((err) => this.logger.error(`inbox retention failed: ${err.message}`)), this.options.retentionIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** Deletes expired rows batch by batch, then prunes the operator tables; returns how many inbox rows went. */
  runOnce(): Promise<number> {
    this.running ??= this.deleteExpired()
      .then(async (deleted) => {
        await this.pruneOperations();
        return deleted;
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }

  /** Deletes the group's settled operator rows older than operationsRetentionDays, batch by batch. */
  private async pruneOperations(): Promise<void> {
    // An abort of a transaction from the console is `running` only while its request lasts (seconds): one still
    // running after ten minutes lost its process between the audit row and the end, and is said so (failed).
    await this.sql(
      `UPDATE ${AUDIT_TABLE} SET state = 'failed', finished_at = now(),
         result = COALESCE(result, '{}'::jsonb) || jsonb_build_object('error', 'the process that wrote the abort stopped before it said how it ended: the marker may or may not be written; the page of open transactions shows the partition as it is')
       WHERE consumer_group = $1 AND action = 'abort-transaction' AND state = 'running' AND requested_at < now() - interval '10 minutes'`,
      [this.groupId],
    );
    const pruned: string[] = [];
    for (const { table, where } of SETTLED) {
      let total = 0;
      for (;;) {
        const result: [unknown[], number] = await this.sql(
          `DELETE FROM ${table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${table} WHERE consumer_group = $1 AND ${where} LIMIT $3))`,
          [this.groupId, this.options.operationsRetentionDays, this.options.retentionBatchSize],
        );
        const deleted = Array.isArray(result) ? Number(result[1] ?? 0) : 0;
        total += deleted;
        if (deleted < this.options.retentionBatchSize) break;
      }
      if (total > 0) pruned.push(`${total} from ${table}`);
    }
    if (pruned.length > 0) this.logger.log(`pruned settled operator rows of group ${this.groupId} older than ${this.options.operationsRetentionDays} days: ${pruned.join(', ')}`);
  }

  /** Each statement on a connection of its own, given up after a minute (a server that stopped answering). */
  private sql<T = any>(query: string, params: unknown[]): Promise<T> {
    return queryWithin<T>(this.dataSource, query, params, 60000);
  }

  private async deleteExpired(): Promise<number> {
    const { retentionDays, retentionBatchSize } = this.options;
    const partitions: Array<{ topic: string; partition: number }> = await this.sql(
      `SELECT DISTINCT topic, partition FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND ${EXPIRED}
       UNION SELECT DISTINCT topic, partition FROM ${UNIT_OUTPUTS_TABLE} WHERE consumer_group = $1 AND ${UNIT_EXPIRED}
       UNION SELECT DISTINCT topic, partition FROM ${COMMITTED_OUTPUTS_TABLE} WHERE consumer_group = $1`,
      [this.groupId, retentionDays],
    );
    let total = 0;
    let held = 0;
    for (const topic of new Set(partitions.map((p) => p.topic))) {
      let committed: Map<number, bigint>;
      try {
        committed = await this.committed(topic, partitions.filter((p) => p.topic === topic).map((p) => p.partition));
      } catch (err) {
        // Its rows wait for the next run; the other topics' go now.
        this.logger.warn(`inbox retention: the committed offsets of group ${this.groupId} for ${topic} could not be read (${(err as Error).message}); its rows are kept until the next run`);
        continue;
      }
      for (const [partition, offset] of committed) {
        // What a hanging transaction's abort found committed, of no use once the partition committed past the
        // records it is for (whatever its age: only replays of those records read it).
        await this.sql(`DELETE FROM ${COMMITTED_OUTPUTS_TABLE} WHERE consumer_group = $1 AND topic = $2 AND partition = $3 AND until_offset <= $4`, [this.groupId, topic, partition, offset.toString()]);
        // The units' outputs first: each statement has its own now(), and a unit's outputs deleted after its rows
        // (a later now()) could go while rows of the same age stay. Rows outlive their unit's outputs only as
        // duplicates' rows, whose outputs are never read (InboxRepository.find).
        for (;;) {
          const result: [unknown[], number] = await this.sql(
            `DELETE FROM ${UNIT_OUTPUTS_TABLE} WHERE ctid = ANY(ARRAY(
               SELECT ctid FROM ${UNIT_OUTPUTS_TABLE}
               WHERE consumer_group = $1 AND topic = $3 AND partition = $4 AND last_offset < $5 AND ${UNIT_EXPIRED}
               LIMIT $6))`,
            [this.groupId, retentionDays, topic, partition, offset.toString(), retentionBatchSize],
          );
          if ((Array.isArray(result) ? Number(result[1] ?? 0) : 0) < retentionBatchSize) break;
        }
        for (;;) {
          const result: [unknown[], number] = await this.sql(
            `DELETE FROM ${INBOX_TABLE} WHERE ctid = ANY(ARRAY(
               SELECT ctid FROM ${INBOX_TABLE}
               WHERE consumer_group = $1 AND topic = $3 AND partition = $4 AND "offset" < $5 AND ${EXPIRED}
               LIMIT $6))`,
            [this.groupId, retentionDays, topic, partition, offset.toString(), retentionBatchSize],
          );
          const deleted = Array.isArray(result) ? Number(result[1] ?? 0) : 0;
          total += deleted;
          if (deleted < retentionBatchSize) break;
        }
        const [left] = await this.sql(
          `SELECT count(*)::int AS n FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND topic = $3 AND partition = $4 AND ${EXPIRED}`,
          [this.groupId, retentionDays, topic, partition],
        );
        held += left.n;
      }
    }
    if (total > 0) this.logger.log(`deleted ${total} inbox rows of group ${this.groupId} older than ${retentionDays} days`);
    if (held > 0) {
      this.logger.warn(
        `kept ${held} inbox rows of group ${this.groupId} older than ${retentionDays} days: their records are handled in PostgreSQL but not committed in Kafka yet (a partition that does not move; see its health)`,
      );
    }
    return total;
  }
}
