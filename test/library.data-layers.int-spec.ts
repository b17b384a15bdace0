import { execFileSync } from 'child_process';
import { writeFileSync } from 'fs';
import { join } from 'path';
import { Kafka } from 'kafkajs';
import { Pool } from 'pg';
import { UnitConnectionError } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const fixture = require('./fixtures/data-layer-app.js') as {
  appModule(options: { kind: string; pool: Pool; prefix: string; brokers: string[]; handlerOptions?: HandlerOptions; extra?: object }): new () => unknown;
  TABLES: string;
};

interface HandlerOptions {
  failAfterWrite?: (p: Payment) => boolean;
  /** Sends a statement through ctx.db this many ms after the call returned (undefined: none). */
  strayAfterMs?: (p: Payment) => number | undefined;
  onStray?: (p: Payment, error: unknown) => void;
  /** TypeORM: makes the transaction fail right before the library's COMMIT (PostgreSQL answers it with ROLLBACK). */
  failBeforeCommit?: (p: Payment) => boolean;
  /** A transaction of the data layer's own, not awaited: one write in the call, one after it. */
  halfTransaction?: (p: Payment) => boolean;
  /** TypeORM: a statement on the unit's raw node-postgres connection this many ms after the call. */
  rawLateAfterMs?: (p: Payment) => number | undefined;
  /** A statement text sent through the data layer's raw SQL before the payment's writes. */
  transactionControl?: (p: Payment) => string | undefined;
}

interface Payment {
  paymentId: string;
  accountId: string;
  amountCents: number;
}

const LAYERS = ['prisma', 'drizzle', 'kysely'] as const;

/** Payments of a few accounts, deposits and withdrawals mixed, so that outcomes depend on order. */
function payments(label: string, count: number, accounts: number): Payment[] {
  return Array.from({ length: count }, (_, i) => ({
    paymentId: `${label}-${i}`,
    accountId: `${label}-acc-${i % accounts}`,
    amountCents: i % 3 === 2 ? -((i * 37) % 500) - 1 : ((i * 53) % 400) + 1,
  }));
}

/** The balances the ledger must end with: the in-order fold of each account's payments. */
function fold(list: Payment[]): Record<string, string> {
  const balances: Record<string, bigint> = {};
  for (const p of list) {
    const b = balances[p.accountId] ?? 0n;
    const after = b + BigInt(p.amountCents);
    balances[p.accountId] = after >= 0n ? after : b;
  }
  return Object.fromEntries(Object.entries(balances).map(([k, v]) => [k, String(v)]));
}

async function publish(kafka: Kafka, topic: string, list: Payment[], copies = 1): Promise<void> {
  const messages = list.flatMap((p) => Array.from({ length: copies }, () => ({ key: p.accountId, value: JSON.stringify(p), headers: { 'message-id': p.paymentId } })));
  await sendRaw(kafka, topic, messages);
}

let prismaGenerated = false;

/** The client of test/fixtures/prisma/schema.prisma, generated once per run of the suite. */
function generatePrismaClient(): void {
  if (prismaGenerated) return;
  // Offline, `prisma generate` only needs a path for the schema engine it never runs here (docs/data-layers.md).
  const engine = join(REPO_ROOT, 'test-logs', 'no-schema-engine');
  writeFileSync(engine, '');
  execFileSync(process.execPath, [require.resolve('prisma/build/index.js'), 'generate', '--schema', join(REPO_ROOT, 'test/fixtures/prisma/schema.prisma')], {
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? engine, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    stdio: 'pipe',
  });
  prismaGenerated = true;
}

async function balances(databaseUrl: string, label: string): Promise<Record<string, string>> {
  const rows = await queryDatabase<{ account_id: string; balance_cents: string }>(databaseUrl, 'SELECT account_id, balance_cents::text FROM dl_accounts WHERE account_id LIKE $1', [`${label}-acc-%`]);
  return Object.fromEntries(rows.map((r) => [r.account_id, r.balance_cents]));
}

