import type { DatabaseSession } from '../database/database.port';
import { INBOX_TABLE, UNIT_OUTPUTS_TABLE, UNIT_SEQUENCE } from '../kafka-exactly-once.constants';
import { decodeUnitOutputs, encodeUnitOutputs, fromRecordedOutput, OutputRecord, type RecordedOutput } from '../engine/output-record';

/**
 * `processed` and `dead-lettered` are final. `deferred`: dead-lettered because the writer's schema is unknown
 * here; the same message id delivered again later (republished from the dead-letter topic after a deploy) is
 * handled. `failing`: the record's units of work failed `failures` times in isolation and nothing committed.
 * `parked`: an @OrderedEvent record parked under its key. Set by operators' actions: `replayed` (a release or
 * a dead-letter replay ran the handler for it; the row's outputs stay those of the original delivery),
 * `discarded` (a parked record an operator dropped, with a reason in the audit table). `retrying`: moved to a
 * retry tier (its one output is the tier's record, whose topic is where the record comes back from).
 */
export type InboxStatus = 'processed' | 'dead-lettered' | 'deferred' | 'parked' | 'retrying';

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
  /**
   * A row the claim took over (failing, deferred, retrying): it is completed row by row. A new row is written as
   * handled at once (`processed`, one attempt, its outputs in the unit's outputs) and completed only when its
   * handling ends otherwise.
   */
  takenOver: boolean;
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
  /** What the record's handling emitted, from its row or from its unit's outputs. */
  outputs: OutputRecord[];
}

/** What a unit of work's claim returned: each record claimed now, and the unit's id (set when any was). */
export interface Claims {
  claims: Map<string, Claim>;
  unit?: string;
}

/** The `outputs` of a row whose outputs are in unit `id`'s blob. */
export const unitMarker = (id: string) => JSON.stringify([{ unit: id }]);

/** The unit id a row's outputs point to, if they do (see unitMarker). */
/** A row that points to a unit's outputs: the unit, and the row's group and record (checked against the blob). */
export interface UnitOutputsRef {
  unit: string;
  group: string;
  topic: string;
  partition: number;
  offset: string;
}

export function unitOf(outputs: unknown): string | undefined {
  const first = Array.isArray(outputs) && outputs.length === 1 ? (outputs[0] as { unit?: unknown }) : undefined;
  return typeof first?.unit === 'string' ? first.unit : undefined;
}

/**
 * Thrown when a row points to a unit's outputs that are not there: never sent as "no outputs" (that would lose
 * them); the partition waits, shown in health, until an operator looks.
 */
export class MissingUnitOutputsError extends Error {
  constructor(readonly unit: string, mismatch?: string) {
    super(
      mismatch === undefined
        ? `the recorded outputs of unit of work ${unit} (${UNIT_OUTPUTS_TABLE}) are missing: its records cannot be replayed`
        : `the recorded outputs of unit of work ${unit} (${UNIT_OUTPUTS_TABLE}) are not that record's: ${mismatch}; its records cannot be replayed`,
    );
    this.name = 'MissingUnitOutputsError';
  }
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
 * failed in isolation (no committed work), a deferred dead letter (unknown schema) delivered again from other
 * coordinates (republished), or a record moved to a retry tier, delivered from that tier (any other delivery of
 * its message id meanwhile is a duplicate). `i` is the row, `EXCLUDED` the delivery.
 */
const TAKEOVER = `(i.status = 'failing'
  OR (i.status = 'deferred' AND (i.topic, i.partition, i."offset") IS DISTINCT FROM (EXCLUDED.topic, EXCLUDED.partition, EXCLUDED."offset"))
  OR (i.status = 'retrying' AND EXCLUDED.topic = i.outputs->0->>'topic'))`;

/** The inbox's SQL. Every method runs on the caller's query runner (inside its transaction when it has one). */
export class InboxRepository {
  /**
   * Claims the records of a chunk with one multi-row INSERT ... ON CONFLICT. A new message id inserts its row
   * as it will most likely end: `processed` after one attempt, its outputs in this unit's outputs (the row holds
   * the unit's id), so that a unit whose records are all handled plainly updates none of its rows; a record that
   * ends otherwise is completed (`complete`), one that is not handled given back (`release`). A row left
   * `failing` by earlier failed attempts, `deferred` and now delivered from other coordinates, or `retrying` and
   * delivered from its tier, is taken over (status `claimed`, completed row by row). Returns what this call
   * claimed, by inbox key, and the unit's id. A row being written by another open transaction (a stalled
   * instance) makes this wait on its lock, bounded by the session's lock_timeout. Ids repeated within the chunk
   * are claimed once (the first occurrence).
   */
  async claim(runner: DatabaseSession, group: string, topic: string, partition: number, records: ClaimRequest[]): Promise<Claims> {
    const seen = new Set<string>();
    const unique = records.filter((r) => !seen.has(keyOf(r)) && seen.add(keyOf(r)));
    // Rows are locked in digest order, the same in every unit of work, so that two partitions claiming the same
    // ids (a duplicate published under another key) cannot deadlock.
    const rows: Array<{ scope: string; digest: string; offset: string; failures: number; last_error: RecordedFailure | null; unit: string | null; taken_over: boolean }> = await runner.query(
      `WITH unit AS (SELECT nextval('${UNIT_SEQUENCE}')::text AS id)
       INSERT INTO ${INBOX_TABLE} AS i (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, processed_at)
       SELECT $1, m.scope, decode(m.digest, 'hex'), m.id, $2, $3, m.off, 'processed', 1, jsonb_build_array(jsonb_build_object('unit', unit.id)), now()
       FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[]) AS m(scope, digest, id, off) CROSS JOIN unit
       ORDER BY m.scope, m.digest
       ON CONFLICT (consumer_group, scope, id_digest) DO UPDATE
         SET topic = EXCLUDED.topic, partition = EXCLUDED.partition, "offset" = EXCLUDED."offset",
             status = 'claimed', outputs = '[]'::jsonb, claimed_at = now(), processed_at = NULL,
             failures = CASE WHEN i.status = 'retrying' THEN 0 ELSE i.failures END,
             last_error = CASE WHEN i.status = 'retrying' THEN NULL ELSE i.last_error END,
             taken_over = jsonb_build_object('status', i.status, 'topic', i.topic, 'partition', i.partition, 'offset', i."offset",
                                             'outputs', i.outputs, 'attempts', i.attempts, 'processed_at', i.processed_at)
         WHERE ${TAKEOVER}
       RETURNING scope, encode(id_digest, 'hex') AS digest, "offset"::text AS "offset", failures, last_error, outputs->0->>'unit' AS unit, taken_over IS NOT NULL AS taken_over`,
      [group, topic, partition, unique.map((r) => r.scope), unique.map((r) => r.digest), unique.map((r) => r.displayId), unique.map((r) => r.offset)],
    );
    const claims = new Map(rows.map((r) => [keyOf(r), { offset: r.offset, failures: r.failures, lastError: r.last_error, takenOver: r.taken_over }]));
    return { claims, unit: rows.find((r) => !r.taken_over)?.unit ?? undefined };
  }

