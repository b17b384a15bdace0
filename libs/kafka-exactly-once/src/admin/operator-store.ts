import { OperatorRequestError } from '../errors/operator-request.error';
import { displayMessageId } from '../engine/record-identity';
import { AUDIT_TABLE, DEAD_LETTER_HEADERS, RETRY_HEADERS, INBOX_TABLE, PARKED_KEYS_TABLE, PARKED_RECORDS_TABLE, REPLAYS_TABLE } from '../kafka-exactly-once.constants';
import { textHeaderPairs } from '../engine/record-headers';
import { InboxRepository, MissingUnitOutputsError, unitOf } from '../inbox/inbox.repository';
import { toRecordedOutput, type OutputRecord, type RecordedOutput } from '../engine/output-record';
import { keyDigestFromOperator } from '../parking/ordering-key';
import type { SchemaRegistry } from '../formats/avro/schema-registry';
import { bytesView, headerViews, retryHistoryOf, valueView, type BytesView, type HeaderView, type ValueView } from './record-view';
import type { SqlClient } from './sql-client';

/** Reasons a dead letter can carry (header `dlq-reason`). */
export const DEAD_LETTER_REASONS = ['decode-failed', 'unknown-schema', 'handler-failed', 'validation-failed', 'output-invalid', 'output-too-large', 'key-parked', 'key-unresolved', 'output-refused'] as const;

export interface ListQuery {
  topic?: string;
  key?: string;
  reason?: string;
  /** Dead letters only: those dead-lettered at or after `from` and before `to` (ISO 8601), e.g. a chart's step. */
  from?: string;
  to?: string;
  /** 1..500, default 50 */
  limit?: number;
  /** The `next` cursor of the previous page. */
  after?: string;
}

export interface Page<T> {
  items: T[];
  /** Pass as `after` for the next page; null on the last page. */
  next: string | null;
}

/** A record waiting on a retry topic (moved there, not handled from it yet). */
export interface RetryingRecord {
  /** SHA-256 of the message id (hex). */
  id: string;
  messageId: string;
  /** Where it failed last: the handler's topic or a retry topic, with the record's partition and offset there. */
  failedOn: string;
  partition: number;
  offset: string;
  /** The retry topic it waits on, and its tier (1 for `<topic>.retry.1`). */
  retryTopic: string;
  tier: number | null;
  /** When it is due on that tier (ISO 8601). */
  dueAt: string | null;
  /** The error it failed with last. */
  error: string | null;
  movedAt: string | null;
}

export interface DeadLetterSummary {
  /** SHA-256 of the message id (hex): how the CLI and REST name a dead letter. */
  id: string;
  topic: string;
  partition: number;
  offset: string;
  messageId: string;
  key: string | null;
  reason: string;
  error: { name: string; message: string } | null;
  status: string;
  deadLetteredAt: string;
  replayedAt: string | null;
}

export interface DeadLetterDetail extends DeadLetterSummary {
  error: { name: string; message: string; stack: string } | null;
  attempts: number;
  valueBytes: number | null;
  headers: Record<string, string>;
  /** Operator actions on this dead letter, oldest first. */
  history: AuditEntry[];
}

export interface ParkedKeySummary {
  topic: string;
  key: string;
  keyDigest: string;
  reason: string;
  error: { name: string; message: string } | null;
  /** Where the key was parked: the record that failed for good. */
  partition: number;
  offset: string;
  messageId: string;
  parkedAt: string;
  parkedRecords: number;
}

export interface ParkedRecord {
  seq: string;
  partition: number;
  offset: string;
  messageId: string;
  reason: string;
  error: { name: string; message: string } | null;
  parkedAt: string;
  releaseFailures: number;
  lastReleaseError: { name: string; message: string } | null;
}

export interface ParkedKeyDetail extends ParkedKeySummary {
  /** A page of its parked records (`parkedRecords` counts them all), in the order a release replays them. */
  records: ParkedRecord[];
  /** Pass as `after` for the next page of its records; null on the last page. */
  next: string | null;
  /** Releases waiting for the consumer or running now. */
  pendingRelease: AuditEntry | null;
}

/** One parked record whole: its key, headers and value, decoded with its writer's schema where possible. */
export interface ParkedRecordDetail extends ParkedRecord {
  topic: string;
  /** The ordering key it is parked under. */
  key: string | null;
  state: string;
  resolvedAt: string | null;
  error: { name: string; message: string; stack?: string } | null;
  recordKey: BytesView | null;
  headers: HeaderView[];
  value: ValueView;
}

/** A dead letter's bytes: the record as it went to the dead-letter topic, its value decoded where possible. */
export interface DeadLetterRecord {
  id: string;
  topic: string;
  /** The dead-letter topic. */
  deadLetterTopic: string;
  key: BytesView | null;
  /** Every header in order (the record's own, then the library's `dlq-*` and `retry-*`). */
  headers: HeaderView[];
  value: ValueView;
  /** Each failed stage of a record that went through retry topics (`retry-history`), oldest first. */
  attemptHistory: Array<Record<string, unknown>>;
}

