import { OperatorRequestError } from '../../errors/operator-request.error';
import { AUDIT_TABLE, BULK_OPERATIONS_TABLE, OUTBOX_SET_ASIDE_TABLE } from '../../kafka-exactly-once.constants';
import { cappedCount, cappedValue } from '../capped-count';
import { requireText, type ActorOptions } from '../operator-store';
import type { SqlClient } from '../sql-client';
import { bulkSelection, ratePerSecond, selectionDigest, type BulkAction, type BulkFilter, type BulkKind, type BulkSelection } from './bulk-filter';
import { BULK_TARGETS, type BulkItem } from './bulk-targets';

export { BULK_OPERATIONS_TABLE };
/** How many items a dry run shows. */
export const BULK_SAMPLE = 10;

/** What a dry run finds: how many items the filter matches now (counted up to 10,000) and the first ones, in the walk's order. */
export interface BulkDryRun extends BulkSelection {
  matched: number;
  /** The count reached the cap: there are more than 10,000. */
  atLeast: boolean;
  sample: Array<Record<string, unknown>>;
}

/** A bulk action and where it stands. */
export interface BulkOperation {
  id: string;
  kind: BulkKind;
  action: BulkAction;
  filter: BulkFilter;
  reason: string;
  actor: string | null;
  declaredActor: string | null;
  ratePerSecond: number;
  state: 'running' | 'done' | 'cancelled' | 'failed';
  /** Items the filter matched when it started (up to 10,000; `matchedAtLeast` when more). */
  matched: number;
  matchedAtLeast: boolean;
  /** Items set aside after this time are not part of it. */
  until: string;
  /** Items acted on: a replay or release queued for the group's consumer, an outbox event retried or discarded. */
  acted: number;
  /** Items left alone, each for a reason (replayed already, an open replay of it, resolved already...). */
  skipped: number;
  skipReasons: Record<string, number>;
  /** Items whose action failed (a queued replay or release that ended failed). */
  failed: number;
  /** Every matching item was walked; a replay or release queued may still be carried out. */
  walked: boolean;
  /** The last item walked, in the walk's order: where a resumed walk goes on from. */
  cursor: string | null;
  lastError: string | null;
  /** The instance walking it now, and until when its lease holds (another instance takes over after). */
  lease: { owner: string; until: string } | null;
  cancelledBy: string | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
  /** How its queued replays or releases stand (by the audit), on one operation's reading; null in a list, and for the outbox. */
  outcomes: { pending: number; running: number; done: number; failed: number } | null;
}

/** A start's request: what, why, how fast, and the dry run's count it expects. */
export interface BulkStart {
  kind: unknown;
  action: unknown;
  filter: unknown;
  reason: unknown;
  ratePerSecond?: unknown;
  /** The dry run's `matched`: the start is refused (409) when the filter matches another number now. */
  expect?: unknown;
}

const iso = (value: Date | string | null) => (value === null || value === undefined ? null : new Date(value).toISOString());

/**
 * Bulk actions of one consumer group (docs/console.md, Bulk actions): the dry run, the start (one running
 * operation per kind, action and filter), progress, cancel, and the step that acts on one item and advances the
 * cursor in one PostgreSQL transaction. The admin module's BulkWorker walks the running operations.
 */
export class BulkOperations {
  constructor(
    private readonly sql: SqlClient,
    readonly group: string,
  ) {}

  /** How many items the filter matches now (up to 10,000) and the first ten, in the order a bulk action walks them. */
  async dryRun(kind: unknown, action: unknown, filter: unknown): Promise<BulkDryRun> {
    const selection = bulkSelection(kind, action, filter);
    await this.requireTables(selection.kind);
    const target = BULK_TARGETS[selection.kind];
    const n = await this.count(this.sql, selection, null);
    const sample = await this.sql.transaction((sql) => target.items(sql, { group: this.group, filter: selection.filter, until: null, after: null, limit: BULK_SAMPLE }));
    const { value, atLeast } = cappedValue(n);
    return { ...selection, matched: value, atLeast, sample: sample.map((i) => i.view) };
  }

