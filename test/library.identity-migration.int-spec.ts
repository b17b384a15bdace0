import { createHash } from 'crypto';
import { join } from 'path';
import { DataSource, QueryRunner } from 'typeorm';
import { CoordinateIdentities1764400800000, KAFKA_EXACTLY_ONCE_MIGRATIONS } from 'kafka-exactly-once';
import { runInboxMigrations } from 'kafka-exactly-once/inbox/inbox-migrator';
import { coordinatesDigest } from 'kafka-exactly-once/engine/record-identity';
import { createSuiteDatabase } from './support/database';
import { REPO_ROOT } from './support/environment';
import { AppProcess, ProcessGroup } from './support/processes';

/**
 * The 0.5 identity migration (CoordinateIdentities1764400800000) on an inbox as 0.4 left it, several pages long:
 * it re-keys the very rows its first version re-keyed (kept below as the reference, which scanned the inbox again
 * for every batch), and an instance killed after a page committed leaves a migration that the next boot finishes,
 * nothing re-keyed twice and nothing missed. (What it re-keys, row by row: library.inbox. Its time on a large
 * inbox: bench/identity-migration.js.)
 */
const MIGRATION = 'CoordinateIdentities1764400800000';

/** Rows of the generated part of the mix (the migration commits 5,000 re-keyed rows per page). */
const GENERATED = 12000;

describe('library: the 0.5 identity migration on a large inbox', () => {
  const processes = new ProcessGroup();
  const open: DataSource[] = [];
  let expected: Dump;

  beforeAll(async () => {
    const reference = await inboxOf04('identity_reference');
    open.push(reference);
    await withRunner(reference, (runner) => earlierMigration(runner));
    expected = await dump(reference);
    // The reference did re-key (each kind of row checked in library.inbox): most header-less rows moved, and the
    // row whose new key was taken is set apart.
    const moved = expected.inbox.filter((r) => r.digest === coordinatesDigest(r.message_id));
    expect(moved.length).toBeGreaterThan(6000);
    expect(expected.inbox.filter((r) => r.message_id.endsWith(' (pre-0.5 key)'))).toHaveLength(1);
  }, 120000);

  afterAll(async () => {
    await processes.killAll();
    await Promise.all(open.map((d) => d.destroy()));
  });

  it('re-keys the rows the earlier migration re-keyed, with their parked copies and audit rows', async () => {
    const dataSource = await inboxOf04('identity_new');
    open.push(dataSource);
    await runInboxMigrations(dataSource);
    expect(await dump(dataSource)).toEqual(expected);
    expect(await dataSource.query(`SELECT name FROM kafka_eo_migrations WHERE name = $1`, [MIGRATION])).toHaveLength(1);
  }, 120000);

  it('re-keys the same inside a transaction of the application\'s (TypeORM\'s migrations with inbox.runMigrations: false)', async () => {
    const dataSource = await inboxOf04('identity_typeorm');
    open.push(dataSource);
    await withRunner(dataSource, async (runner) => {
      // What TypeORM's runMigrations does in its default mode ('all'; 'each' the same, one migration at a time).
      await runner.startTransaction();
      await new CoordinateIdentities1764400800000().up(runner);
      expect(runner.isTransactionActive).toBe(true); // its transaction, still open: nothing committed on the way
      await runner.commitTransaction();
    });
    expect(await dump(dataSource)).toEqual(expected);
  }, 120000);

  it('finishes a migration interrupted after a page committed (the process killed) at the next boot', async () => {
    const dataSource = await inboxOf04('identity_interrupted');
    open.push(dataSource);
    const url = (dataSource.options as { url: string }).url;
    const original = await dump(dataSource);

    const first = processes.add(
      new AppProcess('migrations-1', 'test/fixtures/run-inbox-migrations.js', { DATABASE_URL: url, KAFKA_EO_FAULT: 'migration-after-page-commit:1' }, join(REPO_ROOT, 'test-logs', 'identity-migration-1.log')),
    );
    expect(await first.waitForExit(120000)).toBeNull(); // killed
    expect(first.logs()).toContain('fault injection: SIGKILL at migration-after-page-commit #1');

    // One page committed: some rows re-keyed (as the reference re-keyed them), not all; not recorded as applied.
    const halfway = await dump(dataSource);
    const changed = halfway.inbox.filter((r, i) => r.digest !== original.inbox[i].digest || r.message_id !== original.inbox[i].message_id);
    const toChange = expected.inbox.filter((r, i) => r.digest !== original.inbox[i].digest || r.message_id !== original.inbox[i].message_id);
    expect(changed.length).toBeGreaterThan(0);
    expect(changed.length).toBeLessThan(toChange.length);
    const reference = new Set(expected.inbox.map((r) => JSON.stringify(r)));
    expect(changed.filter((r) => !reference.has(JSON.stringify(r)))).toEqual([]);
    expect(await dataSource.query(`SELECT name FROM kafka_eo_migrations WHERE name = $1`, [MIGRATION])).toHaveLength(0);
    // Each parked copy and operator's action moved in the same transaction as its row: none points to no row.
    const astray = await dataSource.query(
      `SELECT 'parked' AS t, message_id FROM kafka_eo_parked_records p WHERE NOT EXISTS (SELECT 1 FROM kafka_eo_inbox i WHERE (i.consumer_group, i.scope, i.id_digest) = (p.consumer_group, p.scope, p.id_digest))
       UNION ALL
       SELECT 'audit', message_id FROM kafka_eo_audit a WHERE a.id_digest IS NOT NULL AND NOT EXISTS (SELECT 1 FROM kafka_eo_inbox i WHERE (i.consumer_group, i.scope, i.id_digest) = (a.consumer_group, a.scope, a.id_digest))`,
    );
    expect(astray).toEqual([]);

    // The next boot (its advisory lock free again with the killed session) finishes it.
    await runInboxMigrations(dataSource);
    expect(await dump(dataSource)).toEqual(expected);
    expect(await dataSource.query(`SELECT name FROM kafka_eo_migrations WHERE name = $1`, [MIGRATION])).toHaveLength(1);
  }, 180000);
});