/** Filters of the audit log. */
export interface AuditQuery {
  action?: string;
  topic?: string;
  /** An ordering key (releases, discards). */
  key?: string;
  actor?: string;
  limit?: number;
  /** The `next` cursor of the previous page. */
  after?: string;
}

/** Who acts: `actor` as authenticated, `declaredActor` as the caller named itself. */
export interface ActorOptions {
  actor?: string;
  declaredActor?: string;
}

export const AUDIT_ACTIONS = ['release', 'replay', 'discard', 'divert', 'abort-transaction'] as const;

export interface AuditEntry {
  id: string;
  action: (typeof AUDIT_ACTIONS)[number];
  topic: string;
  key: string | null;
  messageId: string | null;
  reason: string | null;
  /**
   * Who acted, as the admin API authenticated them: the application's `actorOf`, the token (`token:<name>`), or
   * both (`alice (token:<name>)`, actorOf with tokens); from `kafka-eo`, its `--actor` (default `$USER`).
   */
  actor: string | null;
  /** The name the caller gave of itself (the body's `actor`): a label the library did not check. */
  declaredActor: string | null;
  state: 'pending' | 'running' | 'done' | 'failed';
  result: Record<string, unknown> | null;
  requestedAt: string;
  finishedAt: string | null;
}

/** The largest offset (a bigint): a larger one names no record, and PostgreSQL could not compare it. */
const MAX_OFFSET = 2n ** 63n - 1n;
/** A cursor's microseconds as a timestamptz (exact, as the cursor was made from one). */
const fromMicros = (param: string) => `('epoch'::timestamptz + ${param}::bigint * interval '1 microsecond')`;

const iso = (value: Date | string | null) => (value === null ? null : new Date(value).toISOString());
const brief = (error: { name?: string; message?: string } | null) => (error ? { name: error.name ?? 'Error', message: error.message ?? '' } : null);

function limitOf(query: ListQuery): number {
  const limit = query.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new OperatorRequestError('invalid', `limit must be an integer from 1 to 500, got ${String(query.limit)}`, 'limit');
  return limit;
}

/** A page cursor: the microseconds and digest of the last item of the previous page (keyset: ties do not skip). */
function cursorOf(query: ListQuery): [string | null, string | null] {
  if (query.after === undefined || query.after === '') return [null, null];
  const cursor = /^([0-9]{1,18}):([0-9a-f]{64})$/.exec(query.after);
  if (!cursor) throw new OperatorRequestError('invalid', `after must be the "next" cursor of a previous page, got "${query.after.slice(0, 100)}"`, 'after');
  return [cursor[1], cursor[2]];
}

function reasonOf(query: ListQuery): string | null {
  if (query.reason === undefined || query.reason === '') return null;
  if (!(DEAD_LETTER_REASONS as readonly string[]).includes(query.reason)) {
    throw new OperatorRequestError('invalid', `reason must be one of ${DEAD_LETTER_REASONS.join(', ')}, got "${query.reason}"`, 'reason');
  }
  return query.reason;
}

export function requireText(value: unknown, field: string, max = 1000): string {
  if (typeof value !== 'string' || value.trim() === '') throw new OperatorRequestError('invalid', `${field} is required: a non-empty string`, field);
  if (value.length > max) throw new OperatorRequestError('invalid', `${field} is longer than ${max} characters`, field);
  return value;
}

function digestOf(id: string, field = 'id'): string {
  if (!/^[0-9a-f]{64}$/.test(id)) throw new OperatorRequestError('invalid', `${field} must be the 64 hex digits of a dead letter's id (as listed), got "${id.slice(0, 80)}"`, field);
  return id;
}

function textHeaders(pairs: Array<[string, string | null]> | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name64, value64] of pairs ?? []) {
    const name = Buffer.from(name64, 'base64').toString('utf8');
    if (value64 !== null) Object.defineProperty(headers, name, { value: displayMessageId(Buffer.from(value64, 'base64')), enumerable: true, writable: true, configurable: true });
  }
  return headers;
}

/**
 * What operators see and do, for one consumer group: dead letters and parked keys (read), releases and
 * replays (queued in the audit table for the group's consumer, which runs the handlers), discards (done here).
 * The admin REST module and the `kafka-eo` CLI both use it, so they answer the same.
 */
export class OperatorStore {
  constructor(
    private readonly sql: SqlClient,
    readonly group: string,
    /** The application's schemas, to decode values with (the CLI's from --schemas-dir); without them values are bytes only. */
    private readonly schemas?: SchemaRegistry,
  ) {}

