import type { QueryRunner } from 'typeorm';
import { INBOX_TABLE } from '../kafka-exactly-once.constants';

/**
 * An event recorded on an inbox row: exactly the bytes sent, so that a replay re-sends the same record. Every
 * byte string is base64 (header names and values too): jsonb cannot hold a NUL, and headers are bytes.
 */
export interface RecordedOutput {
  topic: string;
  /** base64, or null */
  key: string | null;
  /** base64, or null */
  value: string | null;
  /** [name, value] pairs, both base64 (value null for a null header), in order (a name may repeat). */
  h?: Array<[string, string | null]>;
  /** Rows written before 0.2: text headers. Read for replays, never written. */
  headers?: Record<string, string>;
}

/**
 * `processed` and `dead-lettered` are final. `deferred`: dead-lettered because the writer's schema is unknown
 * here; the same message id delivered again later (republished from the dead-letter topic after a deploy) is
 * handled. `failing`: the record's units of work failed `failures` times in isolation and nothing committed.
 * `parked`: an @OrderedEvent record parked under its key. Set by operators' actions: `replayed` (a release or
 * a dead-letter replay ran the handler for it; the row's outputs stay those of the original delivery),
 * `discarded` (a parked record an operator dropped, with a reason in the audit table).
 */
export type InboxStatus = 'processed' | 'dead-lettered' | 'deferred' | 'parked';

/** How a record is known to the inbox (see RecordIdentity). */
export interface InboxKey {
  scope: string;
  /** SHA-256 of the raw message id, hex */
  digest: string;
}

export interface ClaimRequest extends InboxKey {
  displayId: string;
  offset: string;
}

/** What the claim learned about a record it claimed now. */
export interface Claim {
  offset: string;
  /** Failed units of work of this record in isolation so far. */
  failures: number;
  /** The last of those failures, as recorded. */
  lastError: RecordedFailure | null;
}

export interface RecordedFailure {
  name: string;
  message: string;
  stack: string;
  reason: string;
}

export interface InboxRow {
  topic: string;
  partition: number;
  offset: string;
  status: string;
  outputs: RecordedOutput[];
}

export interface InboxCompletion extends InboxKey {
  status: InboxStatus;
  attempts: number;
  outputs: RecordedOutput[];
  /** Set when the record was dead-lettered. */
  deadLetter?: { reason: string; error: RecordedFailure };
}

export const keyOf = (k: InboxKey) => `${k.scope}\u0000${k.digest}`;

/**
 * Which existing row a new delivery takes over instead of being a duplicate or a replay: one whose record
 * failed in isolation (no committed work), or a deferred dead letter (unknown schema) delivered again from
 * other coordinates (republished). `i` is the row, `EXCLUDED` the delivery.
 */
const TAKEOVER = `(i.status = 'failing'
  OR (i.status = 'deferred' AND (i.topic, i.partition, i."offset") IS DISTINCT FROM (EXCLUDED.topic, EXCLUDED.partition, EXCLUDED."offset")))`;

/** The inbox's SQL. Every method runs on the caller's query runner (inside its transaction when it has one). */
export class InboxRepository {
  /**
   * Claims the records of a chunk with one multi-row INSERT ... ON CONFLICT. A new message id inserts a row; a
   * row left `failing` by earlier failed attempts, or `deferred` and now delivered from other coordinates, is
   * taken over. Returns what this call claimed, by inbox key. A row being written by another open transaction
   * (a stalled instance) makes this wait on its lock, bounded by the session's lock_timeout. Ids repeated
   * within the chunk are claimed once (the first occurrence).
   */
  async claim(runner: QueryRunner, group: string, topic: string, partition: number, records: ClaimRequest[]): Promise<Map<string, Claim>> {
    const seen = new Set<string>();
    const unique = records.filter((r) => !seen.has(keyOf(r)) && seen.add(keyOf(r)));
    // Rows are locked in digest order, the same in every unit of work, so that two partitions claiming the same
    // ids (a duplicate published under another key) cannot deadlock.
    const rows: Array<{ scope: string; digest: string; offset: string; failures: number; last_error: RecordedFailure | null }> = await runner.query(
      `INSERT INTO ${INBOX_TABLE} AS i (consumer_group, scope, id_digest, message_id, topic, partition, "offset")
       SELECT $1, m.scope, decode(m.digest, 'hex'), m.id, $2, $3, m.off
       FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[]) AS m(scope, digest, id, off)
       ORDER BY m.scope, m.digest
       ON CONFLICT (consumer_group, scope, id_digest) DO UPDATE
         SET topic = EXCLUDED.topic, partition = EXCLUDED.partition, "offset" = EXCLUDED."offset",
             status = 'claimed', outputs = '[]'::jsonb, claimed_at = now(), processed_at = NULL,
             taken_over = jsonb_build_object('status', i.status, 'topic', i.topic, 'partition', i.partition, 'offset', i."offset",
                                             'outputs', i.outputs, 'attempts', i.attempts, 'processed_at', i.processed_at)
         WHERE ${TAKEOVER}
       RETURNING scope, encode(id_digest, 'hex') AS digest, "offset"::text AS "offset", failures, last_error`,
      [group, topic, partition, unique.map((r) => r.scope), unique.map((r) => r.digest), unique.map((r) => r.displayId), unique.map((r) => r.offset)],
    );
    return new Map(rows.map((r) => [keyOf(r), { offset: r.offset, failures: r.failures, lastError: r.last_error }]));
  }

