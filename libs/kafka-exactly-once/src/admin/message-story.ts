import { coordinatesDigest, sha256Hex } from '../engine/record-identity';
import { eventKeyDigest } from '../engine/event-identity';
import { fromRecordedOutput, type OutputRecord, type RecordedOutput } from '../engine/output-record';
import { OperatorRequestError } from '../errors/operator-request.error';
import { InboxRepository, MissingUnitOutputsError, unitOf } from '../inbox/inbox.repository';
import { AUDIT_TABLE, HEADERS, INBOX_TABLE, OUTBOX_SET_ASIDE_TABLE, OUTBOX_TABLE, PARKED_KEYS_TABLE, PARKED_RECORDS_TABLE, REPLAYS_TABLE, RETRY_HEADERS, UNIT_OUTPUTS_TABLE } from '../kafka-exactly-once.constants';
import { keyDigestFromOperator } from '../parking/ordering-key';
import type { AuditEntry, OperatorStore, ParkedKeySummary } from './operator-store';
import { bytesView, retryHistoryOf, type BytesView } from './record-view';
import type { SqlClient } from './sql-client';

/** What to look for: a message id, a key, or a record's coordinates; `topic` narrows the first two. */
export interface StoryQuery {
  messageId?: string;
  key?: string;
  topic?: string;
  partition?: number;
  offset?: string;
  /** At most this many records (1..500, default 50). */
  limit?: number;
  /** For a key: the `next` cursor of the previous answer. */
  after?: string;
}

/** One output of a record as recorded in the inbox (the bytes its Kafka transaction sent). */
export interface StoryOutput {
  topic: string;
  key: BytesView | null;
  messageId: string | null;
  eventType: string | null;
  bytes: number | null;
}

/** One failed stage of a record (the topic it was consumed on, then each retry tier), from its headers. */
export interface StoryAttempt {
  stage?: number;
  topic?: string;
  partition?: number;
  offset?: string;
  attempts?: number;
  error?: string;
  message?: string;
  at?: string;
}

/** Everything the library recorded of one record of the group. */
export interface RecordStory {
  /** SHA-256 (or, for a record without a message id, the coordinates' digest) of its identity, hex. */
  id: string;
  /** The inbox scope: the topic, or '' for a group-wide deduplication scope. */
  scope: string;
  messageId: string;
  identity: 'message-id' | 'coordinates' | 'event-key';
  /** Where it was consumed (last: a retry tier's coordinates while it waits there or came back from one). */
  input: { topic: string; partition: number; offset: string };
  status: string;
  attempts: number;
  failures: number;
  lastError: { name?: string; message?: string } | null;
  claimedAt: string | null;
  processedAt: string | null;
  /** The unit of work whose transaction recorded its outputs (null: recorded on its own row, or none). */
  unit: { id: string; topic: string; partition: number; lastOffset: string; committedAt: string } | null;
  outputs: StoryOutput[];
  /** Waiting on a retry tier. */
  retry: { topic: string; tier: number | null; dueAt: string | null; error: string | null } | null;
  /** Every failed stage the record went through (retry topics), oldest first. */
  history: StoryAttempt[];
  deadLetter: { reason: string; error: { name?: string; message?: string } | null; topic: string; replayedAt: string | null } | null;
  parked: Array<{ seq: string; topic: string; key: string | null; keyDigest: string; state: string; reason: string; parkedAt: string; resolvedAt: string | null; releaseFailures: number }>;
  /** Operator actions on it: replays, discards, diverts, and releases of the key it is parked under. */
  actions: AuditEntry[];
  /** Operator replays' outputs recorded for it (settled once their Kafka transaction committed). */
  replays: Array<{ seq: string; operation: string; settled: boolean; createdAt: string; outputs: number }>;
}

/** An outbox event of a searched key (waiting for the relay, or set aside). */
export interface StoryOutboxEvent {
  position: string;
  messageId: string;
  topic: string;
  state: 'waiting' | 'given to the relay' | 'set-aside' | 'retried' | 'discarded';
  writtenAt: string;
  reason: string | null;
}

