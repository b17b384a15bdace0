import { cappedCount, cappedCounts, type AtLeast } from '../admin/capped-count';
import type { SqlClient } from '../admin/sql-client';
import { OperatorRequestError } from '../errors/operator-request.error';
import { OUTBOX_RELAY_LOCK, OUTBOX_RELAY_TABLE, OUTBOX_SET_ASIDE_TABLE, OUTBOX_TABLE } from '../kafka-exactly-once.constants';
import type { DurableHeaders } from '../publishing/event-headers';
import { keyLockId, lockedPosition } from './outbox-event';

/** An event the relay set aside, as operators see it. */
export interface SetAsideEvent {
  position: string;
  messageId: string;
  topic: string;
  key: string;
  eventType: string;
  valueBytes: number;
  /** Text values as text, byte values as `{ base64 }`. */
  headers: DurableHeaders;
  writtenAt: string;
  setAsideAt: string;
  reason: string;
  state: 'set-aside' | 'retried' | 'discarded';
  resolvedAt: string | null;
  /** Who retried or discarded it: through the admin API, who the request authenticated as (`actorOf`, or the token). */
  resolvedBy: string | null;
  /** The name the caller gave of itself (the admin API body's `actor`): a label the library did not check. */
  declaredBy: string | null;
  note: string | null;
}

/** Who resolves a set-aside event, and why. */
interface ResolveOptions {
  actor?: string;
  declaredActor?: string;
  note?: string;
}

/** The outbox at a glance. */
export interface OutboxSummary {
  relayName: string | null;
  /** Events waiting for the relay, counted up to 10,000 (COUNT_CAP; `atLeast.waiting` when there are more). */
  waiting: number;
  oldestWrittenAt: string | null;
  lastBatch: string;
  relayedBatch: string;
  relayed: string;
  /** Events set aside, waiting for an operator, counted up to 10,000 (`atLeast.setAside` when there are more). */
  setAside: number;
  /** The counts that reached the cap: their number is 10,000, and there are more. */
  atLeast: AtLeast<'waiting' | 'setAside'>;
  /**
   * The PostgreSQL session holding the relay lock: the active relay (any process of this database), null when
   * no relay runs. `since`, `clientAddress` and `state` are null when PostgreSQL does not show them to this
   * session's role (a session of another role, without pg_read_all_stats).
   */
  holder: { pid: number; applicationName: string; clientAddress: string | null; since: string | null; state: string | null } | null;
}

const POSITION = /^[1-9][0-9]{0,18}$/;

/**
 * What operators do with the outbox (`kafka-eo outbox`): list the events Kafka refused for good, retry one (it
 * goes back in the outbox behind the events written since: its key's order is the operator's call), or discard
 * it. Each retry and discard is recorded on the event's row (who, when, why), which stays as the audit.
 */
/** The events the relay has not sent yet (it deletes what it sent), counted up to the cap (SQL). */
const WAITING = `${cappedCount(`${OUTBOX_TABLE} o WHERE o.batch IS NULL`)}
  + ${cappedCount(`${OUTBOX_TABLE} o WHERE o.batch > coalesce((SELECT relayed_batch FROM ${OUTBOX_RELAY_TABLE} WHERE id = 1), 0)`)}`;
/** When the oldest event still in the outbox was written (SQL). */
const OLDEST = `(SELECT created_at FROM ${OUTBOX_TABLE} ORDER BY position LIMIT 1)`;

export class OutboxOperations {
  constructor(private readonly sql: SqlClient) {}

  /**
   * The backlog alone, for the instances' reports (the charts): the events waiting (counted up to the cap) and the
   * oldest one's age by PostgreSQL's clock; undefined when the database has no outbox.
   */
  async backlog(): Promise<{ waiting: number; oldestAgeMs: number } | undefined> {
    if (!(await this.present())) return undefined;
    const [row] = await this.sql.query(`SELECT ${WAITING} AS waiting, (extract(epoch FROM now() - ${OLDEST}) * 1000)::float8 AS oldest_ms`);
    return { waiting: cappedCounts({ waiting: row.waiting }).values.waiting, oldestAgeMs: Math.max(0, Math.round(Number(row.oldest_ms ?? 0))) };
  }

  /** Whether this database has the outbox's tables (an application with the module option "outbox" made them). */
  async present(): Promise<boolean> {
    const [row] = await this.sql.query(`SELECT to_regclass($1) IS NOT NULL AS present`, [OUTBOX_TABLE]);
    return row.present;
  }