  /**
   * Records the outputs of a unit's records written as handled by its claim, in one row: `records` in offset
   * order, each with what it emitted (none is fine: the row says so). `lastOffset` is the unit's last record
   * (inbox retention deletes the row with the last of its records).
   */
  async recordUnitOutputs(runner: DatabaseSession, group: string, topic: string, partition: number, unit: string, lastOffset: string, records: ReadonlyArray<{ offset: string; outputs: readonly OutputRecord[] }>): Promise<void> {
    await runner.query(`INSERT INTO ${UNIT_OUTPUTS_TABLE} (id, consumer_group, topic, partition, last_offset, outputs) VALUES ($1, $2, $3, $4, $5, $6)`, [
      unit,
      group,
      topic,
      partition,
      lastOffset,
      encodeUnitOutputs(records),
    ]);
  }

  /**
   * The committed rows of these records (those a claim did not take). A row's outputs are read only where they can
   * be sent: when the row is of that very record (the key's `offset`, in the partition `at`), a replay of an
   * earlier delivery. Any other row is a duplicate publish, skipped: its outputs come back empty and its unit's
   * blob is not read (nor needed: retention may already have deleted it). Without `at`, every row's outputs.
   */
  async find(runner: DatabaseSession, group: string, keys: Array<InboxKey & { offset?: string }>, at?: { topic: string; partition: number }): Promise<Map<string, InboxRow>> {
    if (keys.length === 0) return new Map();
    const rows: Array<{ scope: string; digest: string; topic: string; partition: number; offset: string; status: string; outputs: RecordedOutput[] }> =
      await runner.query(
        `SELECT i.scope, encode(i.id_digest, 'hex') AS digest, i.topic, i.partition, i."offset"::text AS "offset", i.status, i.outputs
         FROM unnest($2::text[], $3::text[]) AS k(scope, digest)
         JOIN ${INBOX_TABLE} i ON i.consumer_group = $1 AND i.scope = k.scope AND i.id_digest = decode(k.digest, 'hex')`,
        [group, keys.map((k) => k.scope), keys.map((k) => k.digest)],
      );
    const offsets = new Map<string, Set<string | undefined>>();
    for (const k of keys) offsets.set(keyOf(k), (offsets.get(keyOf(k)) ?? new Set()).add(k.offset));
    const replayable = (r: (typeof rows)[number]) => at === undefined || (r.topic === at.topic && r.partition === at.partition && offsets.get(keyOf(r))!.has(r.offset));
    const wanted = rows.filter(replayable).flatMap((r) => {
      const unit = unitOf(r.outputs);
      return unit === undefined ? [] : [{ unit, group, topic: r.topic, partition: r.partition, offset: r.offset }];
    });
    const units = await this.unitOutputs(runner, wanted);
    return new Map(
      rows.map((r) => {
        const unit = unitOf(r.outputs);
        const outputs = !replayable(r) ? [] : unit === undefined ? r.outputs.map(fromRecordedOutput) : (units.get(unit)!.get(r.offset) ?? []);
        return [keyOf(r), { topic: r.topic, partition: r.partition, offset: r.offset, status: r.status, outputs }];
      }),
    );
  }

