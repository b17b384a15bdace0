import { sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { drizzleDatabase } from 'kafka-exactly-once/drizzle';
import type { Pool, PoolClient } from 'pg';
import type { DemoDataLayer, DemoStore, PaymentFacts } from './demo-store';
import { accounts, ledgerEntries, schema, users, welcomeEmailsSent } from './drizzle.schema';

type Db = NodePgDatabase<typeof schema>;

/**
 * DATA_LAYER=drizzle: the library's `database` is Drizzle over `pool`, and the handlers write through the Drizzle
 * database each unit of work is lent (`ctx.db`), built over the unit's connection.
 */
export function drizzleDataLayer(pool: Pool): DemoDataLayer {
  return {
    kind: 'drizzle',
    // The cast: the client the library gives (the unit's connection) has the part of a pg client Drizzle uses, not
    // all of pg's PoolClient type.
    database: drizzleDatabase({ pool, drizzle: (client) => drizzle(client as unknown as PoolClient, { schema }) }),
    store: (db) => drizzleStore(db as Db),
    close: () => pool.end(),
  };
}

/**
 * The demo's statements through Drizzle's query builder; its `sql` template (parameters bound, the same connection)
 * for the one that needs PostgreSQL's canonical uuid spelling of ids that may not be uuids at all. The balances are
 * written as an upsert of the rows lockAccounts created and locked: one statement, as the other layers' UPDATE.
 */
export function drizzleStore(db: Db): DemoStore {
  return {
    async paymentFacts(paymentIds) {
      const result = await db.execute<Record<keyof PaymentFacts, any>>(sql`
        SELECT v.p::uuid::text AS id,
               EXISTS (SELECT 1 FROM ledger_entries l WHERE l.payment_id = v.p::uuid) AS known,
               EXISTS (SELECT 1 FROM payment_approvals a WHERE a.payment_id = v.p::uuid) AS approved
          FROM unnest(${sql.param(paymentIds)}::text[]) WITH ORDINALITY AS v(p, n) ORDER BY v.n`);
      return result.rows as PaymentFacts[];
    },

    async lockAccounts(accountIds) {
      // ON CONFLICT DO UPDATE takes the row lock, row by row in the order of the values.
      const rows = await db
        .insert(accounts)
        .values(accountIds.map((accountId) => ({ accountId, balanceCents: 0n })))
        .onConflictDoUpdate({ target: accounts.accountId, set: { accountId: sql`excluded.account_id` } })
        .returning({ accountId: accounts.accountId, balanceCents: accounts.balanceCents });
      return new Map(rows.map((r) => [r.accountId, r.balanceCents]));
    },

    async setBalances(balances) {
      await db
        .insert(accounts)
        .values([...balances].map(([accountId, balanceCents]) => ({ accountId, balanceCents })))
        .onConflictDoUpdate({ target: accounts.accountId, set: { balanceCents: sql`excluded.balance_cents` } });
    },

    async addLedgerEntries(rows, processedAt) {
      await db.insert(ledgerEntries).values(rows.map((r) => ({ ...r, processedAt })));
    },

    async addUser({ userId, email, signedUpAt }) {
      const inserted = await db.insert(users).values({ userId, email, signedUpAt }).onConflictDoNothing().returning({ userId: users.userId });
      return inserted.length > 0;
    },

    async addWelcomeEmailSent(row) {
      await db.insert(welcomeEmailsSent).values(row);
    },
  };
}
