#!/usr/bin/env node
'use strict';
/**
 * `node bench/identity-migration.js [--rows 100000] [--library dist/libs/kafka-exactly-once] [--keep]`: the time
 * of the 0.5 identity migration (CoordinateIdentities1764400800000) at boot, on an inbox left by 0.4.
 *
 * Creates a database of its own (on DATABASE_URL's server), applies the library's earlier migrations, fills the
 * inbox with `--rows` rows as 0.4 wrote them, then times `runInboxMigrations`, the boot's own call, which applies
 * the one migration left. The mix, by row number modulo 100: 50 records with a `message-id` (UUID text), 45
 * without one at their own coordinates, 2 without one handled on a retry tier, 1 whose header spelled another
 * record's coordinates (stays), 1 dead-lettered and 1 parked without one (each with an operator's replay in the
 * audit, the parked ones with a parked copy); 49 in 100 are re-keyed. Processed rows point to a unit's outputs, as
 * 0.4 writes them. Then it checks the outcome (every row to re-key re-keyed, no other) and drops the database
 * (`--keep` keeps it; `--fill-only` stops before the migration, to look at its statements' plans). `--library`
 * loads the library from another build (the figures before a change: copy dist/libs/kafka-exactly-once of the
 * earlier build somewhere inside the repository, e.g. under bench/results/). Build first (`npm run build`).
 */
const { resolve } = require('path');
const { createHash } = require('crypto');
const { Client } = require('pg');

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def);
const rows = Number(opt('--rows', '100000'));
const library = resolve(__dirname, '..', opt('--library', 'dist/libs/kafka-exactly-once'));
const fillOnly = argv.includes('--fill-only');
const keep = argv.includes('--keep') || fillOnly;
const allCoordinates = argv.includes('--all-coordinates');
const DATABASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

const { DataSource } = require('typeorm');
const { runInboxMigrations } = require(`${library}/inbox/inbox-migrator`);
const { KAFKA_EXACTLY_ONCE_MIGRATIONS } = require(`${library}/inbox/migrations`);
const { coordinatesDigest } = require(`${library}/engine/record-identity`);

const MIGRATION = 'CoordinateIdentities1764400800000';