export interface MessageStory {
  query: StoryQuery;
  records: RecordStory[];
  /** For a key: the parked keys of that name. */
  parkedKeys: ParkedKeySummary[];
  /** For a key or a message id: outbox events of this database that carry it (at most 50, in position order). */
  outbox: StoryOutboxEvent[];
  /** Records or outbox events were left off: there are more than `records` and `outbox` show. */
  truncated: boolean;
  /** For a key whose records were left off: pass as `after` for its next records (null: none left). */
  next: string | null;
}

/** Records in one answer unless the query says otherwise, and outbox events in one answer. */
const DEFAULT_RECORDS = 50;
const MAX_OUTBOX_EVENTS = 50;
/** The largest offset (a bigint): a larger one names no record, and PostgreSQL could not compare it. */
const MAX_OFFSET = 2n ** 63n - 1n;
/** A key story's cursor: the last record's set-aside time in microseconds, its digest, its scope. */
const KEY_CURSOR = /^([0-9]{1,18}):([0-9a-f]{64}):(.{0,249})$/s;
const FROM_MICROS = (param: string) => `('epoch'::timestamptz + ${param}::bigint * interval '1 microsecond')`;
const iso = (value: Date | string | null | undefined) => (value === null || value === undefined ? null : new Date(value).toISOString());

function limitOf(query: StoryQuery): number {
  return query.limit ?? DEFAULT_RECORDS;
}

function headerOf(output: OutputRecord, name: string): string | null {
  const found = output.headers.find(([n]) => n === name);
  return found && found[1] !== null ? found[1].toString('utf8') : null;
}

function attemptsOf(output: OutputRecord | undefined): StoryAttempt[] {
  if (!output) return [];
  return retryHistoryOf(output.headers.filter(([name]) => name === RETRY_HEADERS.history).map(([, value]) => value?.toString('utf8') ?? null)) as StoryAttempt[];
}

/**
 * A message's story: everything the library recorded of it, read from the inbox, the unit outputs, the parking
 * tables, the audit and the outbox of the group's database. The admin API (`GET /kafka-eo/story`), the console
 * and `kafka-eo story` answer with it.
 */
export class MessageStories {
  constructor(
    private readonly sql: SqlClient,
    private readonly store: OperatorStore,
  ) {}

  private get group(): string {
    return this.store.group;
  }

  async story(query: StoryQuery): Promise<MessageStory> {
    const given = [query.messageId, query.key, query.offset].filter((v) => v !== undefined && v !== '').length;
    if (given !== 1) throw new OperatorRequestError('invalid', 'give one of messageId, key, or topic with partition and offset', 'messageId');
    if (query.topic !== undefined && query.topic.length > 249) throw new OperatorRequestError('invalid', 'topic is longer than 249 characters', 'topic');
    if (query.messageId !== undefined && query.messageId.length > 100000) throw new OperatorRequestError('invalid', 'messageId is longer than 100000 characters', 'messageId');
    if (query.key !== undefined && query.key.length > 100000) throw new OperatorRequestError('invalid', 'key is longer than 100000 characters', 'key');
    if (query.limit !== undefined && (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > 500)) throw new OperatorRequestError('invalid', `limit must be an integer from 1 to 500, got ${String(query.limit)}`, 'limit');
    if (query.after !== undefined && query.after !== '' && query.key === undefined) throw new OperatorRequestError('invalid', "after pages a key's records: give it with key", 'after');
    if (query.offset !== undefined) return this.byCoordinates(query);
    if (query.messageId !== undefined) return this.byMessageId(query);
    return this.byKey(query);
  }