  /** The operators' actions, newest first (the audit log). */
  async listAudit(query: AuditQuery = {}): Promise<Page<AuditEntry>> {
    const limit = limitOf(query);
    if (query.action !== undefined && query.action !== '' && !(AUDIT_ACTIONS as readonly string[]).includes(query.action)) {
      throw new OperatorRequestError('invalid', `action must be one of ${AUDIT_ACTIONS.join(', ')}, got "${query.action.slice(0, 40)}"`, 'action');
    }
    if (query.after !== undefined && query.after !== '' && !/^[0-9]{1,18}$/.test(query.after)) {
      throw new OperatorRequestError('invalid', `after must be the "next" cursor of a previous page, got "${query.after.slice(0, 100)}"`, 'after');
    }
    const rows = await this.sql.query(
      `SELECT * FROM ${AUDIT_TABLE}
       WHERE consumer_group = $1 AND ($2::text IS NULL OR action = $2) AND ($3::text IS NULL OR topic = $3)
         AND ($4::text IS NULL OR key_digest = decode($4, 'hex')) AND ($5::text IS NULL OR actor = $5) AND ($6::bigint IS NULL OR id < $6)
       ORDER BY id DESC LIMIT $7`,
      [this.group, query.action || null, query.topic || null, query.key ? keyDigestFromOperator(query.key) : null, query.actor || null, query.after || null, limit + 1],
    );
    const items = rows.slice(0, limit).map((r) => this.auditEntry(r));
    return { items, next: rows.length > limit ? items[limit - 1].id : null };
  }

  /** One parked record with its bytes (`seq` as listed by showParkedKey). */
  async parkedRecord(seq: string): Promise<ParkedRecordDetail> {
    if (!/^[0-9]{1,18}$/.test(seq)) throw new OperatorRequestError('invalid', `seq must be the number of a parked record (as listed), got "${String(seq).slice(0, 80)}"`, 'seq');
    const [r] = await this.sql.query(
      `SELECT p.*, p.seq::text AS seq, p."offset"::text AS "offset", k.ordering_key FROM ${PARKED_RECORDS_TABLE} p LEFT JOIN ${PARKED_KEYS_TABLE} k USING (consumer_group, topic, key_digest)
       WHERE p.consumer_group = $1 AND p.seq = $2`,
      [this.group, seq],
    );
    if (!r) throw new OperatorRequestError('not-found', `no parked record ${seq} in group ${this.group}`);
    return {
      seq: r.seq,
      topic: r.topic,
      key: r.ordering_key ?? null,
      partition: r.partition,
      offset: r.offset,
      messageId: r.message_id,
      state: r.state,
      reason: r.reason,
      error: r.error ? { name: r.error.name ?? 'Error', message: r.error.message ?? '', ...(r.error.stack ? { stack: String(r.error.stack) } : {}) } : null,
      parkedAt: iso(r.parked_at)!,
      resolvedAt: iso(r.resolved_at ?? null),
      releaseFailures: r.release_failures,
      lastReleaseError: brief(r.last_release_error),
      recordKey: r.record_key ? bytesView(Buffer.from(r.record_key)) : null,
      headers: headerViews(r.headers),
      value: await valueView(this.schemas, r.value ? Buffer.from(r.value) : null),
    };
  }

  /** A dead letter's record: key, every header and the value, decoded where possible. */
  async deadLetterRecord(id: string, topic?: string): Promise<DeadLetterRecord> {
    const row = await this.deadLetterRow(digestOf(id), topic);
    const letter: RecordedOutput | undefined = row.outputs?.[0];
    const headers = headerViews(letter?.h ?? textHeaderPairs(letter?.headers ?? {}));
    const attemptHistory = retryHistoryOf(headers.filter((h) => h.name === RETRY_HEADERS.history).map((h) => h.text));
    return {
      id: row.id,
      topic: row.topic,
      deadLetterTopic: letter?.topic ?? '',
      key: letter?.key ? bytesView(Buffer.from(letter.key, 'base64')) : null,
      headers,
      value: await valueView(this.schemas, letter?.value ? Buffer.from(letter.value, 'base64') : null),
      attemptHistory,
    };
  }

  async listDeadLetters(query: ListQuery = {}): Promise<Page<DeadLetterSummary>> {
    const limit = limitOf(query);
    const rows = await this.sql.query(
      `SELECT encode(id_digest, 'hex') AS id, topic, partition, "offset"::text AS "offset", message_id, status, dlq_reason, dlq_error, processed_at, replayed_at,
              outputs->0->>'key' AS key64, (extract(epoch FROM processed_at) * 1000000)::bigint::text || ':' || encode(id_digest, 'hex') AS cursor
       FROM ${INBOX_TABLE}
       WHERE consumer_group = $1 AND dlq_reason IS NOT NULL
         AND ($2::text IS NULL OR topic = $2 OR left(topic, length($2) + 7) = $2 || '.retry.') AND ($3::text IS NULL OR dlq_reason = $3)
         AND ($4::text IS NULL OR (md5(outputs->0->>'key') = md5($4) AND outputs->0->>'key' = $4))
         AND ($5::bigint IS NULL OR (processed_at, id_digest) < (${fromMicros('$5')}, decode($6, 'hex')))
         AND ($8::timestamptz IS NULL OR processed_at >= $8) AND ($9::timestamptz IS NULL OR processed_at < $9)
       ORDER BY processed_at DESC, id_digest DESC
       LIMIT $7`,
      // The key as recorded (base64 of its bytes): what the index of dead letters' keys holds (by its MD5, in the
      // order a page is read: OperatorPaging1764401100000).
      [this.group, query.topic || null, reasonOf(query), query.key === undefined ? null : Buffer.from(query.key, 'utf8').toString('base64'), ...cursorOf(query), limit + 1, query.from ?? null, query.to ?? null],
    );
    const items = rows.slice(0, limit).map((r) => this.deadLetterSummary(r));
    return { items, next: rows.length > limit ? rows[limit - 1].cursor : null };
  }

