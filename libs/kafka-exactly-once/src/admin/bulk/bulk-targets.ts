import { displayMessageId } from '../../engine/record-identity';
import { OperatorRequestError } from '../../errors/operator-request.error';
import { AUDIT_TABLE, INBOX_TABLE, OUTBOX_SET_ASIDE_TABLE, PARKED_KEYS_TABLE } from '../../kafka-exactly-once.constants';
import { OutboxOperations } from '../../outbox/outbox-operations';
import { keyDigestFromOperator } from '../../parking/ordering-key';
import type { SqlClient } from '../sql-client';
import { containsPattern, type BulkAction, type BulkFilter, type BulkKind } from './bulk-filter';

/** One item a bulk action walks: where the walk stands after it (`cursor`), and what an operator sees of it. */
export interface BulkItem {
  cursor: string;
  /** The item as the dry run's sample shows it. */
  view: Record<string, unknown>;
  /** What acting on it needs (not shown). */
  ref: Record<string, any>;
}

/** The bulk action acting on one item, for the audit: who, why, and which bulk action. */
export interface BulkActContext {
  group: string;
  bulkId: string;
  action: BulkAction;
  /** `bulk #<id>: <the operator's reason>`. */
  reason: string;
  actor: string | null;
  declaredActor: string | null;
}

/** What became of one item: acted on, or left alone with why (a short fixed text, counted per bulk action). */
export type BulkOutcome = { acted: true } | { acted: false; skipped: string };

/** Where a walk reads items: the rows of one kind that the filter matches and were set aside by `until`. */
export interface BulkWalk {
  group: string;
  filter: BulkFilter;
  /** ISO time: items set aside after the bulk action started are not part of it. */
  until: string | null;
  after: string | null;
  limit: number;
}

/**
 * A kind of item a bulk action walks: its rows in a stable order (the walk's order, read from an index a page
 * at a time), and the single-record action on one of them, run in the caller's transaction (the one that also
 * advances the bulk action's cursor).
 */
export interface BulkTarget {
  /** SQL `FROM ... WHERE ...` of the items, and its parameters (the count and the walk share it). */
  where(walk: Omit<BulkWalk, 'after' | 'limit'>): { from: string; params: unknown[] };
  /** The items after `walk.after`, in the walk's order; run in a transaction (it may set planner settings for it). */
  items(sql: SqlClient, walk: BulkWalk): Promise<BulkItem[]>;
  act(sql: SqlClient, item: BulkItem, context: BulkActContext): Promise<BulkOutcome>;
  /** Whether its actions are queued for the group's consumer (replays, releases), whose outcome comes later. */
  queued: boolean;
}

const iso = (value: Date | string | null) => (value === null || value === undefined ? null : new Date(value).toISOString());
const brief = (error: { name?: string; message?: string } | null) => (error ? { name: error.name ?? 'Error', message: error.message ?? '' } : null);
/** A cursor's microseconds as a timestamptz (exact: the cursor was made from one). */
const fromMicros = (param: string) => `('epoch'::timestamptz + ${param}::bigint * interval '1 microsecond')`;
const micros = (column: string) => `(extract(epoch FROM ${column}) * 1000000)::bigint::text`;