  private async byMessageId(query: StoryQuery): Promise<MessageStory> {
    const digest = sha256Hex(Buffer.from(query.messageId!, 'utf8'));
    // A record known by its event's key (messageIdFrom) is found by that key too: its digest is another namespace's.
    const keyDigest = eventKeyDigest(Buffer.from(query.messageId!, 'utf8'));
    // The digest under every scope of the group (read by skipping through the primary key: scopes are few).
    const rows = await this.sql.query(
      `WITH RECURSIVE s(scope) AS (
         SELECT min(scope) FROM ${INBOX_TABLE} WHERE consumer_group = $1
         UNION ALL
         SELECT (SELECT min(scope) FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND scope > s.scope) FROM s WHERE s.scope IS NOT NULL)
       SELECT * FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND scope IN (SELECT scope FROM s WHERE scope IS NOT NULL) AND id_digest IN (decode($2, 'hex'), decode($5, 'hex'))
         AND ($3::text IS NULL OR topic = $3 OR scope = $3) ORDER BY claimed_at, id_digest, scope LIMIT $4`,
      [this.group, digest, query.topic || null, limitOf(query) + 1, keyDigest],
    );
    const outbox = await this.outboxEvents('id = $1', [query.messageId]);
    const records = rows.slice(0, limitOf(query));
    return { query, records: await this.stories(records), parkedKeys: [], outbox: outbox.events, truncated: rows.length > records.length || outbox.truncated, next: null };
  }

  private async byCoordinates(query: StoryQuery): Promise<MessageStory> {
    const { topic, partition, offset } = query;
    if (!topic) throw new OperatorRequestError('invalid', 'coordinates need topic, partition and offset', 'topic');
    if (!Number.isInteger(partition) || partition! < 0) throw new OperatorRequestError('invalid', `partition must be a partition number, got ${String(partition)}`, 'partition');
    if (!/^[0-9]{1,19}$/.test(offset!) || BigInt(offset!) > MAX_OFFSET) throw new OperatorRequestError('invalid', `offset must be an offset (0 to ${MAX_OFFSET}), got "${String(offset).slice(0, 80)}"`, 'offset');
    // A record without a message id is known by its coordinates (under its topic's scope or the group's); one
    // with a message id is found where the inbox last saw it.
    const rows = await this.sql.query(
      `SELECT * FROM (
         SELECT * FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND scope IN ($2, '') AND id_digest = decode($3, 'hex')
         UNION
         SELECT * FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND topic = $2 AND partition = $4 AND "offset" = $5) r
       ORDER BY claimed_at, id_digest, scope LIMIT $6`,
      [this.group, topic, coordinatesDigest(`${topic}/${partition}/${offset}`), partition, offset, limitOf(query) + 1],
    );
    const records = rows.slice(0, limitOf(query));
    return { query, records: await this.stories(records), parkedKeys: [], outbox: [], truncated: rows.length > records.length, next: null };
  }