/**
 * Handlers that write through Prisma 7, Drizzle or Kysely only (`ctx.db`, the module's `database` option), each
 * against the real broker and PostgreSQL: duplicates applied once, a nested `transaction()` a savepoint that the
 * unit's rollback discards, a statement after the unit refused, `Outbox.add` in each ORM's transaction, and a
 * SIGKILL between the PostgreSQL and the Kafka commit with one effect per payment after the restart.
 */
/** A suite of a data layer's: its database with the fixture's tables, a pool of it, and the test broker's client. */
function dataLayerSuite(label: string, kind: string): { readonly kafka: Kafka; readonly databaseUrl: string; readonly pool: Pool } {
  const suite = {} as { kafka: Kafka; databaseUrl: string; pool: Pool };
  beforeAll(async () => {
    if (kind === 'prisma') generatePrismaClient();
    suite.kafka = testKafka();
    suite.databaseUrl = await createSuiteDatabase(label);
    await queryDatabase(suite.databaseUrl, fixture.TABLES);
    suite.pool = new Pool({ connectionString: suite.databaseUrl, max: 10 });
  });
  afterAll(async () => {
    await suite.pool?.end();
  });
  return suite;
}

describe.each(LAYERS)('library: a handler writing through %s', (kind) => {
  const processes = new ProcessGroup();
  const suite = dataLayerSuite(`dl-${kind}`, kind);
  let kafka: Kafka;
  let databaseUrl: string;
  let pool: Pool;

  beforeAll(() => {
    ({ kafka, databaseUrl, pool } = suite);
  });

  afterAll(async () => {
    await processes.killAll();
  });

  it('applies each payment once through ctx.db, duplicates skipped, balances the in-order fold, one output each', async () => {
    const prefix = `${uniqueTopic(`dl-${kind}`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 2);
    const list = payments(`${kind}-a`, 60, 6);
    await publish(kafka, `${prefix}payments`, list, 2);
    const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers() }));
    try {
      const outputs = await readTopic(kafka, `${prefix}processed`, { until: quietAfter(60, 2000), pollIdleMs: 250, timeoutMs: 60000 });
      expect(outputs).toHaveLength(60);
      expect(new Set(outputs.map((o) => JSON.parse(o.value!.toString()).paymentId)).size).toBe(60);
      const ledger = await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM dl_ledger WHERE payment_id LIKE '${kind}-a-%'`);
      expect(ledger[0].n).toBe(60);
      expect(await balances(databaseUrl, `${kind}-a`)).toEqual(fold(list));
      // The library's own inbox rows and the ORM's writes went into the same transactions: one row per payment.
      const inbox = await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE topic = $1`, [`${prefix}payments`]);
      expect(inbox[0].n).toBe(60);
    } finally {
      await app.close();
    }
  });

  it("rolls back a failed record's writes made in a nested transaction() that had committed (a savepoint), and dead-letters it", async () => {
    const prefix = `${uniqueTopic(`dl-${kind}-fail`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 1);
    const list = payments(`${kind}-f`, 5, 1);
    await publish(kafka, `${prefix}payments`, list);
    const failing = list[2].paymentId;
    const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers(), handlerOptions: { failAfterWrite: (p) => p.paymentId === failing } }));
    try {
      const dead = await readTopic(kafka, `${prefix}payments.dlq`, { until: (r) => r.length >= 1, timeoutMs: 60000 });
      expect(dead[0].headers['dlq-reason']).toBe('handler-failed');
      await readTopic(kafka, `${prefix}processed`, { until: quietAfter(4, 1500), pollIdleMs: 250, timeoutMs: 60000 });
      const rows = await queryDatabase<{ payment_id: string }>(databaseUrl, `SELECT payment_id FROM dl_ledger WHERE payment_id LIKE '${kind}-f-%' ORDER BY payment_id`);
      expect(rows.map((r) => r.payment_id)).toEqual(list.filter((p) => p.paymentId !== failing).map((p) => p.paymentId));
    } finally {
      await app.close();
    }
  });

  it('refuses a statement of the data layer it lent once the unit of work has ended', async () => {
    const prefix = `${uniqueTopic(`dl-${kind}-late`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 1);
    let kept: unknown;
    const app = await startLibraryModule(
      fixture.appModule({
        kind,
        pool,
        prefix,
        brokers: kafkaBrokers(),
      }),
    );
    try {
      // What a handler would keep of ctx.db beyond its call: lent for a unit that then ends.
      const { KafkaExactlyOnceLifecycle } = await import('kafka-exactly-once');
      const database = app.get(KafkaExactlyOnceLifecycle).getDatabase();
      const session = database.createQueryRunner();
      await session.connect();
      await session.startTransaction();
      const lent = database.lend(session);
      kept = lent.open().db;
      lent.end(false);
      await session.rollbackTransaction();
      await session.release();
      const late = kind === 'prisma' ? (kept as any).account.count() : kind === 'drizzle' ? (kept as any).execute('SELECT 1') : (kept as any).selectFrom('dl_accounts').selectAll().execute();
      const refused = await late.then(() => undefined, (err: Error) => err);
      // Prisma and Drizzle wrap what the connection threw (Drizzle keeps it as the cause).
      const cause = kind === 'drizzle' ? (refused as Error & { cause?: unknown })?.cause : refused;
      expect(String((cause as Error)?.message)).toMatch(kind === 'prisma' ? /lent to a handler's call that is over/ : /the unit of work this data layer was lent for has ended/);
      if (kind !== 'prisma') expect(cause).toBeInstanceOf(UnitConnectionError);
    } finally {
      await app.close();
    }
  });

  it('writes outbox events in the data layer\'s own transaction: committed with it, rolled back with it, refused outside one', async () => {
    const prefix = `${uniqueTopic(`dl-${kind}-outbox`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 1);
    const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers(), extra: { outbox: { relay: false } } }));
    try {
      const { Outbox } = await import('kafka-exactly-once');
      const outbox = app.get(Outbox);
      const event = (id: string) => ({ paymentId: id, accountId: 'acc-o', status: 'ACCEPTED', balanceAfterCents: '1' });
      const orm = ormClient(kind, pool);
      try {
        await orm.transaction(async (tx) => {
          await tx.insert(`${kind}-o-1`);
          await outbox.add(tx.handle, 'processed', event(`${kind}-o-1`), { key: 'acc-o' });
        });
        await expect(
          orm.transaction(async (tx) => {
            await tx.insert(`${kind}-o-2`);
            await outbox.add(tx.handle, 'processed', event(`${kind}-o-2`), { key: 'acc-o' });
            throw new Error('rolled back on purpose');
          }),
        ).rejects.toThrow('rolled back on purpose');
        await expect(outbox.add(orm.outside, 'processed', event(`${kind}-o-3`), { key: 'acc-o' })).rejects.toMatchObject({ refusal: 'not-in-transaction' });
      } finally {
        await orm.close();
      }
      const rows = await queryDatabase<{ payment_id: string }>(databaseUrl, `SELECT payment_id FROM dl_ledger WHERE payment_id LIKE '${kind}-o-%'`);
      expect(rows).toEqual([{ payment_id: `${kind}-o-1` }]);
      const events = await queryDatabase<{ payload: Buffer }>(databaseUrl, `SELECT payload FROM kafka_eo_outbox WHERE aggregatetype = $1`, [`${prefix}processed`]);
      expect(events.map((e) => JSON.parse(e.payload.toString()).paymentId)).toEqual([`${kind}-o-1`]);
    } finally {
      await app.close();
    }
  });

  it('keeps one effect per payment across a SIGKILL between the PostgreSQL and the Kafka commit (a process of its own)', async () => {
    const prefix = `${uniqueTopic(`dl-${kind}-kill`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 2);
    const list = payments(`${kind}-k`, 200, 8);
    await publish(kafka, `${prefix}payments`, list);
    const env = { KAFKA_BROKERS: kafkaBrokers().join(','), DATABASE_URL: databaseUrl, DATA_LAYER: kind, DL_PREFIX: prefix };
    const first = processes.add(new AppProcess(`dl-${kind}-1`, 'test/fixtures/data-layer-app.js', { ...env, KAFKA_EO_FAULT: 'after-db-commit:2' }, join(REPO_ROOT, 'test-logs', `dl-${kind}-1.log`)));
    await first.waitForExit(90000);
    expect(first.logs()).toContain('fault injection: SIGKILL at after-db-commit #2');
    const second = processes.add(new AppProcess(`dl-${kind}-2`, 'test/fixtures/data-layer-app.js', env, join(REPO_ROOT, 'test-logs', `dl-${kind}-2.log`)));
    await waitUntil(async () => (await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM dl_ledger WHERE payment_id LIKE '${kind}-k-%'`))[0].n === 200, 90000, 'every payment applied');
    const outputs = await readTopic(kafka, `${prefix}processed`, { until: quietAfter(200, 3000), pollIdleMs: 250, timeoutMs: 90000 });
    expect(outputs).toHaveLength(200);
    expect(new Set(outputs.map((o) => JSON.parse(o.value!.toString()).paymentId)).size).toBe(200);
    expect(await balances(databaseUrl, `${kind}-k`)).toEqual(fold(list));
    await second.stop();
  });
});

