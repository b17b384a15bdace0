import type { QueryRunner } from 'typeorm';
import { INBOX_TABLE } from '../kafka-exactly-once.constants';

/** An event recorded on an inbox row: exactly the bytes sent, so a replay re-sends the same record. */
export interface RecordedOutput {
  topic: string;
  key: string | null;
  /** base64 */
  value: string | null;
  headers: Record<string, string>;
}

export type InboxStatus = 'processed' | 'dead-lettered';

export interface InboxRow {
  messageId: string;
  topic: string;
  partition: number;
  offset: string;
  status: string;
  outputs: RecordedOutput[];
}

export interface InboxCompletion {
  messageId: string;
  status: InboxStatus;
  attempts: number;
  outputs: RecordedOutput[];
}

/** The inbox's SQL. Every method runs on the unit of work's query runner, inside its transaction. */
export class InboxRepository {
  /**
   * Claims the message ids of a chunk with one multi-row INSERT ... ON CONFLICT DO NOTHING. Returns the
   * offsets that this call inserted, keyed by message id. A row being inserted by another open transaction
   * (a stalled instance) makes this wait on its lock, bounded by the session's lock_timeout.
   */
  async claim(
    runner: QueryRunner,
    group: string,
    topic: string,
    partition: number,
    records: Array<{ messageId: string; offset: string }>,
  ): Promise<Map<string, string>> {
    const rows: Array<{ message_id: string; offset: string }> = await runner.query(
      `INSERT INTO ${INBOX_TABLE} (consumer_group, message_id, topic, partition, "offset")
       SELECT $1, m.id, $2, $3, m.off FROM unnest($4::text[], $5::bigint[]) WITH ORDINALITY AS m(id, off, ord)
       ORDER BY m.ord
       ON CONFLICT (consumer_group, message_id) DO NOTHING
       RETURNING message_id, "offset"::text AS "offset"`,
      [group, topic, partition, records.map((r) => r.messageId), records.map((r) => r.offset)],
    );
    return new Map(rows.map((r) => [r.message_id, r.offset]));
  }

  /** The committed rows of these message ids (those a claim did not insert). */
  async find(runner: QueryRunner, group: string, messageIds: string[]): Promise<Map<string, InboxRow>> {
    if (messageIds.length === 0) return new Map();
    const rows: Array<{ message_id: string; topic: string; partition: number; offset: string; status: string; outputs: RecordedOutput[] }> =
      await runner.query(
        `SELECT message_id, topic, partition, "offset"::text AS "offset", status, outputs
         FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND message_id = ANY($2::text[])`,
        [group, messageIds],
      );
    return new Map(
      rows.map((r) => [r.message_id, { messageId: r.message_id, topic: r.topic, partition: r.partition, offset: r.offset, status: r.status, outputs: r.outputs }]),
    );
  }

  /** Deletes claims this transaction made but will not handle (the chunk was cut short). */
  async release(runner: QueryRunner, group: string, messageIds: string[]): Promise<void> {
    if (messageIds.length === 0) return;
    await runner.query(`DELETE FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND message_id = ANY($2::text[]) AND status = 'claimed'`, [group, messageIds]);
  }

  /** Records how each claimed message ended and what it emitted. */
  async complete(runner: QueryRunner, group: string, completions: InboxCompletion[]): Promise<void> {
    if (completions.length === 0) return;
    await runner.query(
      `UPDATE ${INBOX_TABLE} AS i
       SET status = c.status, attempts = c.attempts, outputs = c.outputs, processed_at = now()
       FROM unnest($2::text[], $3::text[], $4::int[], $5::jsonb[]) AS c(message_id, status, attempts, outputs)
       WHERE i.consumer_group = $1 AND i.message_id = c.message_id`,
      [
        group,
        completions.map((c) => c.messageId),
        completions.map((c) => c.status),
        completions.map((c) => c.attempts),
        completions.map((c) => JSON.stringify(c.outputs)),
      ],
    );
  }
}