interface Dump {
  inbox: Array<{ consumer_group: string; scope: string; digest: string; message_id: string; topic: string; partition: number; offset: string; status: string }>;
  parked: Array<{ seq: string; digest: string; message_id: string }>;
  audit: Array<{ id: string; digest: string | null; message_id: string | null }>;
}

/** The inbox in an order that does not depend on the keys (rows moved in one run and not the other line up). */
async function dump(dataSource: DataSource): Promise<Dump> {
  return {
    inbox: await dataSource.query(
      `SELECT consumer_group, scope, encode(id_digest, 'hex') AS digest, message_id, topic, partition, "offset", status FROM kafka_eo_inbox
       ORDER BY consumer_group, scope, topic, partition, "offset", replace(message_id, ' (pre-0.5 key)', ''), id_digest = sha256(convert_to(replace(message_id, ' (pre-0.5 key)', ''), 'UTF8'))`,
    ),
    parked: await dataSource.query(`SELECT seq, encode(id_digest, 'hex') AS digest, message_id FROM kafka_eo_parked_records ORDER BY seq`),
    audit: await dataSource.query(`SELECT id, encode(id_digest, 'hex') AS digest, message_id FROM kafka_eo_audit ORDER BY id`),
  };
}

async function withRunner<T>(dataSource: DataSource, work: (runner: QueryRunner) => Promise<T>): Promise<T> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    return await work(runner);
  } finally {
    await runner.release();
  }
}