  private async byKey(query: StoryQuery): Promise<MessageStory> {
    const key = query.key!;
    const keyBytes = Buffer.from(key, 'utf8');
    const topic = query.topic || null;
    const limit = limitOf(query);
    const cursor = query.after ? KEY_CURSOR.exec(query.after) : null;
    if (query.after && !cursor) throw new OperatorRequestError('invalid', `after must be the "next" cursor of a previous answer, got "${query.after.slice(0, 100)}"`, 'after');
    const parkedKeys = query.after ? [] : (await this.store.listParkedKeys({ key, topic: query.topic, limit: 50 })).items;
    // The key's records are found in three places: dead letters and records on a retry tier with that record key
    // (as recorded: base64), records parked under that ordering key, and records parked with that record key. Each
    // is read through its index in the order the library set the record aside (processed_at, which the unit that
    // parks a record also writes as its parked_at), after the cursor, at most one page and one more: a page reads
    // what it shows whatever number of records the key has (OperatorPaging1764401100000). A record found in
    // several places is shown once, at its first.
    const after = (at: string) => `($6::bigint IS NULL OR (${at}, id_digest, scope) > (${FROM_MICROS('$6')}, decode($7, 'hex'), $8::text))`;
    const rows = await this.sql.query(
      `WITH letters AS (
         SELECT scope, id_digest, processed_at AS at FROM ${INBOX_TABLE}
         WHERE consumer_group = $1 AND (dlq_reason IS NOT NULL OR status = 'retrying') AND md5(outputs->0->>'key') = md5($5) AND outputs->0->>'key' = $5
           AND ($4::text IS NULL OR topic = $4 OR scope = $4) AND ${after('processed_at')}
         ORDER BY processed_at, id_digest, scope LIMIT $9),
       by_ordering_key AS (
         SELECT scope, id_digest, parked_at AS at FROM ${PARKED_RECORDS_TABLE}
         WHERE consumer_group = $1 AND key_digest = decode($2, 'hex') AND ($4::text IS NULL OR topic = $4) AND ${after('parked_at')}
         ORDER BY parked_at, id_digest, scope LIMIT $9),
       by_record_key AS (
         SELECT scope, id_digest, parked_at AS at FROM ${PARKED_RECORDS_TABLE}
         WHERE consumer_group = $1 AND md5(record_key) = md5($3::bytea) AND record_key = $3::bytea AND ($4::text IS NULL OR topic = $4) AND ${after('parked_at')}
         ORDER BY parked_at, id_digest, scope LIMIT $9),
       found AS (
         SELECT DISTINCT ON (scope, id_digest) scope, id_digest, at
         FROM (SELECT * FROM letters UNION ALL SELECT * FROM by_ordering_key UNION ALL SELECT * FROM by_record_key) AS candidates
         ORDER BY scope, id_digest, at),
       page AS (SELECT * FROM found ORDER BY at, id_digest, scope LIMIT $9)
       SELECT i.*, (extract(epoch FROM f.at) * 1000000)::bigint::text || ':' || encode(f.id_digest, 'hex') || ':' || f.scope AS cursor, i.consumer_group IS NOT NULL AS known
       FROM page f LEFT JOIN ${INBOX_TABLE} i ON i.consumer_group = $1 AND i.scope = f.scope AND i.id_digest = f.id_digest
       ORDER BY f.at, f.id_digest, f.scope`,
      [this.group, keyDigestFromOperator(key), keyBytes, topic, keyBytes.toString('base64'), cursor?.[1] ?? null, cursor?.[2] ?? null, cursor?.[3] ?? null, limit + 1],
    );
    // Paged by what was found: a parked record whose inbox row retention deleted first still moves the cursor.
    const page = rows.slice(0, limit);
    const more = rows.length > limit;
    const records = page.filter((r) => r.known);
    const outbox = query.after ? { events: [], truncated: false } : await this.outboxEvents('aggregateid = $1 AND ($2::text IS NULL OR aggregatetype = $2)', [keyBytes, topic]);
    return { query, records: await this.stories(records), parkedKeys, outbox: outbox.events, truncated: more || outbox.truncated, next: more ? page[limit - 1].cursor : null };
  }