  /**
   * The records waiting on retry topics, in the order they moved there (the longest waiting first); `topic`:
   * those of one handler's topic (the topic it consumes, or one of its retry topics).
   */
  async listRetrying(query: Pick<ListQuery, 'topic' | 'limit'> = {}): Promise<RetryingRecord[]> {
    const limit = limitOf(query);
    const rows = await this.sql.query(
      `SELECT encode(id_digest, 'hex') AS id, message_id, topic, partition, "offset"::text AS "offset", outputs->0 AS letter, processed_at
       FROM ${INBOX_TABLE}
       WHERE consumer_group = $1 AND status = 'retrying'
         AND ($2::text IS NULL OR topic = $2 OR outputs->0->>'topic' = $2 OR left(outputs->0->>'topic', length($2) + 7) = $2 || '.retry.')
       ORDER BY processed_at, id_digest
       LIMIT $3`,
      [this.group, query.topic || null, limit],
    );
    return rows.map((r) => {
        const headers = textHeaders((r.letter as RecordedOutput | null)?.h);
        const due = Number(headers[RETRY_HEADERS.dueAt]);
        const tier = Number(headers[RETRY_HEADERS.attempt]);
        return {
          id: r.id,
          messageId: r.message_id,
          failedOn: r.topic,
          partition: r.partition,
          offset: r.offset,
          retryTopic: (r.letter as RecordedOutput | null)?.topic ?? '',
          tier: Number.isInteger(tier) ? tier : null,
          dueAt: Number.isSafeInteger(due) ? new Date(due).toISOString() : null,
          error: headers[RETRY_HEADERS.errorMessage] ?? null,
          movedAt: iso(r.processed_at),
        };
      });
  }

  async showDeadLetter(id: string, topic?: string): Promise<DeadLetterDetail> {
    const row = await this.deadLetterRow(digestOf(id), topic);
    const letter = row.outputs?.[0];
    const history = await this.sql.query(`SELECT * FROM ${AUDIT_TABLE} WHERE consumer_group = $1 AND id_digest = decode($2, 'hex') ORDER BY id`, [this.group, row.id]);
    const headers = textHeaders(letter?.h);
    return {
      ...this.deadLetterSummary(row),
      error: row.dlq_error ? { name: row.dlq_error.name, message: row.dlq_error.message, stack: row.dlq_error.stack } : null,
      attempts: row.attempts,
      valueBytes: letter?.value ? Buffer.from(letter.value, 'base64').length : null,
      headers,
      history: history.map((h) => this.auditEntry(h)),
    };
  }

  /**
   * Queues a replay of a dead letter for the group's consumer; the handler runs for it once. While a replay of
   * it is open, asking again (or two operators at once) returns that replay.
   */
  async requestReplay(id: string, options: { topic?: string } & ActorOptions = {}): Promise<AuditEntry> {
    const digest = digestOf(id);
    return this.queueOnce(`a replay of dead letter ${id}`, async () => {
      const row = await this.deadLetterRow(digest, options.topic);
      if (row.status === 'parked') {
        const parked = await this.sql.query(`SELECT ordering_key FROM ${PARKED_RECORDS_TABLE} r JOIN ${PARKED_KEYS_TABLE} k USING (consumer_group, topic, key_digest) WHERE r.consumer_group = $1 AND r.scope = $2 AND r.id_digest = decode($3, 'hex') AND r.state = 'parked'`, [this.group, row.scope, row.id]);
        throw new OperatorRequestError('conflict', `dead letter ${id} is parked under key "${parked[0]?.ordering_key ?? '?'}" of ${row.topic}: release the key instead (its records replay in order)`);
      }
      if (row.status === 'replayed') throw new OperatorRequestError('conflict', `dead letter ${id} was replayed already (${iso(row.replayed_at)}); a dead letter is replayed once`);
      if (row.status === 'discarded') throw new OperatorRequestError('conflict', `dead letter ${id} was discarded by an operator; it is not replayed`);
      if (row.status !== 'dead-lettered' && row.status !== 'deferred') throw new OperatorRequestError('conflict', `message ${row.message_id} is ${row.status}, not a dead letter waiting for a replay`);
      const [open] = await this.sql.query(`SELECT * FROM ${AUDIT_TABLE} WHERE consumer_group = $1 AND action = 'replay' AND scope = $2 AND id_digest = decode($3, 'hex') AND state IN ('pending', 'running')`, [this.group, row.scope, row.id]);
      if (open) return { open };
      const [entry] = await this.sql.query(
        `INSERT INTO ${AUDIT_TABLE} (consumer_group, action, topic, scope, id_digest, message_id, actor, declared_actor, state)
         VALUES ($1, 'replay', $2, $3, decode($4, 'hex'), $5, $6, $7, 'pending')
         ON CONFLICT (consumer_group, scope, id_digest) WHERE action = 'replay' AND state IN ('pending', 'running') DO NOTHING RETURNING *`,
        [this.group, row.topic, row.scope, row.id, row.message_id, options.actor ?? null, options.declaredActor ?? null],
      );
      return { inserted: entry };
    });
  }