/** A database as 0.4 leaves it: the earlier migrations applied and recorded, and an inbox of every kind of row. */
async function inboxOf04(label: string): Promise<DataSource> {
  const url = await createSuiteDatabase(label);
  const dataSource = await new DataSource({ type: 'postgres', url }).initialize();
  await withRunner(dataSource, async (runner) => {
    await runner.query(`CREATE TABLE kafka_eo_migrations (name text PRIMARY KEY, run_at timestamptz NOT NULL DEFAULT now())`);
    for (const Migration of KAFKA_EXACTLY_ONCE_MIGRATIONS) {
      const migration = new Migration();
      if (migration.name === MIGRATION) break;
      await migration.up(runner);
      await runner.query(`INSERT INTO kafka_eo_migrations (name) VALUES ($1)`, [migration.name]);
    }
    await fill(runner);
  });
  return dataSource;
}

/**
 * Row i of group g (scope payments) at payments/(i % 3)/(i / 3), by i % 10: 0-3 a record with a message id; 4-6
 * one without, at its coordinates; 7 one without, handled on a retry tier (its id: where it was first consumed);
 * 8 a header that spelled another record's coordinates; 9 one without, dead-lettered or parked. Group h, with a
 * group-wide scope, has records with and without one. Then rows one of a kind: a record handled under both keys,
 * a coordinates-shaped id whose digest is not its SHA-256, an id PostgreSQL's pattern does not take, a retry tier
 * of another topic, a dotted topic's tier, the same coordinates in another group. Parked rows have parked copies;
 * dead letters and parked records have operators' replays in the audit, and a release by key has no id at all.
 */