function withDatabase(url, database) {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** The inbox as 0.4 leaves it: `rows` rows of one group, 12 partitions, with parked copies and audit rows. */
async function fill(sql) {
  // Row i: partition i % 12, offset i / 12 (every row at coordinates of its own); what it is by k (i % 100, or 50).
  await sql.query(
    `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, claimed_at, processed_at, dlq_reason)
     SELECT 'bench', 'payments', sha256(convert_to(id, 'UTF8')), id, topic, p, o,
            CASE k WHEN 98 THEN 'dead-lettered' WHEN 99 THEN 'parked' ELSE 'processed' END, 1,
            CASE WHEN k < 98 THEN jsonb_build_array(jsonb_build_object('unit', (i / 500)::text)) ELSE '[]'::jsonb END,
            now(), now(), CASE k WHEN 98 THEN 'handler-failed' END
     FROM (
       SELECT i, k, (i % 12)::int AS p, (i / 12)::bigint AS o,
              CASE WHEN k IN (95, 96) THEN 'payments.retry.1' ELSE 'payments' END AS topic,
              CASE
                WHEN k < 50 THEN (substr(md5(i::text), 1, 8) || '-' || substr(md5(i::text), 9, 4) || '-7' || substr(md5(i::text), 14, 3) || '-8' || substr(md5(i::text), 18, 3) || '-' || substr(md5(i::text), 21, 12))
                WHEN k = 97 THEN 'payments/' || (i % 12) || '/' || (i / 12 + 1000000000)
                ELSE 'payments/' || (i % 12) || '/' || (i / 12)
              END AS id
       FROM (SELECT i, CASE WHEN $2 THEN 50 ELSE i % 100 END AS k FROM generate_series(0, $1::bigint - 1) AS i) n) r`,
    [rows, allCoordinates],
  );
  await sql.query(
    `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, reason, state)
     SELECT 'bench', 'payments', sha256(convert_to('acct-' || (i % 997), 'UTF8')), partition, "offset", scope, id_digest, message_id, 'handler-failed', 'parked'
     FROM (SELECT *, ("offset" * 12 + partition) AS i FROM kafka_eo_inbox WHERE status = 'parked') r`,
  );
  await sql.query(
    `INSERT INTO kafka_eo_audit (consumer_group, action, topic, scope, id_digest, message_id, actor, state, finished_at)
     SELECT consumer_group, 'replay', topic, scope, id_digest, message_id, 'bench', 'done', now() FROM kafka_eo_inbox WHERE status IN ('dead-lettered', 'parked')`,
  );
  await sql.query(`VACUUM ANALYZE kafka_eo_inbox`);
  await sql.query(`VACUUM ANALYZE kafka_eo_parked_records`);
  await sql.query(`VACUUM ANALYZE kafka_eo_audit`);
}

/** Every row the migration must re-key has its coordinates' digest, and no other row moved. */
async function check(sql) {
  const sha256 = (text) => createHash('sha256').update(text).digest('hex');
  const [{ n: total }] = (await sql.query(`SELECT count(*)::int AS n FROM kafka_eo_inbox`)).rows;
  if (total !== rows) throw new Error(`the inbox holds ${total} rows, not ${rows}`);
  let wrong = 0;
  let rekeyed = 0;
  let after = '';
  for (;;) {
    // By the primary key (one group, one scope here): each page is an index range.
    const page = (
      await sql.query(
        `SELECT ("offset" * 12 + partition) AS i, message_id, encode(id_digest, 'hex') AS digest FROM kafka_eo_inbox
         WHERE consumer_group = 'bench' AND scope = 'payments' AND id_digest > decode($1, 'hex') ORDER BY id_digest LIMIT 50000`,
        [after],
      )
    ).rows;
    if (page.length === 0) break;
    after = page[page.length - 1].digest;
    for (const r of page) {
      const k = allCoordinates ? 50 : Number(r.i) % 100;
      const expected = k < 50 || k === 97 ? sha256(r.message_id) : coordinatesDigest(r.message_id);
      if (r.digest !== expected) wrong += 1;
      if (r.digest !== sha256(r.message_id)) rekeyed += 1;
    }
  }
  const [{ n: strayParked }] = (
    await sql.query(`SELECT count(*)::int AS n FROM kafka_eo_parked_records p WHERE NOT EXISTS (SELECT 1 FROM kafka_eo_inbox i WHERE (i.consumer_group, i.scope, i.id_digest) = (p.consumer_group, p.scope, p.id_digest))`)
  ).rows;
  const [{ n: strayAudit }] = (
    await sql.query(`SELECT count(*)::int AS n FROM kafka_eo_audit a WHERE NOT EXISTS (SELECT 1 FROM kafka_eo_inbox i WHERE (i.consumer_group, i.scope, i.id_digest) = (a.consumer_group, a.scope, a.id_digest))`)
  ).rows;
  if (wrong > 0 || strayParked > 0 || strayAudit > 0) throw new Error(`wrong outcome: ${wrong} rows keyed wrongly, ${strayParked} parked copies and ${strayAudit} audit rows left behind`);
  return rekeyed;
}

(async () => {
  const database = `kafka_eo_bench_identity_${process.pid}`;
  const admin = new Client({ connectionString: DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const url = withDatabase(DATABASE_URL, database);
  const dataSource = await new DataSource({ type: 'postgres', url }).initialize();
  const sql = new Client({ connectionString: url });
  await sql.connect();
  try {
    // The earlier migrations, recorded as applied, as the boot of 0.4 leaves them.
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    await runner.query(`CREATE TABLE kafka_eo_migrations (name text PRIMARY KEY, run_at timestamptz NOT NULL DEFAULT now())`);
    for (const Migration of KAFKA_EXACTLY_ONCE_MIGRATIONS) {
      const migration = new Migration();
      if (migration.name === MIGRATION) break;
      await migration.up(runner);
      await runner.query(`INSERT INTO kafka_eo_migrations (name) VALUES ($1)`, [migration.name]);
    }
    await runner.release();
    let started = Date.now();
    await fill(sql);
    const [{ size }] = (await sql.query(`SELECT pg_size_pretty(pg_total_relation_size('kafka_eo_inbox')) AS size`)).rows;
    console.log(`inbox of ${rows} rows as 0.4 left it${allCoordinates ? ', all without a message id' : ''} (${size}), filled in ${((Date.now() - started) / 1000).toFixed(1)} s; library from ${library}`);
    if (fillOnly) return;
    started = Date.now();
    const cpu = process.cpuUsage();
    await runInboxMigrations(dataSource, { log: () => undefined, warn: () => undefined });
    const seconds = (Date.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    const applied = (await sql.query(`SELECT 1 FROM kafka_eo_migrations WHERE name = $1`, [MIGRATION])).rowCount;
    if (applied !== 1) throw new Error(`${MIGRATION} is not recorded as applied`);
    const rekeyed = await check(sql);
    console.log(
      `${MIGRATION}: ${seconds.toFixed(1)} s for ${rows} rows (${rekeyed} re-keyed, ${Math.round(rows / seconds)} rows/s); the bench's process ${((used.user + used.system) / 1e6).toFixed(1)} CPU s`,
    );
  } finally {
    await sql.end();
    await dataSource.destroy();
    if (!keep) await admin.query(`DROP DATABASE ${database}`);
    else console.log(`kept the database ${database}`);
    await admin.end();
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