  async summary(): Promise<OutboxSummary> {
    const [row] = await this.sql.query(
      `SELECT (SELECT name FROM ${OUTBOX_RELAY_TABLE} WHERE id = 1) AS name,
              ${WAITING} AS waiting,
              ${OLDEST} AS oldest,
              (SELECT last_batch::text FROM ${OUTBOX_RELAY_TABLE} WHERE id = 1) AS last_batch,
              (SELECT relayed_batch::text FROM ${OUTBOX_RELAY_TABLE} WHERE id = 1) AS relayed_batch,
              (SELECT relayed::text FROM ${OUTBOX_RELAY_TABLE} WHERE id = 1) AS relayed,
              ${cappedCount(`${OUTBOX_SET_ASIDE_TABLE} WHERE state = 'set-aside'`)} AS set_aside`,
    );
    // A session-level advisory lock on a bigint: its high and low 32 bits as classid and objid, objsubid 1.
    const [holder] = await this.sql.query(
      `SELECT a.pid, a.application_name, host(a.client_addr) AS client_addr, a.backend_start, a.state
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND (l.classid::bigint << 32) + l.objid::bigint = $1::bigint
       LIMIT 1`,
      [OUTBOX_RELAY_LOCK],
    );
    // The backlog is what the relay has not sent (the relay deletes what it sent): counted up to the cap, so that the
    // overview's refresh does not read a backlog of millions.
    const { values, atLeast } = cappedCounts({ waiting: row.waiting, setAside: row.set_aside });
    return {
      relayName: row.name ?? null,
      waiting: values.waiting,
      oldestWrittenAt: row.oldest ? new Date(row.oldest).toISOString() : null,
      lastBatch: row.last_batch ?? '0',
      relayedBatch: row.relayed_batch ?? '0',
      relayed: row.relayed ?? '0',
      setAside: values.setAside,
      atLeast,
      holder: holder
        ? { pid: holder.pid, applicationName: holder.application_name, clientAddress: holder.client_addr ?? null, since: holder.backend_start ? new Date(holder.backend_start).toISOString() : null, state: holder.state ?? null }
        : null,
    };
  }

  /** Set-aside events, oldest first; `state` 'all' includes those retried or discarded. */
  async list(options: { state?: string; limit?: number } = {}): Promise<SetAsideEvent[]> {
    const state = options.state ?? 'set-aside';
    if (!['set-aside', 'retried', 'discarded', 'all'].includes(state)) throw new OperatorRequestError('invalid', '--state must be set-aside, retried, discarded or all', 'state');
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new OperatorRequestError('invalid', '--limit must be 1 to 1000', 'limit');
    const rows = await this.sql.query(`SELECT * FROM ${OUTBOX_SET_ASIDE_TABLE} WHERE $1 = 'all' OR state = $1 ORDER BY position LIMIT $2`, [state, limit]);
    return rows.map(toEvent);
  }

  /** Puts a set-aside event back in the outbox (a new position: after the events of its key written since). */
  async retry(position: string, options: ResolveOptions = {}): Promise<SetAsideEvent> {
    const locked = lockedPosition('$2');
    return this.resolve(position, 'retried', options, async (sql, row) => {
      await sql.query(
        `INSERT INTO ${OUTBOX_TABLE} (position, id, aggregatetype, aggregateid, type, payload, headers)
         SELECT ${locked.position}, s.id, s.aggregatetype, s.aggregateid, s.type, s.payload, s.headers
         FROM ${locked.from}, ${OUTBOX_SET_ASIDE_TABLE} s WHERE s.position = $1`,
        [position, keyLockId(row.aggregatetype, row.aggregateid)],
      );
    });
  }

  /** Gives a set-aside event up for good: it never reaches Kafka. A reason is required. */
  async discard(position: string, options: ResolveOptions = {}): Promise<SetAsideEvent> {
    if (!options.note?.trim()) throw new OperatorRequestError('invalid', 'a discard needs --reason TEXT (kept with the event)', 'reason');
    return this.resolve(position, 'discarded', options, async () => undefined);
  }

  private async resolve(position: string, state: 'retried' | 'discarded', options: ResolveOptions, act: (sql: SqlClient, row: any) => Promise<void>): Promise<SetAsideEvent> {
    if (!POSITION.test(position)) throw new OperatorRequestError('invalid', `position must be a whole number, got ${JSON.stringify(position)}`, 'position');
    return this.sql.transaction(async (sql) => {
      const [row] = await sql.query(`SELECT * FROM ${OUTBOX_SET_ASIDE_TABLE} WHERE position = $1 FOR UPDATE`, [position]);
      if (!row) throw new OperatorRequestError('not-found', `no set-aside outbox event at position ${position}`, 'position');
      if (row.state !== 'set-aside') throw new OperatorRequestError('conflict', `the event at position ${position} was ${row.state} already (${row.resolved_at ? new Date(row.resolved_at).toISOString() : ''} by ${row.resolved_by ?? 'unknown'})`);
      await act(sql, row);
      const [done] = await sql.query(
        `UPDATE ${OUTBOX_SET_ASIDE_TABLE} SET state = $2, resolved_at = now(), resolved_by = $3, declared_by = $5, note = $4 WHERE position = $1 RETURNING *`,
        [position, state, options.actor ?? null, options.note?.slice(0, 2000) ?? null, options.declaredActor ?? null],
      );
      return toEvent(done);
    });
  }
}

function toEvent(row: any): SetAsideEvent {
  return {
    position: String(row.position),
    messageId: row.id,
    topic: row.aggregatetype,
    key: Buffer.from(row.aggregateid).toString('utf8'),
    eventType: row.type,
    valueBytes: Buffer.from(row.payload).length,
    headers: JSON.parse(Buffer.from(row.headers).toString('utf8')) as DurableHeaders,
    writtenAt: new Date(row.created_at).toISOString(),
    setAsideAt: new Date(row.set_aside_at).toISOString(),
    reason: row.reason,
    state: row.state,
    resolvedAt: row.resolved_at ? new Date(row.resolved_at).toISOString() : null,
    resolvedBy: row.resolved_by ?? null,
    declaredBy: row.declared_by ?? null,
    note: row.note ?? null,
  };
}