  /** The committed rows of these records (those a claim did not take). */
  async find(runner: QueryRunner, group: string, keys: InboxKey[]): Promise<Map<string, InboxRow>> {
    if (keys.length === 0) return new Map();
    const rows: Array<{ scope: string; digest: string; topic: string; partition: number; offset: string; status: string; outputs: RecordedOutput[] }> =
      await runner.query(
        `SELECT i.scope, encode(i.id_digest, 'hex') AS digest, i.topic, i.partition, i."offset"::text AS "offset", i.status, i.outputs
         FROM unnest($2::text[], $3::text[]) AS k(scope, digest)
         JOIN ${INBOX_TABLE} i ON i.consumer_group = $1 AND i.scope = k.scope AND i.id_digest = decode(k.digest, 'hex')`,
        [group, keys.map((k) => k.scope), keys.map((k) => k.digest)],
      );
    return new Map(rows.map((r) => [keyOf(r), { topic: r.topic, partition: r.partition, offset: r.offset, status: r.status, outputs: r.outputs }]));
  }

  /**
   * Gives back claims this transaction made but will not handle (the chunk was cut short): a row the claim
   * took over gets its previous state back, a new one is deleted.
   */
  async release(runner: QueryRunner, group: string, keys: InboxKey[]): Promise<void> {
    if (keys.length === 0) return;
    const params = [group, keys.map((k) => k.scope), keys.map((k) => k.digest)];
    const match = `i.consumer_group = $1 AND i.status = 'claimed' AND (i.scope, i.id_digest) IN (SELECT k.scope, decode(k.digest, 'hex') FROM unnest($2::text[], $3::text[]) AS k(scope, digest))`;
    await runner.query(
      `UPDATE ${INBOX_TABLE} i
       SET status = taken_over->>'status', topic = taken_over->>'topic', partition = (taken_over->>'partition')::int,
           "offset" = (taken_over->>'offset')::bigint, outputs = taken_over->'outputs', attempts = (taken_over->>'attempts')::int,
           processed_at = (taken_over->>'processed_at')::timestamptz, taken_over = NULL
       WHERE ${match} AND i.taken_over IS NOT NULL`,
      params,
    );
    await runner.query(`DELETE FROM ${INBOX_TABLE} i WHERE ${match}`, params);
  }

  /** Records how each claimed record ended and what it emitted. */
  async complete(runner: QueryRunner, group: string, completions: InboxCompletion[]): Promise<void> {
    if (completions.length === 0) return;
    await runner.query(
      `UPDATE ${INBOX_TABLE} AS i
       SET status = c.status, attempts = c.attempts, outputs = c.outputs, processed_at = now(), taken_over = NULL,
           dlq_reason = c.dlq_reason, dlq_error = c.dlq_error
       FROM unnest($2::text[], $3::text[], $4::text[], $5::int[], $6::jsonb[], $7::text[], $8::jsonb[]) AS c(scope, digest, status, attempts, outputs, dlq_reason, dlq_error)
       WHERE i.consumer_group = $1 AND i.scope = c.scope AND i.id_digest = decode(c.digest, 'hex')`,
      [
        group,
        completions.map((c) => c.scope),
        completions.map((c) => c.digest),
        completions.map((c) => c.status),
        completions.map((c) => c.attempts),
        completions.map((c) => JSON.stringify(c.outputs)),
        completions.map((c) => c.deadLetter?.reason ?? null),
        completions.map((c) => (c.deadLetter ? JSON.stringify(c.deadLetter.error) : null)),
      ],
    );
  }

  /**
   * Counts one failed unit of work of a record run alone, in its own short transaction (the unit's was rolled
   * back), so that the count survives restarts. Returns the new count, or 0 when the record is done already.
   */
  async recordFailure(
    runner: QueryRunner,
    group: string,
    record: ClaimRequest & { topic: string; partition: number },
    failure: RecordedFailure,
  ): Promise<number> {
    const rows: Array<{ failures: number }> = await runner.query(
      `INSERT INTO ${INBOX_TABLE} AS i (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, failures, last_error)
       VALUES ($1, $2, decode($3, 'hex'), $4, $5, $6, $7, 'failing', 1, $8::jsonb)
       ON CONFLICT (consumer_group, scope, id_digest) DO UPDATE
         SET failures = CASE WHEN i.status = 'deferred' THEN 1 ELSE i.failures + 1 END, last_error = EXCLUDED.last_error,
             status = 'failing', topic = EXCLUDED.topic, partition = EXCLUDED.partition, "offset" = EXCLUDED."offset",
             outputs = '[]'::jsonb, processed_at = NULL
         WHERE ${TAKEOVER} OR i.status = 'claimed'
       RETURNING failures`,
      [group, record.scope, record.digest, record.displayId, record.topic, record.partition, record.offset, JSON.stringify(failure)],
    );
    return rows[0]?.failures ?? 0;
  }
}