/**
 * What a handler sends through `ctx.db` after its call is over (a forgotten await, a timer), and a transaction that
 * fails after the library's last statement: nothing of either may run inside the unit after the handler's part of
 * it, nor after its COMMIT in a transaction of its own, and a COMMIT that PostgreSQL answers with ROLLBACK must not
 * be taken for a commit (the Kafka transaction would then commit outputs and offsets of work PostgreSQL dropped).
 */
describe.each(['typeorm', ...LAYERS] as const)('library: statements after the handler\'s call, through %s', (kind) => {
  const suite = dataLayerSuite(`dl-late-${kind}`, kind);
  let kafka: Kafka;
  let databaseUrl: string;
  let pool: Pool;

  beforeAll(() => {
    ({ kafka, databaseUrl, pool } = suite);
  });

  it('refuses every statement sent through ctx.db once the call is over: none runs in the unit or outside it, each payment applied once', async () => {
    const prefix = `${uniqueTopic(`dl-${kind}-stray`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 2);
    const list = payments(`${kind}-s`, 40, 4);
    await publish(kafka, `${prefix}payments`, list);
    const delays = [0, 1, 3, 10, 30];
    const strays: Array<{ paymentId: string; error: unknown }> = [];
    const handlerOptions: HandlerOptions = {
      strayAfterMs: (p) => delays[Number(p.paymentId.split('-').pop()) % delays.length],
      onStray: (p, error) => strays.push({ paymentId: p.paymentId, error }),
    };
    const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers(), handlerOptions }));
    try {
      const outputs = await readTopic(kafka, `${prefix}processed`, { until: quietAfter(40, 1500), pollIdleMs: 250, timeoutMs: 60000 });
      await waitUntil(async () => strays.length >= 40, 20000, 'every stray statement settled');
      expect(outputs).toHaveLength(40);
      expect(new Set(outputs.map((o) => JSON.parse(o.value!.toString()).paymentId)).size).toBe(40);
      const ran = await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM dl_stray WHERE payment_id LIKE '${kind}-s-%'`);
      expect(ran[0].n).toBe(0);
      const messages = strays.map((s) => errorText(s.error));
      expect(messages.filter((m) => !/lent to is over|call that is over|was lent for has ended/.test(m))).toEqual([]);
      expect(await balances(databaseUrl, `${kind}-s`)).toEqual(fold(list));
    } finally {
      await app.close();
    }
  });

  it("refuses a statement that would end the unit's transaction, however it is written: its record fails, nothing of the unit commits early", async () => {
    const prefix = `${uniqueTopic(`dl-${kind}-control`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 1);
    const list = payments(`${kind}-c`, 12, 2);
    await publish(kafka, `${prefix}payments`, list);
    const texts = ['SELECT 1; COMMIT', '/* why */ COMMIT AND CHAIN', 'select 1;\n-- and\nEND', 'ROLLBACK AND CHAIN'];
    const hostile = new Map(texts.map((text, i) => [list[2 + i * 3].paymentId, text]));
    const handlerOptions: HandlerOptions = { transactionControl: (p) => hostile.get(p.paymentId) };
    const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers(), handlerOptions }));
    try {
      const dead = await readTopic(kafka, `${prefix}payments.dlq`, { until: (r) => r.length >= texts.length, timeoutMs: 60000 });
      const outputs = await readTopic(kafka, `${prefix}processed`, { until: quietAfter(12 - texts.length, 2000), pollIdleMs: 250, timeoutMs: 60000 });
      expect(dead.map((d) => d.headers['dlq-original-offset']).length).toBe(texts.length);
      for (const letter of dead) expect(String(letter.headers['dlq-error-message'])).toMatch(/would end or change the unit of work's transaction/);
      const applied = list.filter((p) => !hostile.has(p.paymentId));
      expect(outputs.map((o) => JSON.parse(o.value!.toString()).paymentId).sort()).toEqual(applied.map((p) => p.paymentId).sort());
      const ledger = await queryDatabase<{ payment_id: string }>(databaseUrl, `SELECT payment_id FROM dl_ledger WHERE payment_id LIKE '${kind}-c-%'`);
      expect(ledger.map((r) => r.payment_id).sort()).toEqual(applied.map((p) => p.paymentId).sort());
      expect(await balances(databaseUrl, `${kind}-c`)).toEqual(fold(applied));
    } finally {
      await app.close();
    }
  });

  it("undoes a transaction of the data layer's own that a call left open (not awaited) and fails the call: none of its writes kept, half or whole", async () => {
    const prefix = `${uniqueTopic(`dl-${kind}-half`)}.`;
    await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 1);
    const list = payments(`${kind}-h`, 10, 2);
    await publish(kafka, `${prefix}payments`, list);
    const half = new Set([list[3].paymentId, list[7].paymentId]);
    const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers(), handlerOptions: { halfTransaction: (p) => half.has(p.paymentId) } }));
    try {
      // Each such payment ends one of two ways, by when its transaction's first statement was sent: before the call
      // returned (the call fails: dead-lettered, its writes undone), or after (refused whole: the payment applied).
      const inbox = async () =>
        (await queryDatabase<{ status: string }>(databaseUrl, `SELECT status FROM kafka_eo_inbox WHERE topic = $1`, [`${prefix}payments`])).map((r) => r.status);
      await waitUntil(async () => (await inbox()).length === list.length, 60000, 'every payment applied or dead-lettered');
      const deadCount = (await inbox()).filter((status) => status === 'dead-lettered').length;
      const dead = deadCount === 0 ? [] : await readTopic(kafka, `${prefix}payments.dlq`, { until: quietAfter(deadCount, 1000), pollIdleMs: 250, timeoutMs: 60000 });
      const outputs = await readTopic(kafka, `${prefix}processed`, { until: quietAfter(list.length - deadCount, 1500), pollIdleMs: 250, timeoutMs: 60000 });
      const deadIds = dead.map((d) => String(d.headers['message-id']));
      expect(deadIds.filter((id) => !half.has(id))).toEqual([]);
      for (const letter of dead) expect(String(letter.headers['dlq-error-message'])).toMatch(/still open/);
      const applied = list.filter((p) => !deadIds.includes(p.paymentId));
      expect(outputs.map((o) => JSON.parse(o.value!.toString()).paymentId).sort()).toEqual(applied.map((p) => p.paymentId).sort());
      await new Promise((resolve) => setTimeout(resolve, 200));
      const rows = await queryDatabase<{ payment_id: string }>(databaseUrl, `SELECT payment_id FROM dl_stray WHERE payment_id LIKE 'half-%${kind}-h-%'`);
      expect(rows).toEqual([]);
      expect(await balances(databaseUrl, `${kind}-h`)).toEqual(fold(applied));
    } finally {
      await app.close();
    }
  });

  if (kind === 'typeorm') {
    it("refuses a late statement sent on the unit's raw connection, past what ctx.manager lends", async () => {
      const prefix = `${uniqueTopic(`dl-${kind}-raw`)}.`;
      await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 1);
      const list = payments(`${kind}-w`, 20, 2);
      await publish(kafka, `${prefix}payments`, list);
      const strays: Array<{ paymentId: string; error: unknown }> = [];
      const handlerOptions: HandlerOptions = { rawLateAfterMs: (p) => [0, 2, 10][Number(p.paymentId.split('-').pop()) % 3], onStray: (p, error) => strays.push({ paymentId: p.paymentId, error }) };
      const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers(), handlerOptions }));
      try {
        const outputs = await readTopic(kafka, `${prefix}processed`, { until: quietAfter(20, 1500), pollIdleMs: 250, timeoutMs: 60000 });
        await waitUntil(async () => strays.length >= 20, 20000, 'every raw statement settled');
        expect(outputs).toHaveLength(20);
        const ran = await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM dl_stray WHERE payment_id LIKE 'raw-${kind}-w-%'`);
        expect(ran[0].n).toBe(0);
        expect(strays.map((s) => errorText(s.error)).filter((m) => !/lent to is over/.test(m))).toEqual([]);
      } finally {
        await app.close();
      }
    });

    it('takes a COMMIT that PostgreSQL answered with ROLLBACK for what it is: the unit runs again, nothing of it lost or doubled', async () => {
      const prefix = `${uniqueTopic(`dl-${kind}-rollback`)}.`;
      await createTopics(kafka, [`${prefix}payments`, `${prefix}processed`], 1);
      const list = payments(`${kind}-r`, 12, 2);
      await publish(kafka, `${prefix}payments`, list);
      const failed = new Set<string>();
      const handlerOptions: HandlerOptions = {
        // Once, for one payment of the middle of the partition.
        failBeforeCommit: (p) => p.paymentId === list[5].paymentId && !failed.has(p.paymentId) && failed.add(p.paymentId) !== undefined,
      };
      const app = await startLibraryModule(fixture.appModule({ kind, pool, prefix, brokers: kafkaBrokers(), handlerOptions }));
      try {
        const outputs = await readTopic(kafka, `${prefix}processed`, { until: quietAfter(12, 2000), pollIdleMs: 250, timeoutMs: 60000 });
        expect(failed.size).toBe(1);
        expect(outputs.map((o) => JSON.parse(o.value!.toString()).paymentId).sort()).toEqual(list.map((p) => p.paymentId).sort());
        const ledger = await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM dl_ledger WHERE payment_id LIKE '${kind}-r-%'`);
        expect(ledger[0].n).toBe(12);
        const inbox = await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE topic = $1`, [`${prefix}payments`]);
        expect(inbox[0].n).toBe(12);
        expect(await balances(databaseUrl, `${kind}-r`)).toEqual(fold(list));
      } finally {
        await app.close();
      }
    });
  }
});