  private async stories(rows: any[]): Promise<RecordStory[]> {
    if (rows.length === 0) return [];
    const scopes = rows.map((r) => r.scope);
    const digests = rows.map((r) => Buffer.from(r.id_digest).toString('hex'));
    // The (scope, id_digest) pairs as the tables hold them, so that their indexes serve the lookups.
    const pairs = `SELECT q.scope, decode(q.digest, 'hex') FROM unnest($2::text[], $3::text[]) AS q(scope, digest)`;
    const [parked, actions, units] = await Promise.all([
      this.sql.query(
        `SELECT p.seq::text AS seq, p.scope, encode(p.id_digest, 'hex') AS digest, p.topic, p.state, p.reason, p.parked_at, p.resolved_at, p.release_failures, k.ordering_key, encode(p.key_digest, 'hex') AS key_digest
         FROM ${PARKED_RECORDS_TABLE} p LEFT JOIN ${PARKED_KEYS_TABLE} k USING (consumer_group, topic, key_digest)
         WHERE p.consumer_group = $1 AND (p.scope, p.id_digest) IN (${pairs}) ORDER BY p.seq`,
        [this.group, scopes, digests],
      ),
      this.sql.query(
        `SELECT a.*, a.scope AS a_scope, encode(a.id_digest, 'hex') AS digest, encode(a.key_digest, 'hex') AS key_hex FROM ${AUDIT_TABLE} a
         WHERE a.consumer_group = $1 AND ((a.scope, a.id_digest) IN (${pairs})
           OR (a.action = 'release' AND (a.topic, a.key_digest) IN (
             SELECT p.topic, p.key_digest FROM ${PARKED_RECORDS_TABLE} p WHERE p.consumer_group = $1 AND (p.scope, p.id_digest) IN (${pairs}))))
         ORDER BY a.id`,
        [this.group, scopes, digests],
      ),
      this.sql.query(
        `SELECT id::text AS id, topic, partition, last_offset::text AS last_offset, created_at FROM ${UNIT_OUTPUTS_TABLE} WHERE id = ANY($1::bigint[])`,
        [[...new Set(rows.map((r) => unitOf(r.outputs)).filter((u): u is string => u !== undefined))]],
      ),
    ]);
    const operationIds = actions.map((a) => String(a.id));
    const replays = operationIds.length === 0 ? [] : await this.sql.query(
      `SELECT seq::text AS seq, audit_id::text AS audit_id, settled, created_at, jsonb_array_length(outputs) AS outputs FROM ${REPLAYS_TABLE} WHERE consumer_group = $1 AND audit_id = ANY($2::bigint[]) ORDER BY seq`,
      [this.group, operationIds],
    );
    const unitsById = new Map(units.map((u) => [u.id, u]));
    const stories: RecordStory[] = [];
    for (const row of rows) {
      const digest = Buffer.from(row.id_digest).toString('hex');
      const mine = (r: { scope?: string; a_scope?: string; digest: string }) => (r.a_scope ?? r.scope) === row.scope && r.digest === digest;
      const ownParked = parked.filter(mine);
      const keys = new Set(ownParked.map((p) => `${p.topic}\u0000${p.key_digest}`));
      const ownActions = actions.filter((a) => mine(a) || (a.action === 'release' && keys.has(`${a.topic}\u0000${a.key_hex}`)));
      const ownOperations = new Set(ownActions.map((a) => String(a.id)));
      const outputs = await this.outputsOf(row);
      const unitId = unitOf(row.outputs);
      const unit = unitId ? unitsById.get(unitId) : undefined;
      const first = outputs[0];
      const retrying = row.status === 'retrying' && first !== undefined;
      const due = retrying ? Number(headerOf(first, RETRY_HEADERS.dueAt)) : NaN;
      const tier = retrying ? Number(headerOf(first, RETRY_HEADERS.attempt)) : NaN;
      const letter = row.dlq_reason ? first : undefined;
      stories.push({
        id: digest,
        scope: row.scope,
        messageId: row.message_id,
        identity: identityOf(row),
        input: { topic: row.topic, partition: row.partition, offset: String(row.offset) },
        status: row.status,
        attempts: row.attempts,
        failures: row.failures ?? 0,
        lastError: row.last_error ? { name: row.last_error.name, message: row.last_error.message } : null,
        claimedAt: iso(row.claimed_at),
        processedAt: iso(row.processed_at),
        unit: unit ? { id: unit.id, topic: unit.topic, partition: unit.partition, lastOffset: unit.last_offset, committedAt: iso(unit.created_at)! } : null,
        outputs: outputs.map((o) => ({
          topic: o.topic,
          key: o.key === null ? null : bytesView(o.key),
          messageId: headerOf(o, HEADERS.messageId),
          eventType: headerOf(o, HEADERS.eventType),
          bytes: o.value === null ? null : o.value.length,
        })),
        retry: retrying ? { topic: first.topic, tier: Number.isInteger(tier) ? tier : null, dueAt: Number.isSafeInteger(due) ? new Date(due).toISOString() : null, error: headerOf(first, RETRY_HEADERS.errorMessage) } : null,
        history: attemptsOf(retrying ? first : letter),
        deadLetter: row.dlq_reason
          ? { reason: row.dlq_reason, error: row.dlq_error ? { name: row.dlq_error.name, message: row.dlq_error.message } : null, topic: letter?.topic ?? '', replayedAt: iso(row.replayed_at) }
          : null,
        parked: ownParked.map((p) => ({
          seq: p.seq,
          topic: p.topic,
          key: p.ordering_key ?? null,
          keyDigest: p.key_digest,
          state: p.state,
          reason: p.reason,
          parkedAt: iso(p.parked_at)!,
          resolvedAt: iso(p.resolved_at),
          releaseFailures: p.release_failures,
        })),
        actions: ownActions.map((a) => this.store.auditEntry(a)),
        replays: replays
          .filter((r) => ownOperations.has(r.audit_id))
          .map((r) => ({ seq: r.seq, operation: r.audit_id, settled: r.settled, createdAt: iso(r.created_at)!, outputs: r.outputs })),
      });
    }
    return stories;
  }

