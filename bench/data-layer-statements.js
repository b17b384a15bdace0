#!/usr/bin/env node
'use strict';
/**
 * `node bench/data-layer-statements.js [--units 300] [--rounds 5] [--layers TypeORM,Prisma,Drizzle,Kysely]`: CPU time of a unit of work's transaction and
 * of one statement sent through a handler's `ctx.db`, for each data layer (TypeORM, Prisma 7, Drizzle, Kysely),
 * through the library's own adapters (its build: build first) and PostgreSQL (DATABASE_URL), without Kafka. Per
 * data layer and round:
 *   unit       a session from the adapter, BEGIN, the data layer lent for the unit (`ctx.db`), COMMIT, release:
 *              what the library does around a unit's statements (its inbox statements left out)
 *   SELECT 1   one more statement through `ctx.db` in the unit (the ORM's way of sending raw SQL, as bench
 *              variants DT, DP, DD, DK do: `manager.query`, `$queryRawUnsafe`, `execute(sql)`, `executeQuery`)
 *   ledger     one more statement: PaymentsLedger's first (its facts), over 200 payment ids in an array parameter
 * The data layers take turns within each round; the figures are each one's median over the rounds, in µs of this
 * process's CPU (user + system), and each one's ratio to the first's. The Prisma client is generated first
 * (bench/variants/prisma). On Node.js before 24 the Prisma adapter's AsyncLocalStorage, once used, makes every
 * promise of the process pay a hook: the data layers measured after it pay it too (`--layers` leaves it out).
 */
require('reflect-metadata');
const { randomUUID } = require('crypto');
const { join } = require('path');
const { Client, Pool } = require('pg');

const LIBRARY = join(__dirname, '../dist/libs/kafka-exactly-once');
const DATABASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : def);
const units = opt('--units', 300);
const rounds = opt('--rounds', 5);
const only = argv.includes('--layers') ? argv[argv.indexOf('--layers') + 1].split(',') : undefined;

const FACTS = `SELECT v.p::uuid::text AS id,
              EXISTS (SELECT 1 FROM ledger_entries l WHERE l.payment_id = v.p::uuid) AS known,
              EXISTS (SELECT 1 FROM payment_approvals a WHERE a.payment_id = v.p::uuid) AS approved
         FROM unnest($1::text[]) WITH ORDINALITY AS v(p, n) ORDER BY v.n`;

async function admin(sql) {
  const client = new Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Each data layer: its port over the database, and how the ledger's statements go through its `ctx.db`. */
async function layers(url, pool) {
  const { typeormDatabase } = require(LIBRARY);
  const { DataSource } = require('typeorm');
  const dataSource = await new DataSource({ type: 'postgres', url, extra: { max: 4 } }).initialize();
  const withPrisma = !only || only.includes('Prisma');
  if (withPrisma) require('./variants/prisma/client').generate();
  const { prismaDatabase } = require(`${LIBRARY}/prisma`);
  const { PrismaClient } = withPrisma ? require('./variants/prisma/generated') : {};
  const { drizzleDatabase } = require(`${LIBRARY}/drizzle`);
  const { drizzle } = require('drizzle-orm/node-postgres');
  const { kyselyDatabase } = require(`${LIBRARY}/kysely`);
  const { CompiledQuery, Kysely, PostgresDialect } = require('kysely');
  // The library's own: a statement with `$1`... placeholders as a drizzle `sql`, each value one parameter.
  const { drizzleSql: drizzleStatement } = require(`${LIBRARY}/database/drizzle.database`);
  return {
    list: [
      { name: 'TypeORM', port: typeormDatabase(dataSource), query: (db, text, params) => db.query(text, params) },
      { name: 'Prisma', port: prismaDatabase({ pool, client: (settings) => new PrismaClient(settings) }), query: (db, text, params = []) => db.$queryRawUnsafe(text, ...params) },
      { name: 'Drizzle', port: drizzleDatabase({ pool, drizzle: (client) => drizzle(client) }), query: async (db, text, params) => (await db.execute(drizzleStatement(text, params))).rows },
      { name: 'Kysely', port: kyselyDatabase({ pool, kysely: (unitPool) => new Kysely({ dialect: new PostgresDialect({ pool: unitPool }) }) }), query: async (db, text, params = []) => (await db.executeQuery(CompiledQuery.raw(text, params))).rows },
    ].filter((l) => !only || only.includes(l.name)),
    close: () => dataSource.destroy(),
  };
}

/** `units` units of work, each with `statements` calls of `statement(db)` through the lent data layer; CPU µs per unit. */
async function timeUnits(layer, statements, statement) {
  const cpu = process.cpuUsage();
  for (let u = 0; u < units; u++) {
    const session = layer.port.createQueryRunner();
    await session.connect();
    await session.startTransaction();
    const lent = layer.port.lend(session);
    const call = async () => {
      for (let s = 0; s < statements; s++) await statement(lent.db);
    };
    await (lent.run ? lent.run(call) : call());
    await session.commitTransaction();
    lent.end(false);
    await session.release();
  }
  const used = process.cpuUsage(cpu);
  return (used.user + used.system) / units;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

async function main() {
  const database = `bench_data_layer_statements_${process.pid}`;
  await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin(`CREATE DATABASE ${database}`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${database}`;
  const pool = new Pool({ connectionString: url.toString(), max: 4 });
  let close;
  try {
    await pool.query('CREATE TABLE ledger_entries (payment_id uuid PRIMARY KEY); CREATE TABLE payment_approvals (payment_id uuid PRIMARY KEY)');
    const made = await layers(url.toString(), pool);
    close = made.close;
    const ids = Array.from({ length: 200 }, () => randomUUID());
    const results = new Map(made.list.map((l) => [l.name, { unit: [], select: [], ledger: [] }]));
    for (let round = 0; round <= rounds; round++) {
      for (const layer of made.list) {
        const unit = await timeUnits(layer, 0, undefined);
        const select = (await timeUnits(layer, 4, (db) => layer.query(db, 'SELECT 1'))) - unit;
        const ledger = (await timeUnits(layer, 4, (db) => layer.query(db, FACTS, [ids]))) - unit;
        // Round 0 warms up (the JIT, Prisma's query compiler): not counted.
        if (round === 0) continue;
        const r = results.get(layer.name);
        r.unit.push(unit);
        r.select.push(select / 4);
        r.ledger.push(ledger / 4);
      }
    }
    const rows = [...results].map(([name, r]) => ({ name, unit: median(r.unit), select: median(r.select), ledger: median(r.ledger) }));
    const base = rows[0];
    const cell = (x, b) => `${x.toFixed(0)}${b === undefined ? '' : ` (${(x / b).toFixed(2)}×)`}`;
    process.stdout.write(`Node ${process.version}, ${units} units a measurement, median of ${rounds} rounds; CPU µs (× ${rows[0].name}'s)\n`);
    process.stdout.write(`${'data layer'.padEnd(10)}  ${'unit'.padStart(14)}  ${'SELECT 1'.padStart(14)}  ${'ledger facts'.padStart(14)}\n`);
    for (const r of rows) process.stdout.write(`${r.name.padEnd(10)}  ${cell(r.unit, r === base ? undefined : base.unit).padStart(14)}  ${cell(r.select, r === base ? undefined : base.select).padStart(14)}  ${cell(r.ledger, r === base ? undefined : base.ledger).padStart(14)}\n`);
  } finally {
    await close?.().catch(() => undefined);
    await pool.end().catch(() => undefined);
    await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exit(1);
  },
);