  /**
   * The outputs blobs of the units these rows point to, read back by record offset. A unit that is missing, or
   * whose blob is of another group or partition or ends before the row's record, is an error: its outputs are
   * never taken for "none".
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async unitOutputs(runner: { query(sql: string, params?: unknown[]): Promise<any> }, refs: ReadonlyArray<UnitOutputsRef>): Promise<Map<string, Map<string, OutputRecord[]>>> {
    const unique = [...new Set(refs.map((r) => r.unit))];
    if (unique.length === 0) return new Map();
    const rows: Array<{ id: string; consumer_group: string; topic: string; partition: number; last_offset: string; outputs: Buffer }> = await runner.query(
      `SELECT id::text AS id, consumer_group, topic, partition, last_offset::text AS last_offset, outputs FROM ${UNIT_OUTPUTS_TABLE} WHERE id = ANY($1::bigint[])`,
      [unique],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const ref of refs) {
      const blob = byId.get(ref.unit);
      if (!blob) throw new MissingUnitOutputsError(ref.unit);
      if (blob.consumer_group !== ref.group || blob.topic !== ref.topic || blob.partition !== ref.partition || BigInt(ref.offset) > BigInt(blob.last_offset)) {
        throw new MissingUnitOutputsError(ref.unit, `the row of ${ref.topic}[${ref.partition}]@${ref.offset} (group ${ref.group}) points to it, but it holds ${blob.topic}[${blob.partition}] up to offset ${blob.last_offset} of group ${blob.consumer_group}`);
      }
    }
    return new Map(rows.map((r) => [r.id, decodeUnitOutputs(r.outputs)]));
  }

  /**
   * Gives back claims this transaction made but will not handle (the chunk was cut short): a row the claim
   * took over gets its previous state back, a new one (written as handled in unit `unit`) is deleted.
   */
  async release(runner: DatabaseSession, group: string, keys: InboxKey[], unit: string | undefined): Promise<void> {
    if (keys.length === 0) return;
    const params = [group, keys.map((k) => k.scope), keys.map((k) => k.digest)];
    const match = `i.consumer_group = $1 AND (i.scope, i.id_digest) IN (SELECT k.scope, decode(k.digest, 'hex') FROM unnest($2::text[], $3::text[]) AS k(scope, digest))`;
    await runner.query(
      `UPDATE ${INBOX_TABLE} i
       SET status = taken_over->>'status', topic = taken_over->>'topic', partition = (taken_over->>'partition')::int,
           "offset" = (taken_over->>'offset')::bigint, outputs = taken_over->'outputs', attempts = (taken_over->>'attempts')::int,
           processed_at = (taken_over->>'processed_at')::timestamptz, taken_over = NULL
       WHERE ${match} AND i.status = 'claimed' AND i.taken_over IS NOT NULL`,
      params,
    );
    await runner.query(`DELETE FROM ${INBOX_TABLE} i WHERE ${match} AND (i.status = 'claimed' OR i.outputs = $4::jsonb)`, [...params, unit === undefined ? null : unitMarker(unit)]);
  }

  /** Records how each claimed record ended and what it emitted. */
  async complete(runner: DatabaseSession, group: string, completions: InboxCompletion[]): Promise<void> {
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
    runner: DatabaseSession,
    group: string,
    record: ClaimRequest & { topic: string; partition: number },
    failure: RecordedFailure,
  ): Promise<number> {
    const rows: Array<{ failures: number }> = await runner.query(
      `INSERT INTO ${INBOX_TABLE} AS i (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, failures, last_error)
       VALUES ($1, $2, decode($3, 'hex'), $4, $5, $6, $7, 'failing', 1, $8::jsonb)
       ON CONFLICT (consumer_group, scope, id_digest) DO UPDATE
         SET failures = CASE WHEN i.status IN ('deferred', 'retrying') THEN 1 ELSE i.failures + 1 END, last_error = EXCLUDED.last_error,
             status = 'failing', topic = EXCLUDED.topic, partition = EXCLUDED.partition, "offset" = EXCLUDED."offset",
             outputs = '[]'::jsonb, processed_at = NULL
         WHERE ${TAKEOVER} OR i.status = 'claimed'
       RETURNING failures`,
      [group, record.scope, record.digest, record.displayId, record.topic, record.partition, record.offset, JSON.stringify(failure)],
    );
    return rows[0]?.failures ?? 0;
  }
}