  /**
   * Starts a bulk action, or returns the one of the same kind, action and filter that is running (`created`
   * false): the unique index BulkOperations1764401400000 keeps one, whoever starts it and from where.
   */
  async start(request: BulkStart, who: ActorOptions): Promise<{ operation: BulkOperation; created: boolean }> {
    const selection = bulkSelection(request.kind, request.action, request.filter);
    const reason = requireText(request.reason, 'reason', 1000);
    const rate = ratePerSecond(request.ratePerSecond);
    if (request.expect !== undefined && request.expect !== null && (typeof request.expect !== 'number' || !Number.isInteger(request.expect) || request.expect < 0)) {
      throw new OperatorRequestError('invalid', 'expect must be the whole number the dry run counted (matched)', 'expect');
    }
    await this.requireTables(selection.kind);
    const digest = selectionDigest(selection);
    for (let tries = 1; tries <= 3; tries++) {
      const running = await this.running(selection, digest);
      if (running) return { operation: await this.get(running.id), created: false };
      const inserted = await this.sql.transaction(async (sql) => {
        // The items set aside by now (to the millisecond, as a JavaScript time holds it): the count and the walk
        // read the same `until`, so that what is set aside after the start is not part of it.
        const [{ until }] = await sql.query(`SELECT date_trunc('milliseconds', now()) AS until`);
        const n = await this.count(sql, selection, iso(until));
        const { value, atLeast } = cappedValue(n);
        if (request.expect !== undefined && request.expect !== null && request.expect !== value) {
          throw new OperatorRequestError('conflict', `the filter matches ${value}${atLeast ? '+' : ''} items now, the dry run counted ${String(request.expect)}: run the dry run again and check what it shows`);
        }
        const [row] = await sql.query(
          `INSERT INTO ${BULK_OPERATIONS_TABLE} (consumer_group, kind, action, filter, filter_digest, reason, actor, declared_actor, rate_per_second, matched, matched_at_least, until)
           VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12)
           ON CONFLICT (consumer_group, kind, action, filter_digest) WHERE state = 'running' DO NOTHING RETURNING id::text AS id`,
          [this.group, selection.kind, selection.action, JSON.stringify(selection.filter), digest, reason, who.actor ?? null, who.declaredActor ?? null, rate, value, atLeast, until],
        );
        return row?.id as string | undefined;
      });
      if (inserted) return { operation: await this.get(inserted), created: true };
      // Another request started the same one a moment ago: the next round finds it running.
    }
    throw new OperatorRequestError('conflict', 'the same bulk action was started and finished by others three times while this request asked; ask again');
  }