/** An error and what it wraps, as text (Prisma and Drizzle wrap what the connection threw). */
function errorText(error: unknown): string {
  const parts: string[] = [];
  for (let e = error as { message?: unknown; cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++) parts.push(String(e.message ?? e));
  return parts.join(' <- ');
}

/** The data layer's own client outside the library, for Outbox.add: a transaction, and the client outside one. */
function ormClient(kind: string, pool: Pool): { transaction(work: (tx: { handle: object; insert(id: string): Promise<unknown> }) => Promise<void>): Promise<void>; outside: object; close(): Promise<void> } {
  const insert = (run: (sql: string, params: unknown[]) => Promise<unknown>) => (id: string) => run(`INSERT INTO dl_ledger (payment_id, account_id, amount_cents, status) VALUES ($1, 'acc-o', 1, 'ACCEPTED')`, [id]);
  if (kind === 'prisma') {
    /* eslint-disable @typescript-eslint/no-require-imports */
    const { PrismaClient } = require('./fixtures/prisma/generated');
    const { PrismaPg } = require('@prisma/adapter-pg');
    const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
    return {
      transaction: (work) => prisma.$transaction((tx: any) => work({ handle: tx, insert: insert((sql, params) => tx.$executeRawUnsafe(sql, ...params)) })),
      outside: prisma,
      close: () => prisma.$disconnect(),
    };
  }
  if (kind === 'drizzle') {
    const { drizzle } = require('drizzle-orm/node-postgres');
    const { sql } = require('drizzle-orm');
    const db = drizzle(pool);
    return {
      transaction: (work) => db.transaction((tx: any) => work({ handle: tx, insert: (id) => tx.execute(sql`INSERT INTO dl_ledger (payment_id, account_id, amount_cents, status) VALUES (${id}, 'acc-o', 1, 'ACCEPTED')`) })),
      outside: db,
      close: async () => undefined,
    };
  }
  const { Kysely, PostgresDialect, sql } = require('kysely');
  const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
  return {
    transaction: (work) => db.transaction().execute((trx: any) => work({ handle: trx, insert: (id) => sql`INSERT INTO dl_ledger (payment_id, account_id, amount_cents, status) VALUES (${id}, 'acc-o', 1, 'ACCEPTED')`.execute(trx) })),
    outside: db,
    close: async () => undefined,
  };
}

/**
 * `@nestjs-cls/transactional` with its Prisma and Drizzle adapters: a service written for `TransactionHost` (its
 * writes through `txHost.tx`) called from a handler writes in the unit of work's transaction, as with TypeORM: the
 * library lends the handler's `ctx.db` to the TransactionHost and checks in every unit that the join took.
 */
describe.each(['prisma', 'drizzle'] as const)('library: a %s TransactionHost service called from a handler', (kind) => {
  const suite = dataLayerSuite(`dl-cls-${kind}`, kind);
  let kafka: Kafka;
  let databaseUrl: string;
  let pool: Pool;

  beforeAll(() => {
    ({ kafka, databaseUrl, pool } = suite);
  });

  it("writes in the unit's transaction: committed once with it, rolled back with a record that fails", async () => {
    /* eslint-disable @typescript-eslint/no-require-imports */
    const { Injectable, Module } = require('@nestjs/common');
    const { ClsModule } = require('nestjs-cls');
    const { ClsPluginTransactional, TransactionHost } = require('@nestjs-cls/transactional');
    const { IdempotentHandler, KafkaExactlyOnceModule } = require('kafka-exactly-once');
    const layer = (require('./fixtures/data-layer-app.js') as { dataLayer(kind: string, pool: Pool): { database: unknown } }).dataLayer(kind, pool);
    const CLIENT = Symbol('client');
    let client: any;
    let adapter: unknown;
    if (kind === 'prisma') {
      const { PrismaClient } = require('./fixtures/prisma/generated');
      const { PrismaPg } = require('@prisma/adapter-pg');
      const { TransactionalAdapterPrisma } = require('@nestjs-cls/transactional-adapter-prisma');
      client = new PrismaClient({ adapter: new PrismaPg(pool) });
      adapter = new TransactionalAdapterPrisma({ prismaInjectionToken: CLIENT });
    } else {
      const { drizzle } = require('drizzle-orm/node-postgres');
      const { TransactionalAdapterDrizzleOrm } = require('@nestjs-cls/transactional-adapter-drizzle-orm');
      client = drizzle(pool);
      adapter = new TransactionalAdapterDrizzleOrm({ drizzleInstanceToken: CLIENT });
    }
    const insert = (tx: any, p: Payment) =>
      kind === 'prisma'
        ? tx.ledgerEntry.create({ data: { paymentId: p.paymentId, accountId: p.accountId, amountCents: BigInt(p.amountCents), status: 'ACCEPTED' } })
        : tx.execute(require('drizzle-orm').sql`INSERT INTO dl_ledger (payment_id, account_id, amount_cents, status) VALUES (${p.paymentId}, ${p.accountId}, ${p.amountCents}, 'ACCEPTED')`);

    class LedgerService {
      constructor(readonly txHost: { tx: unknown }) {}
      record(p: Payment) {
        return insert(this.txHost.tx, p);
      }
    }
    Reflect.decorate([Injectable(), Reflect.metadata('design:paramtypes', [TransactionHost])], LedgerService);
    const list = payments(`${kind}-cls`, 5, 1);
    const failing = list[3].paymentId;
    class Handler {
      constructor(readonly ledger: LedgerService) {}
      async onPayment(p: Payment) {
        await this.ledger.record(p);
        if (p.paymentId === failing) throw new Error('failing after the service wrote, on purpose');
      }
    }
    Reflect.decorate([IdempotentHandler({ topic: 'payments', format: 'json', retry: { attempts: 1 } })], Handler.prototype, 'onPayment', Object.getOwnPropertyDescriptor(Handler.prototype, 'onPayment')!);
    Reflect.decorate([Injectable(), Reflect.metadata('design:paramtypes', [LedgerService])], Handler);
    const prefix = `${uniqueTopic(`dl-cls-${kind}`)}.`;
    await createTopics(kafka, [`${prefix}payments`], 1);
    await publish(kafka, `${prefix}payments`, list);
    class ClientModule {}
    Reflect.decorate([Module({ providers: [{ provide: CLIENT, useValue: client }], exports: [CLIENT] })], ClientModule);
    class App {}
    Reflect.decorate(
      [
        Module({
          imports: [
            ClsModule.forRoot({ global: true, plugins: [new ClsPluginTransactional({ imports: [ClientModule], adapter })] }),
            KafkaExactlyOnceModule.forRoot({ kafka: { clientId: `dl-cls-${kind}`, brokers: kafkaBrokers() }, groupId: `${prefix}group`, transactionalIdPrefix: `${prefix}app`, topicPrefix: prefix, database: layer.database }),
          ],
          providers: [LedgerService, Handler],
        }),
      ],
      App,
    );
    const app = await startLibraryModule(App as never);
    try {
      await readTopic(kafka, `${prefix}payments.dlq`, { until: (r) => r.length >= 1, timeoutMs: 60000 });
      await waitUntil(async () => (await queryDatabase<{ n: number }>(databaseUrl, `SELECT count(*)::int AS n FROM dl_ledger WHERE payment_id LIKE '${kind}-cls-%'`))[0].n >= 4, 30000, 'four rows');
      const rows = await queryDatabase<{ payment_id: string }>(databaseUrl, `SELECT payment_id FROM dl_ledger WHERE payment_id LIKE '${kind}-cls-%' ORDER BY payment_id`);
      expect(rows.map((r) => r.payment_id)).toEqual(list.filter((p) => p.paymentId !== failing).map((p) => p.paymentId));
    } finally {
      await app.close();
      if (kind === 'prisma') await client.$disconnect();
    }
  });
});