  async listParkedKeys(query: ListQuery = {}): Promise<Page<ParkedKeySummary>> {
    const limit = limitOf(query);
    const rows = await this.sql.query(
      `SELECT k.*, encode(k.key_digest, 'hex') AS digest, "offset"::text AS offset_text,
              (SELECT count(*)::int FROM ${PARKED_RECORDS_TABLE} r WHERE r.consumer_group = k.consumer_group AND r.topic = k.topic AND r.key_digest = k.key_digest AND r.state = 'parked') AS parked_records,
              (extract(epoch FROM k.parked_at) * 1000000)::bigint::text || ':' || encode(k.key_digest, 'hex') AS cursor
       FROM ${PARKED_KEYS_TABLE} k
       WHERE k.consumer_group = $1 AND ($2::text IS NULL OR k.topic = $2) AND ($3::text IS NULL OR k.key_digest = decode($3, 'hex'))
         AND ($4::text IS NULL OR k.reason = $4)
         AND ($5::bigint IS NULL OR (k.parked_at, k.key_digest) > (${fromMicros('$5')}, decode($6, 'hex')))
       ORDER BY k.parked_at, k.key_digest
       LIMIT $7`,
      [this.group, query.topic || null, query.key ? keyDigestFromOperator(query.key) : null, reasonOf(query), ...cursorOf(query), limit + 1],
    );
    const items = rows.slice(0, limit).map((r) => this.parkedKeySummary(r));
    return { items, next: rows.length > limit ? rows[limit - 1].cursor : null };
  }

  /** A parked key with a page of its records, in release order (`page.after`: the `next` of the previous page). */
  async showParkedKey(topic: string, key: string, page: Pick<ListQuery, 'limit' | 'after'> = {}): Promise<ParkedKeyDetail> {
    const limit = limitOf(page);
    if (page.after !== undefined && page.after !== '' && !/^[0-9]{1,18}$/.test(page.after)) {
      throw new OperatorRequestError('invalid', `after must be the "next" cursor of a previous page, got "${page.after.slice(0, 100)}"`, 'after');
    }
    const row = await this.parkedKeyRow(requireText(topic, 'topic', 249), requireText(key, 'key'));
    const records = await this.sql.query(
      `SELECT seq::text AS seq, partition, "offset"::text AS "offset", message_id, reason, error, parked_at, release_failures, last_release_error
       FROM ${PARKED_RECORDS_TABLE} p WHERE consumer_group = $1 AND topic = $2 AND key_digest = decode($3, 'hex') AND state = 'parked' AND ($4::bigint IS NULL OR seq > $4)
       ORDER BY p.seq LIMIT $5`,
      [this.group, row.topic, row.digest, page.after || null, limit + 1],
    );
    const pending = await this.openRelease(row.topic, row.digest);
    return {
      ...this.parkedKeySummary(row),
      next: records.length > limit ? records[limit - 1].seq : null,
      records: records.slice(0, limit).map((r) => ({
        seq: r.seq,
        partition: r.partition,
        offset: r.offset,
        messageId: r.message_id,
        reason: r.reason,
        error: brief(r.error),
        parkedAt: iso(r.parked_at)!,
        releaseFailures: r.release_failures,
        lastReleaseError: brief(r.last_release_error),
      })),
      pendingRelease: pending ? this.auditEntry(pending) : null,
    };
  }

  /** Queues the release of a parked key for the group's consumer (one open release per key, as for replays). */
  async requestRelease(topic: string, key: string, options: ActorOptions = {}): Promise<AuditEntry> {
    const [topicText, keyText] = [requireText(topic, 'topic', 249), requireText(key, 'key')];
    return this.queueOnce(`a release of key "${keyText.slice(0, 80)}" of ${topicText}`, async () => {
      const row = await this.parkedKeyRow(topicText, keyText);
      const open = await this.openRelease(row.topic, row.digest);
      if (open) return { open };
      const [entry] = await this.sql.query(
        `INSERT INTO ${AUDIT_TABLE} (consumer_group, action, topic, key_digest, ordering_key, actor, declared_actor, state)
         VALUES ($1, 'release', $2, decode($3, 'hex'), $4, $5, $6, 'pending')
         ON CONFLICT (consumer_group, topic, key_digest) WHERE action = 'release' AND state IN ('pending', 'running') DO NOTHING RETURNING *`,
        [this.group, row.topic, row.digest, row.ordering_key, options.actor ?? null, options.declaredActor ?? null],
      );
      return { inserted: entry };
    });
  }