  /** The group's bulk actions, newest first (`after`: the `next` of the previous page). */
  async list(query: { limit?: number; after?: string } = {}): Promise<{ items: BulkOperation[]; next: string | null }> {
    const limit = query.limit ?? 20;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new OperatorRequestError('invalid', `limit must be an integer from 1 to 100, got ${String(query.limit)}`, 'limit');
    if (query.after !== undefined && query.after !== '' && !/^[0-9]{1,18}$/.test(query.after)) throw new OperatorRequestError('invalid', `after must be the "next" cursor of a previous page, got "${query.after.slice(0, 100)}"`, 'after');
    const rows = await this.sql.query(
      `SELECT * FROM ${BULK_OPERATIONS_TABLE} WHERE consumer_group = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
      [this.group, query.after || null, limit + 1],
    );
    const items = rows.slice(0, limit).map((r) => this.view(r, null));
    return { items, next: rows.length > limit ? items[limit - 1].id : null };
  }

  /** One bulk action, with how its queued replays or releases stand. */
  async get(id: string): Promise<BulkOperation> {
    const row = await this.row(this.sql, id);
    const target = BULK_TARGETS[row.kind as BulkKind];
    let outcomes: BulkOperation['outcomes'] = null;
    if (target.queued) {
      const counts = await this.sql.query(`SELECT state, count(*)::int AS n FROM ${AUDIT_TABLE} WHERE bulk_id = $1 GROUP BY state`, [row.id]);
      outcomes = { pending: 0, running: 0, done: 0, failed: 0 };
      for (const c of counts) if (c.state in outcomes) outcomes[c.state as keyof typeof outcomes] = c.n;
    }
    return this.view(row, outcomes);
  }

  /** Stops a running bulk action: no item is acted on after (replays or releases it queued already are still carried out). */
  async cancel(id: string, who: ActorOptions): Promise<BulkOperation> {
    await this.row(this.sql, id);
    // Waits for the item being acted on (its transaction holds the row): after this, the walk acts on none.
    const [row] = await this.sql.query(
      `UPDATE ${BULK_OPERATIONS_TABLE} SET state = 'cancelled', cancelled_by = $3, finished_at = now(), updated_at = now(), lease_owner = NULL, lease_until = NULL
       WHERE consumer_group = $1 AND id = $2 AND state = 'running' RETURNING id`,
      [this.group, id, who.actor ?? null],
    );
    const operation = await this.get(id);
    if (!row) throw new OperatorRequestError('conflict', `bulk action ${id} is ${operation.state} already`);
    return operation;
  }

  /**
   * Takes (or renews) the lease of the running bulk actions no other instance holds: `owner`'s until `leaseMs`
   * from now. A lease held by an instance that stopped renewing it (crashed, or deployed away) expires, and the
   * next instance goes on from the cursor.
   */
  async claim(owner: string, leaseMs: number): Promise<BulkOperation[]> {
    const rows = await this.sql.query(
      `UPDATE ${BULK_OPERATIONS_TABLE} SET lease_owner = $2, lease_until = now() + $3 * interval '1 millisecond'
       WHERE id IN (SELECT id FROM ${BULK_OPERATIONS_TABLE} WHERE consumer_group = $1 AND state = 'running' AND (lease_owner = $2 OR lease_until IS NULL OR lease_until < now())
                    ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED)
       RETURNING *`,
      [this.group, owner, leaseMs],
    );
    return rows.map((r) => this.view(r, null));
  }

  /** Gives up `owner`'s leases (a clean shutdown): another instance goes on at once rather than after the lease. */
  async release(owner: string): Promise<void> {
    await this.sql.query(`UPDATE ${BULK_OPERATIONS_TABLE} SET lease_owner = NULL, lease_until = NULL WHERE consumer_group = $1 AND lease_owner = $2`, [this.group, owner]);
  }

  /** The replays or releases a bulk action queued that the consumer has not finished. */
  async openItems(id: string): Promise<number> {
    const [row] = await this.sql.query(`SELECT count(*)::int AS n FROM ${AUDIT_TABLE} WHERE bulk_id = $1 AND state IN ('pending', 'running')`, [id]);
    return row.n;
  }

  /**
   * Acts on the next item of a bulk action, in one transaction with the bulk action's row locked: checks that
   * `owner` holds its lease and that it still runs, reads the next item after the cursor, acts on it (the
   * single-record action, which skips an item already acted on), and moves the cursor past it. Committed
   * together or not at all: a crash before the commit leaves the item to the next walk, after it the cursor past it.
   */
  async step(id: string, owner: string, leaseMs: number): Promise<'acted' | 'skipped' | 'walked' | 'lost'> {
    return this.sql.transaction(async (sql) => {
      const [row] = await sql.query(`SELECT * FROM ${BULK_OPERATIONS_TABLE} WHERE id = $1 FOR UPDATE`, [id]);
      if (!row || row.state !== 'running' || row.lease_owner !== owner) return 'lost';
      if (row.walked_at) return 'walked';
      const target = BULK_TARGETS[row.kind as BulkKind];
      const [item]: BulkItem[] = await target.items(sql, { group: this.group, filter: row.filter, until: iso(row.until), after: row.cursor ?? null, limit: 1 });
      if (!item) {
        await sql.query(
          `UPDATE ${BULK_OPERATIONS_TABLE} SET walked_at = now(), updated_at = now(), last_error = NULL ${target.queued ? '' : `, state = 'done', finished_at = now()`} WHERE id = $1`,
          [id],
        );
        return 'walked';
      }
      const outcome = await target.act(sql, item, {
        group: this.group,
        bulkId: String(row.id),
        action: row.action,
        reason: `bulk #${row.id}: ${row.reason}`,
        actor: row.actor,
        declaredActor: row.declared_actor,
      });
      await sql.query(
        `UPDATE ${BULK_OPERATIONS_TABLE}
         SET cursor = $2, acted = acted + $3, skipped = skipped + $4,
             skip_reasons = CASE WHEN $5::text IS NULL THEN skip_reasons ELSE jsonb_set(skip_reasons, ARRAY[$5::text], to_jsonb(COALESCE((skip_reasons->>$5::text)::int, 0) + 1)) END,
             lease_until = now() + $6 * interval '1 millisecond', updated_at = now(), last_error = NULL
         WHERE id = $1`,
        [id, item.cursor, outcome.acted ? 1 : 0, outcome.acted ? 0 : 1, outcome.acted ? null : outcome.skipped, leaseMs],
      );
      return outcome.acted ? 'acted' : 'skipped';
    });
  }

  /** A walked bulk action whose queued replays or releases are all finished is done (with how many failed). */
  async finishIfSettled(id: string, owner: string): Promise<boolean> {
    const rows = await this.sql.query(
      `UPDATE ${BULK_OPERATIONS_TABLE} SET state = 'done', finished_at = now(), updated_at = now(),
              failed = (SELECT count(*)::int FROM ${AUDIT_TABLE} WHERE bulk_id = $1 AND state = 'failed')
       WHERE id = $1 AND state = 'running' AND lease_owner = $2 AND walked_at IS NOT NULL
         AND NOT EXISTS (SELECT 1 FROM ${AUDIT_TABLE} WHERE bulk_id = $1 AND state IN ('pending', 'running'))
       RETURNING id`,
      [id, owner],
    );
    return rows.length > 0;
  }

  /** Notes an error of a bulk action's walk (nothing of the item was committed; the walk tries again). */
  /** Stops a running bulk action as failed (an item that always fails), if this owner still holds it. */
  async stopFailed(id: string, owner: string, message: string): Promise<void> {
    await this.sql.query(
      `UPDATE ${BULK_OPERATIONS_TABLE} SET state = 'failed', finished_at = now(), updated_at = now(), last_error = $3, lease_owner = NULL, lease_until = NULL
       WHERE id = $1 AND state = 'running' AND lease_owner = $2`,
      [id, owner, message.slice(0, 2000)],
    );
  }

  async noteError(id: string, message: string): Promise<void> {
    await this.sql.query(`UPDATE ${BULK_OPERATIONS_TABLE} SET last_error = $2, updated_at = now() WHERE id = $1 AND state = 'running'`, [id, message.slice(0, 2000)]);
  }

  private async count(sql: SqlClient, selection: BulkSelection, until: string | null): Promise<number> {
    const { from, params } = BULK_TARGETS[selection.kind].where({ group: this.group, filter: selection.filter, until });
    const [row] = await sql.query(`SELECT ${cappedCount(from)} AS n`, params);
    return row.n;
  }

  private async running(selection: BulkSelection, digest: string): Promise<{ id: string } | undefined> {
    const [row] = await this.sql.query(
      `SELECT id::text AS id FROM ${BULK_OPERATIONS_TABLE} WHERE consumer_group = $1 AND kind = $2 AND action = $3 AND filter_digest = $4 AND state = 'running'`,
      [this.group, selection.kind, selection.action, digest],
    );
    return row;
  }

  private async requireTables(kind: BulkKind): Promise<void> {
    if (kind !== 'outbox-set-aside') return;
    const [row] = await this.sql.query(`SELECT to_regclass($1) IS NOT NULL AS present`, [OUTBOX_SET_ASIDE_TABLE]);
    if (!row.present) throw new OperatorRequestError('not-found', 'this database has no outbox (its tables are made by an application with the module option "outbox")');
  }

  private async row(sql: SqlClient, id: string): Promise<any> {
    if (!/^[0-9]{1,18}$/.test(String(id))) throw new OperatorRequestError('invalid', `a bulk action's id is a number, got "${String(id).slice(0, 80)}"`, 'id');
    const [row] = await sql.query(`SELECT * FROM ${BULK_OPERATIONS_TABLE} WHERE consumer_group = $1 AND id = $2`, [this.group, id]);
    if (!row) throw new OperatorRequestError('not-found', `no bulk action ${id} in group ${this.group}`);
    return row;
  }

  private view(r: any, outcomes: BulkOperation['outcomes']): BulkOperation {
    return {
      id: String(r.id),
      kind: r.kind,
      action: r.action,
      filter: r.filter,
      reason: r.reason,
      actor: r.actor ?? null,
      declaredActor: r.declared_actor ?? null,
      ratePerSecond: r.rate_per_second,
      state: r.state,
      matched: r.matched,
      matchedAtLeast: r.matched_at_least,
      until: iso(r.until)!,
      acted: r.acted,
      skipped: r.skipped,
      skipReasons: r.skip_reasons ?? {},
      failed: outcomes ? outcomes.failed : r.failed,
      walked: r.walked_at !== null && r.walked_at !== undefined,
      cursor: r.cursor ?? null,
      lastError: r.last_error ?? null,
      lease: r.lease_owner && r.state === 'running' ? { owner: r.lease_owner, until: iso(r.lease_until)! } : null,
      cancelledBy: r.cancelled_by ?? null,
      createdAt: iso(r.created_at)!,
      updatedAt: iso(r.updated_at)!,
      finishedAt: iso(r.finished_at),
      outcomes,
    };
  }
}