  /** The record's outputs: on its own row, or in its unit's outputs. */
  private async outputsOf(row: any): Promise<OutputRecord[]> {
    const unit = unitOf(row.outputs);
    if (unit === undefined) return ((row.outputs ?? []) as RecordedOutput[]).filter((o) => typeof o?.topic === 'string').map(fromRecordedOutput);
    try {
      const units = await new InboxRepository().unitOutputs(this.sql, [{ unit, group: this.group, topic: row.topic, partition: row.partition, offset: String(row.offset) }]);
      return units.get(unit)?.get(String(row.offset)) ?? [];
    } catch (err) {
      // Inbox retention deletes a unit's outputs with its rows: a row without them has none to show.
      if (err instanceof MissingUnitOutputsError) return [];
      throw err;
    }
  }

  private async outboxEvents(where: string, params: unknown[]): Promise<{ events: StoryOutboxEvent[]; truncated: boolean }> {
    const [present] = await this.sql.query(`SELECT to_regclass($1) IS NOT NULL AS outbox`, [OUTBOX_TABLE]);
    if (!present.outbox) return { events: [], truncated: false };
    const rows = await this.sql.query(
      `SELECT position, id, aggregatetype, CASE WHEN batch IS NULL THEN 'waiting' ELSE 'given to the relay' END AS state, created_at, NULL AS reason FROM ${OUTBOX_TABLE} WHERE ${where}
       UNION ALL
       SELECT position, id, aggregatetype, state, created_at, reason FROM ${OUTBOX_SET_ASIDE_TABLE} WHERE ${where}
       ORDER BY position LIMIT ${MAX_OUTBOX_EVENTS + 1}`,
      params,
    );
    const events = rows.slice(0, MAX_OUTBOX_EVENTS).map((r) => ({ position: String(r.position), messageId: r.id, topic: r.aggregatetype, state: r.state, writtenAt: iso(r.created_at)!, reason: r.reason }));
    return { events, truncated: rows.length > MAX_OUTBOX_EVENTS };
  }
}

/** How the inbox knew a record: the digest of its display id under each namespace (a long id shows as `sha256:`: a message id). */
function identityOf(row: { id_digest?: Buffer | null; message_id: string }): RecordStory['identity'] {
  const digest = row.id_digest ? Buffer.from(row.id_digest).toString('hex') : undefined;
  if (digest === undefined) return 'message-id';
  if (digest === coordinatesDigest(row.message_id)) return 'coordinates';
  if (digest === eventKeyDigest(Buffer.from(row.message_id, 'utf8'))) return 'event-key';
  return 'message-id';
}