  /**
   * Drops one parked record for good (it will never be handled), with the operator's reason kept in the
   * audit table. The key stays parked: release it to let its other records go.
   */
  async discard(seq: string, reason: unknown, options: ActorOptions = {}): Promise<AuditEntry> {
    if (!/^[0-9]{1,18}$/.test(seq)) throw new OperatorRequestError('invalid', `seq must be the number of a parked record (as listed), got "${String(seq).slice(0, 80)}"`, 'seq');
    const why = requireText(reason, 'reason');
    return this.sql.transaction(async (sql) => {
      const [record] = await sql.query(`SELECT r.*, encode(r.id_digest, 'hex') AS id, k.ordering_key FROM ${PARKED_RECORDS_TABLE} r LEFT JOIN ${PARKED_KEYS_TABLE} k USING (consumer_group, topic, key_digest) WHERE r.consumer_group = $1 AND r.seq = $2 FOR UPDATE OF r`, [this.group, seq]);
      if (!record) throw new OperatorRequestError('not-found', `no parked record ${seq} in group ${this.group}`);
      if (record.state !== 'parked') throw new OperatorRequestError('conflict', `parked record ${seq} is ${record.state} already`);
      await sql.query(`UPDATE ${PARKED_RECORDS_TABLE} SET state = 'discarded', resolved_at = now() WHERE seq = $1`, [seq]);
      await sql.query(`UPDATE ${INBOX_TABLE} SET status = 'discarded', replayed_at = now() WHERE consumer_group = $1 AND scope = $2 AND id_digest = decode($3, 'hex') AND status = 'parked'`, [this.group, record.scope, record.id]);
      const [entry] = await sql.query(
        `INSERT INTO ${AUDIT_TABLE} (consumer_group, action, topic, key_digest, ordering_key, scope, id_digest, message_id, parked_seq, reason, actor, declared_actor, state, result, finished_at)
         VALUES ($1, 'discard', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'done', $12::jsonb, now()) RETURNING *`,
        [this.group, record.topic, record.key_digest, record.ordering_key, record.scope, record.id_digest, record.message_id, seq, why, options.actor ?? null, options.declaredActor ?? null, JSON.stringify({ partition: record.partition, offset: String(record.offset) })],
      );
      return this.auditEntry(entry);
    });
  }