/** Builds `$n` placeholders as values are added. */
class Params {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

function cursorParts(cursor: string | null, size: number): string[] | null {
  if (cursor === null) return null;
  const parts = JSON.parse(cursor) as unknown;
  if (!Array.isArray(parts) || parts.length !== size || !parts.every((p) => typeof p === 'string')) throw new Error(`a bulk action's cursor is not what its kind writes: ${cursor.slice(0, 200)}`);
  return parts as string[];
}

/**
 * Dead letters waiting for an operator (dead-lettered, not replayed, not parked under a key), walked oldest first
 * by (processed_at, id_digest, scope) from the index BulkOperations1764401400000 made; the action queues a
 * replay for the group's consumer, as `POST /dead-letters/<id>/replay` does.
 */
const deadLetters: BulkTarget = {
  queued: true,
  where({ group, filter, until }) {
    const p = new Params();
    const conditions = [`consumer_group = ${p.add(group)}`, `dlq_reason IS NOT NULL`, `status IN ('dead-lettered', 'deferred')`];
    if (until) conditions.push(`processed_at <= ${p.add(until)}::timestamptz`);
    if (filter.topic !== undefined) {
      const topic = p.add(filter.topic);
      conditions.push(`(topic = ${topic} OR left(topic, length(${topic}) + 7) = ${topic} || '.retry.')`);
    }
    if (filter.reason !== undefined) conditions.push(`dlq_reason = ${p.add(filter.reason)}`);
    if (filter.error !== undefined) conditions.push(`(dlq_error->>'message') ILIKE ${p.add(containsPattern(filter.error))} ESCAPE '\\'`);
    if (filter.from !== undefined) conditions.push(`processed_at >= ${p.add(filter.from)}::timestamptz`);
    if (filter.to !== undefined) conditions.push(`processed_at < ${p.add(filter.to)}::timestamptz`);
    if (filter.key !== undefined) {
      // The key as recorded (base64 of its bytes), found by its MD5 as the dead letters of a key are (OperatorPaging1764401100000).
      const key = p.add(Buffer.from(filter.key, 'utf8').toString('base64'));
      conditions.push(`(md5(outputs->0->>'key') = md5(${key}) AND outputs->0->>'key' = ${key})`);
    }
    return { from: `${INBOX_TABLE} WHERE ${conditions.join(' AND ')}`, params: p.values };
  },
  async items(sql, walk) {
    const { from, params } = this.where(walk);
    const p = new Params();
    p.values.push(...params);
    const after = cursorParts(walk.after, 3);
    const resume = after ? ` AND (processed_at, id_digest, scope) > (${fromMicros(p.add(after[0]))}, decode(${p.add(after[1])}, 'hex'), ${p.add(after[2])})` : '';
    // NOTE: with a filter PostgreSQL cannot estimate (an error text, a topic with its tiers), the planner takes the
    // few rows it expects from the index of waiting dead letters and sorts them: every step would read every waiting
    // dead letter. Without sorts (for this transaction: callers run items() in one), it reads the walk's index in
    // order from the cursor and stops at the next match, so a whole walk reads the waiting dead letters once.
    await sql.query(`SET LOCAL enable_sort = off`);
    const rows = await sql.query(
      `SELECT encode(id_digest, 'hex') AS id, scope, topic, partition, "offset"::text AS "offset", message_id, dlq_reason, dlq_error, processed_at,
              outputs->0->>'key' AS key64, ${micros('processed_at')} AS micros
       FROM ${from}${resume}
       ORDER BY processed_at, id_digest, scope LIMIT ${p.add(walk.limit)}`,
      p.values,
    );
    return rows.map((r) => ({
      cursor: JSON.stringify([r.micros, r.id, r.scope]),
      ref: { scope: r.scope, id: r.id, topic: r.topic, messageId: r.message_id },
      view: {
        id: r.id,
        topic: r.topic,
        partition: r.partition,
        offset: r.offset,
        messageId: r.message_id,
        key: r.key64 ? displayMessageId(Buffer.from(r.key64, 'base64')) : null,
        reason: r.dlq_reason,
        error: brief(r.dlq_error),
        deadLetteredAt: iso(r.processed_at),
      },
    }));
  },
  async act(sql, item, context) {
    // The dead letter's row locked: a replay of it running now (the consumer holds the row while its handler runs)
    // has committed or rolled back before its status is read here.
    const [row] = await sql.query(`SELECT status FROM ${INBOX_TABLE} WHERE consumer_group = $1 AND scope = $2 AND id_digest = decode($3, 'hex') FOR UPDATE`, [context.group, item.ref.scope, item.ref.id]);
    if (!row) return { acted: false, skipped: 'no longer in the inbox' };
    if (row.status === 'replayed') return { acted: false, skipped: 'replayed already' };
    if (row.status !== 'dead-lettered' && row.status !== 'deferred') return { acted: false, skipped: `${row.status}`.slice(0, 40) };
    const [entry] = await sql.query(
      `INSERT INTO ${AUDIT_TABLE} (consumer_group, action, topic, scope, id_digest, message_id, reason, actor, declared_actor, state, bulk_id)
       VALUES ($1, 'replay', $2, $3, decode($4, 'hex'), $5, $6, $7, $8, 'pending', $9)
       ON CONFLICT (consumer_group, scope, id_digest) WHERE action = 'replay' AND state IN ('pending', 'running') DO NOTHING RETURNING id`,
      [context.group, item.ref.topic, item.ref.scope, item.ref.id, item.ref.messageId, context.reason, context.actor, context.declaredActor, context.bulkId],
    );
    return entry ? { acted: true } : { acted: false, skipped: 'a replay of it is open' };
  },
};

/**
 * Parked keys, walked oldest parked first by (parked_at, key_digest, topic) (the index of their list); the action
 * queues the key's release for the group's consumer, as `POST /parked-keys/<topic>/<key>/release` does.
 */
const parkedKeys: BulkTarget = {
  queued: true,
  where({ group, filter, until }) {
    const p = new Params();
    const conditions = [`consumer_group = ${p.add(group)}`];
    if (until) conditions.push(`parked_at <= ${p.add(until)}::timestamptz`);
    if (filter.topic !== undefined) conditions.push(`topic = ${p.add(filter.topic)}`);
    if (filter.reason !== undefined) conditions.push(`reason = ${p.add(filter.reason)}`);
    if (filter.error !== undefined) conditions.push(`(error->>'message') ILIKE ${p.add(containsPattern(filter.error))} ESCAPE '\\'`);
    if (filter.from !== undefined) conditions.push(`parked_at >= ${p.add(filter.from)}::timestamptz`);
    if (filter.to !== undefined) conditions.push(`parked_at < ${p.add(filter.to)}::timestamptz`);
    if (filter.key !== undefined) conditions.push(`key_digest = decode(${p.add(keyDigestFromOperator(filter.key))}, 'hex')`);
    return { from: `${PARKED_KEYS_TABLE} WHERE ${conditions.join(' AND ')}`, params: p.values };
  },
  async items(sql, walk) {
    const { from, params } = this.where(walk);
    const p = new Params();
    p.values.push(...params);
    const after = cursorParts(walk.after, 3);
    const resume = after ? ` AND (parked_at, key_digest, topic) > (${fromMicros(p.add(after[0]))}, decode(${p.add(after[1])}, 'hex'), ${p.add(after[2])})` : '';
    const rows = await sql.query(
      `SELECT topic, encode(key_digest, 'hex') AS digest, ordering_key, reason, error, partition, "offset"::text AS "offset", message_id, parked_at, ${micros('parked_at')} AS micros
       FROM ${from}${resume}
       ORDER BY parked_at, key_digest, topic LIMIT ${p.add(walk.limit)}`,
      p.values,
    );
    return rows.map((r) => ({
      cursor: JSON.stringify([r.micros, r.digest, r.topic]),
      ref: { topic: r.topic, digest: r.digest },
      view: { topic: r.topic, key: r.ordering_key, keyDigest: r.digest, reason: r.reason, error: brief(r.error), partition: r.partition, offset: r.offset, messageId: r.message_id, parkedAt: iso(r.parked_at) },
    }));
  },
  async act(sql, item, context) {
    // The key's row locked: a release of it running now (the consumer holds the row for each record it replays) is
    // settled, and a key released meanwhile is gone.
    const [key] = await sql.query(`SELECT ordering_key FROM ${PARKED_KEYS_TABLE} WHERE consumer_group = $1 AND topic = $2 AND key_digest = decode($3, 'hex') FOR UPDATE`, [context.group, item.ref.topic, item.ref.digest]);
    if (!key) return { acted: false, skipped: 'not parked any more' };
    const [entry] = await sql.query(
      `INSERT INTO ${AUDIT_TABLE} (consumer_group, action, topic, key_digest, ordering_key, reason, actor, declared_actor, state, bulk_id)
       VALUES ($1, 'release', $2, decode($3, 'hex'), $4, $5, $6, $7, 'pending', $8)
       ON CONFLICT (consumer_group, topic, key_digest) WHERE action = 'release' AND state IN ('pending', 'running') DO NOTHING RETURNING id`,
      [context.group, item.ref.topic, item.ref.digest, key.ordering_key, context.reason, context.actor, context.declaredActor, context.bulkId],
    );
    return entry ? { acted: true } : { acted: false, skipped: 'a release of it is open' };
  },
};

/**
 * The outbox's events set aside, walked by position (the index of those still set aside); the action retries or
 * discards each as `POST /outbox/events/<position>/retry|discard` does, recorded on the event's own row.
 */
const outboxSetAside: BulkTarget = {
  queued: false,
  where({ filter, until }) {
    const p = new Params();
    const conditions = [`state = 'set-aside'`];
    if (until) conditions.push(`set_aside_at <= ${p.add(until)}::timestamptz`);
    if (filter.topic !== undefined) conditions.push(`aggregatetype = ${p.add(filter.topic)}`);
    if (filter.error !== undefined) conditions.push(`reason ILIKE ${p.add(containsPattern(filter.error))} ESCAPE '\\'`);
    if (filter.from !== undefined) conditions.push(`set_aside_at >= ${p.add(filter.from)}::timestamptz`);
    if (filter.to !== undefined) conditions.push(`set_aside_at < ${p.add(filter.to)}::timestamptz`);
    if (filter.key !== undefined) conditions.push(`aggregateid = ${p.add(Buffer.from(filter.key, 'utf8'))}`);
    return { from: `${OUTBOX_SET_ASIDE_TABLE} WHERE ${conditions.join(' AND ')}`, params: p.values };
  },
  async items(sql, walk) {
    const { from, params } = this.where(walk);
    const p = new Params();
    p.values.push(...params);
    const after = cursorParts(walk.after, 1);
    const resume = after ? ` AND position > ${p.add(after[0])}::bigint` : '';
    const rows = await sql.query(
      `SELECT position::text AS position, id, aggregatetype, aggregateid, type, reason, set_aside_at FROM ${from}${resume} ORDER BY position LIMIT ${p.add(walk.limit)}`,
      p.values,
    );
    return rows.map((r) => ({
      cursor: JSON.stringify([r.position]),
      ref: { position: r.position },
      view: { position: r.position, messageId: r.id, topic: r.aggregatetype, key: displayMessageId(Buffer.from(r.aggregateid)), eventType: r.type, reason: r.reason, setAsideAt: iso(r.set_aside_at) },
    }));
  },
  async act(sql, item, context) {
    const operations = new OutboxOperations(sql);
    const options = { actor: context.actor ?? undefined, declaredActor: context.declaredActor ?? undefined, note: context.reason };
    try {
      if (context.action === 'retry') await operations.retry(item.ref.position, options);
      else await operations.discard(item.ref.position, options);
      return { acted: true };
    } catch (err) {
      // Retried or discarded by someone else meanwhile (the event's row is locked and read again there).
      if (err instanceof OperatorRequestError && err.kind !== 'invalid') return { acted: false, skipped: err.kind === 'conflict' ? 'resolved already' : 'no longer set aside' };
      throw err;
    }
  },
};

export const BULK_TARGETS: Readonly<Record<BulkKind, BulkTarget>> = { 'dead-letters': deadLetters, 'parked-keys': parkedKeys, 'outbox-set-aside': outboxSetAside };