async function fill(runner: QueryRunner): Promise<void> {
  await runner.query(
    `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, processed_at)
     SELECT 'g', 'payments', sha256(convert_to(id, 'UTF8')), id, topic, p, o, status, 1, '[]'::jsonb, now()
     FROM (
       SELECT (i % 3)::int AS p, (i / 3)::bigint AS o,
              CASE WHEN i % 10 = 7 THEN 'payments.retry.2' ELSE 'payments' END AS topic,
              CASE WHEN i % 10 < 4 THEN 'm-' || md5(i::text)
                   WHEN i % 10 = 8 THEN 'payments/' || (i % 3) || '/' || (i / 3 + 100000)
                   ELSE 'payments/' || (i % 3) || '/' || (i / 3) END AS id,
              CASE WHEN i % 20 = 9 OR i % 200 = 8 THEN 'parked' WHEN i % 20 = 19 THEN 'dead-lettered' ELSE 'processed' END AS status
       FROM generate_series(0, ${GENERATED - 1}) AS i) r`,
  );
  await runner.query(
    `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, processed_at)
     SELECT 'h', '', sha256(convert_to(id, 'UTF8')), id, 'orders', 0, i, 'processed', 1, '[]'::jsonb, now()
     FROM (SELECT i, CASE WHEN i % 2 = 0 THEN 'orders/0/' || i ELSE 'o-' || i END AS id FROM generate_series(0, 599) AS i) r`,
  );
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const row = (group: string, scope: string, digest: string, id: string, topic: string, partition: number, offset: number) =>
    runner.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, processed_at)
       VALUES ($1, $2, decode($3, 'hex'), $4, $5, $6, $7, 'processed', 1, '[]'::jsonb, now())`,
      [group, scope, digest, id, topic, partition, offset],
    );
  await row('g', 'payments', sha256('payments/0/900000'), 'payments/0/900000', 'payments', 0, 900000);
  await row('g', 'payments', coordinatesDigest('payments/0/900000'), 'payments/0/900000', 'payments', 0, 900000); // and under 0.5's key
  await row('g', 'payments', sha256('another id'), 'payments/1/900001', 'payments', 1, 900001);
  await row('g', 'payments', sha256('pay ments/0/1'), 'pay ments/0/1', 'pay ments', 0, 1);
  await row('g', 'payments', sha256('orders/0/7'), 'orders/0/7', 'payments.retry.1', 0, 77);
  await row('g', 'a.b', sha256('a.b/0/1'), 'a.b/0/1', 'a.b.retry.1', 0, 5);
  await row('g2', 'payments', sha256('payments/0/5'), 'payments/0/5', 'payments', 0, 5);
  await runner.query(
    `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, reason, state)
     SELECT consumer_group, 'payments', sha256(convert_to('key-' || "offset", 'UTF8')), partition, "offset", scope, id_digest, message_id, 'handler-failed', 'parked'
     FROM kafka_eo_inbox WHERE status = 'parked' ORDER BY consumer_group, topic, partition, "offset"`,
  );
  await runner.query(
    `INSERT INTO kafka_eo_audit (consumer_group, action, topic, scope, id_digest, message_id, actor, state, finished_at)
     SELECT consumer_group, 'replay', topic, scope, id_digest, message_id, 'ops', 'done', now()
     FROM kafka_eo_inbox WHERE status IN ('parked', 'dead-lettered') ORDER BY consumer_group, topic, partition, "offset"`,
  );
  await runner.query(
    `INSERT INTO kafka_eo_audit (consumer_group, action, topic, key_digest, ordering_key, actor, state, finished_at)
     VALUES ('g', 'release', 'payments', sha256(convert_to('key-3', 'UTF8')), 'key-3', 'ops', 'done', now())`,
  );
}

/** CoordinateIdentities1764400800000 as first written (a scan of the inbox for every batch of 1,000): the reference. */
async function earlierMigration(queryRunner: QueryRunner): Promise<void> {
  for (;;) {
    const rows: Array<{ consumer_group: string; scope: string; digest: string; message_id: string }> = await queryRunner.query(
      `SELECT consumer_group, scope, encode(id_digest, 'hex') AS digest, message_id FROM kafka_eo_inbox i
       WHERE message_id ~ '^[A-Za-z0-9._-]+/[0-9]+/[0-9]+$' AND id_digest = sha256(convert_to(message_id, 'UTF8'))
         AND (message_id = topic || '/' || partition || '/' || "offset" OR starts_with(topic, split_part(message_id, '/', 1) || '.retry.'))
       LIMIT 1000`,
    );
    if (rows.length === 0) return;
    const moves = rows.map((r) => ({ group: r.consumer_group, scope: r.scope, from: r.digest, to: coordinatesDigest(r.message_id) }));
    const params = [moves.map((m) => m.group), moves.map((m) => m.scope), moves.map((m) => m.from), moves.map((m) => m.to)];
    const moved = `unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS m(grp, scope, from_hex, to_hex)`;
    const skipped: Array<{ n: number }> = await queryRunner.query(
      `WITH moved AS (
         UPDATE kafka_eo_inbox i SET id_digest = decode(m.to_hex, 'hex') FROM ${moved}
         WHERE i.consumer_group = m.grp AND i.scope = m.scope AND i.id_digest = decode(m.from_hex, 'hex')
           AND NOT EXISTS (SELECT 1 FROM kafka_eo_inbox j WHERE j.consumer_group = m.grp AND j.scope = m.scope AND j.id_digest = decode(m.to_hex, 'hex'))
         RETURNING 1)
       SELECT ${moves.length} - count(*)::int AS n FROM moved`,
      params,
    );
    await queryRunner.query(
      `UPDATE kafka_eo_parked_records p SET id_digest = decode(m.to_hex, 'hex') FROM ${moved}
       WHERE p.consumer_group = m.grp AND p.scope = m.scope AND p.id_digest = decode(m.from_hex, 'hex')`,
      params,
    );
    await queryRunner.query(
      `UPDATE kafka_eo_audit a SET id_digest = decode(m.to_hex, 'hex') FROM ${moved}
       WHERE a.consumer_group = m.grp AND a.scope = m.scope AND a.id_digest = decode(m.from_hex, 'hex')`,
      params,
    );
    if (skipped[0]?.n > 0) {
      await queryRunner.query(
        `UPDATE kafka_eo_inbox i SET message_id = i.message_id || ' (pre-0.5 key)' FROM ${moved}
         WHERE i.consumer_group = m.grp AND i.scope = m.scope AND i.id_digest = decode(m.from_hex, 'hex')`,
        params,
      );
    }
  }
}