  /**
   * The way out of recorded outputs Kafka refuses for good (a topic's max.message.bytes lowered after the
   * record's PostgreSQL commit, before its Kafka commit): the outputs of one record (its input coordinates) or
   * of one operator replay (`replay`: its number) that go to `outputTopic` are replaced, in PostgreSQL, by dead
   * letters of reason `output-refused` on `deadLetterTopic` (default `<input topic>.dlq`), with the output's key,
   * value and headers and `dlq-output-topic` naming the topic. The partition (or the replay worker) sends them at
   * its next try, with the rest of the record's outputs. Recorded in the audit table; done at once.
   */
  async divertOutputs(
    target: { topic: string; partition: number; offset: string } | { replay: string },
    outputTopic: unknown,
    reason: unknown,
    options: ActorOptions & { deadLetterTopic?: string } = {},
  ): Promise<AuditEntry> {
    const toTopic = requireText(outputTopic, 'outputTopic', 249);
    const why = requireText(reason, 'reason');
    return this.sql.transaction(async (sql) => {
      let row: { topic: string; partition: number; offset: string; outputs: RecordedOutput[]; scope?: string; id_digest?: Buffer; message_id?: string };
      if ('replay' in target) {
        if (!/^[0-9]{1,18}$/.test(target.replay)) throw new OperatorRequestError('invalid', `replay must be the number of an operator replay, got "${String(target.replay).slice(0, 80)}"`, 'replay');
        [row] = await sql.query(`SELECT topic, partition, NULL AS "offset", outputs FROM ${REPLAYS_TABLE} WHERE consumer_group = $1 AND seq = $2 AND NOT settled FOR UPDATE`, [this.group, target.replay]);
        if (!row) throw new OperatorRequestError('not-found', `no unsettled replay ${target.replay} in group ${this.group}`);
      } else {
        if (!Number.isInteger(target.partition) || target.partition < 0) throw new OperatorRequestError('invalid', `partition must be a partition number, got ${String(target.partition)}`, 'partition');
        if (!/^[0-9]{1,19}$/.test(String(target.offset)) || BigInt(String(target.offset)) > MAX_OFFSET) throw new OperatorRequestError('invalid', `offset must be an offset, got "${String(target.offset).slice(0, 80)}"`, 'offset');
        [row] = await sql.query(
          `SELECT topic, partition, "offset"::text AS "offset", outputs, scope, id_digest, message_id FROM ${INBOX_TABLE}
           WHERE consumer_group = $1 AND topic = $2 AND partition = $3 AND "offset" = $4 AND status <> 'claimed' FOR UPDATE`,
          [this.group, target.topic, target.partition, target.offset],
        );
        if (!row) throw new OperatorRequestError('not-found', `no handled record at ${target.topic}[${target.partition}]@${target.offset} in group ${this.group}`);
      }
      let outputs = row.outputs ?? [];
      // A record handled plainly: its outputs are in its unit's outputs; diverted, they are kept on its own row.
      const unit = unitOf(outputs);
      if (unit !== undefined && row.offset !== null) {
        const ref = { unit, group: this.group, topic: row.topic, partition: row.partition, offset: String(row.offset) };
        let units: Map<string, Map<string, OutputRecord[]>>;
        try {
          units = await new InboxRepository().unitOutputs(sql, [ref]);
        } catch (err) {
          if (err instanceof MissingUnitOutputsError) throw new OperatorRequestError('not-found', `the outputs of ${row.topic}[${row.partition}]@${row.offset} cannot be read: ${err.message}`);
          throw err;
        }
        outputs = (units.get(unit)!.get(ref.offset) ?? []).map(toRecordedOutput);
      }
      const refused = outputs.filter((o) => o.topic === toTopic);
      if (refused.length === 0) {
        throw new OperatorRequestError('not-found', `no recorded output to ${toTopic} there (its outputs go to ${[...new Set(outputs.map((o) => o.topic))].join(', ') || 'no topic'})`, 'outputTopic');
      }
      const deadLetterTopic = options.deadLetterTopic ?? `${row.topic}.dlq`;
      const at = 'replay' in target ? `replay ${target.replay} of ${row.topic}[${row.partition}]` : `${row.topic}[${row.partition}]@${row.offset}`;
      const rewritten = outputs.map((o): RecordedOutput => {
        if (o.topic !== toTopic) return o;
        return {
          topic: deadLetterTopic,
          key: o.key,
          value: o.value,
          h: [
            ...(o.h ?? textHeaderPairs(o.headers ?? {})),
            ...textHeaderPairs({
              [DEAD_LETTER_HEADERS.originalTopic]: row.topic,
              [DEAD_LETTER_HEADERS.originalPartition]: String(row.partition),
              ...(row.offset === null ? {} : { [DEAD_LETTER_HEADERS.originalOffset]: String(row.offset) }),
              [DEAD_LETTER_HEADERS.consumerGroup]: this.group,
              [DEAD_LETTER_HEADERS.errorClass]: 'OutputRefused',
              [DEAD_LETTER_HEADERS.errorMessage]: `an output of ${at} to ${toTopic} that Kafka refuses for good, diverted by an operator: ${why}`,
              [DEAD_LETTER_HEADERS.reason]: 'output-refused',
              [DEAD_LETTER_HEADERS.outputTopic]: toTopic,
            }),
          ],
        };
      });
      if ('replay' in target) await sql.query(`UPDATE ${REPLAYS_TABLE} SET outputs = $3::jsonb WHERE consumer_group = $1 AND seq = $2`, [this.group, target.replay, JSON.stringify(rewritten)]);
      else {
        await sql.query(`UPDATE ${INBOX_TABLE} SET outputs = $4::jsonb WHERE consumer_group = $1 AND scope = $2 AND id_digest = $3`, [this.group, row.scope, row.id_digest, JSON.stringify(rewritten)]);
      }
      const [entry] = await sql.query(
        `INSERT INTO ${AUDIT_TABLE} (consumer_group, action, topic, scope, id_digest, message_id, reason, actor, declared_actor, state, result, finished_at)
         VALUES ($1, 'divert', $2, $3, $4, $5, $6, $7, $8, 'done', $9::jsonb, now()) RETURNING *`,
        [
          this.group,
          row.topic,
          row.scope ?? null,
          row.id_digest ?? null,
          row.message_id ?? null,
          why,
          options.actor ?? null,
          options.declaredActor ?? null,
          JSON.stringify({ ...('replay' in target ? { replay: target.replay } : { partition: row.partition, offset: row.offset }), outputTopic: toTopic, deadLetterTopic, diverted: refused.length }),
        ],
      );
      return this.auditEntry(entry);
    });
  }

  async operation(id: string): Promise<AuditEntry> {
    if (!/^[0-9]{1,18}$/.test(id)) throw new OperatorRequestError('invalid', `operation id must be a number, got "${String(id).slice(0, 80)}"`, 'id');
    const [row] = await this.sql.query(`SELECT * FROM ${AUDIT_TABLE} WHERE consumer_group = $1 AND id = $2`, [this.group, id]);
    if (!row) throw new OperatorRequestError('not-found', `no operation ${id} in group ${this.group}`);
    return this.auditEntry(row);
  }

  /** Polls an operation until the consumer finished it or `timeoutMs` passed; returns its latest state. */
  async waitFor(id: string, timeoutMs: number, pollMs = 250): Promise<AuditEntry> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const entry = await this.operation(id);
      if (entry.state === 'done' || entry.state === 'failed' || Date.now() >= deadline) return entry;
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /**
   * Runs `attempt` (checks, then the open operation or an insert that does nothing when one is open) until it
   * returns an operation. A unique index (OneOpenOperation1764400500000) keeps one operation open per dead
   * letter or key, so when another request inserted first, the next attempt finds that operation (or, if it
   * finished meanwhile, the checks answer from the new state).
   */
  private async queueOnce(what: string, attempt: () => Promise<{ open?: Record<string, any>; inserted?: Record<string, any> }>): Promise<AuditEntry> {
    for (let tries = 1; tries <= 3; tries++) {
      const { open, inserted } = await attempt();
      const entry = open ?? inserted;
      if (entry) return this.auditEntry(entry);
    }
    throw new OperatorRequestError('conflict', `${what} was requested by others at the same time three times over; ask again`);
  }

  private async deadLetterRow(digest: string, topic?: string) {
    const rows = await this.sql.query(
      `SELECT *, encode(id_digest, 'hex') AS id, "offset"::text AS "offset" FROM ${INBOX_TABLE}
       WHERE consumer_group = $1 AND id_digest = decode($2, 'hex') AND dlq_reason IS NOT NULL AND ($3::text IS NULL OR topic = $3)`,
      [this.group, digest, topic || null],
    );
    if (rows.length === 0) throw new OperatorRequestError('not-found', `no dead letter ${digest} in group ${this.group}${topic ? ` on ${topic}` : ''}`);
    if (rows.length > 1) throw new OperatorRequestError('invalid', `message id ${digest} has dead letters on several topics (${rows.map((r) => r.topic).join(', ')}): name the topic`, 'topic');
    return rows[0];
  }

  private async parkedKeyRow(topic: string, key: string) {
    const [row] = await this.sql.query(
      `SELECT k.*, encode(k.key_digest, 'hex') AS digest, "offset"::text AS offset_text,
              (SELECT count(*)::int FROM ${PARKED_RECORDS_TABLE} r WHERE r.consumer_group = k.consumer_group AND r.topic = k.topic AND r.key_digest = k.key_digest AND r.state = 'parked') AS parked_records
       FROM ${PARKED_KEYS_TABLE} k WHERE k.consumer_group = $1 AND k.topic = $2 AND k.key_digest = decode($3, 'hex')`,
      [this.group, topic, keyDigestFromOperator(key)],
    );
    if (!row) throw new OperatorRequestError('not-found', `key "${key.slice(0, 200)}" of ${topic} is not parked in group ${this.group}`);
    return row;
  }

  private async openRelease(topic: string, digest: string) {
    const [row] = await this.sql.query(
      `SELECT * FROM ${AUDIT_TABLE} WHERE consumer_group = $1 AND action = 'release' AND topic = $2 AND key_digest = decode($3, 'hex') AND state IN ('pending', 'running') ORDER BY id LIMIT 1`,
      [this.group, topic, digest],
    );
    return row;
  }

  private deadLetterSummary(r: any): DeadLetterSummary {
    return {
      id: r.id,
      topic: r.topic,
      partition: r.partition,
      offset: r.offset,
      messageId: r.message_id,
      key: r.key64 === undefined ? (r.outputs?.[0]?.key ? displayMessageId(Buffer.from(r.outputs[0].key, 'base64')) : null) : r.key64 ? displayMessageId(Buffer.from(r.key64, 'base64')) : null,
      reason: r.dlq_reason,
      error: brief(r.dlq_error),
      status: r.status,
      deadLetteredAt: iso(r.processed_at)!,
      replayedAt: iso(r.replayed_at ?? null),
    };
  }

  private parkedKeySummary(r: any): ParkedKeySummary {
    return {
      topic: r.topic,
      key: r.ordering_key,
      keyDigest: r.digest,
      reason: r.reason,
      error: brief(r.error),
      partition: r.partition,
      offset: r.offset_text,
      messageId: r.message_id,
      parkedAt: iso(r.parked_at)!,
      parkedRecords: r.parked_records,
    };
  }

  auditEntry(r: any): AuditEntry {
    return {
      id: String(r.id),
      action: r.action,
      topic: r.topic,
      key: r.ordering_key ?? null,
      messageId: r.message_id ?? null,
      reason: r.reason ?? null,
      actor: r.actor ?? null,
      declaredActor: r.declared_actor ?? null,
      state: r.state,
      result: r.result ?? null,
      requestedAt: iso(r.requested_at)!,
      finishedAt: iso(r.finished_at ?? null),
    };
  }
}

/** Header names the library adds to a dead letter (stripped when it is replayed). */
export const DEAD_LETTER_HEADER_NAMES = new Set<string>(Object.values(DEAD_LETTER_HEADERS));
