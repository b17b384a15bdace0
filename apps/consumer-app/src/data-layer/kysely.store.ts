import { kyselyDatabase } from 'kafka-exactly-once/kysely';
import { type ColumnType, type Generated, Kysely, PostgresDialect, type PostgresPool, sql } from 'kysely';
import type { Pool } from 'pg';
import type { DemoDataLayer, DemoStore, PaymentFacts } from './demo-store';

/** An int8 column: node-postgres reads it as a string; written from a bigint's text. */
type Int8 = ColumnType<string, string, string>;

/**
 * consumer-app's tables as Kysely sees them (DATA_LAYER=kysely). The tables are created by the app's TypeORM
 * migrations (src/migrations), the same for every data layer.
 */
export interface DemoDatabase {
  accounts: { account_id: string; balance_cents: Int8 };
  ledger_entries: { payment_id: string; account_id: string; amount_cents: Int8; status: string; balance_after_cents: Int8; processed_at: Date };
  payment_approvals: { payment_id: string; approved_by: string; approved_at: Generated<Date> };
  users: { user_id: number; email: string; signed_up_at: Date };
  welcome_emails_sent: { id: Generated<string>; user_id: number; email: string; message_id: string; topic: string; attempt: number; sent_at: Generated<Date> };
}

/**
 * DATA_LAYER=kysely: the library's `database` is Kysely over `pool`, and the handlers write through the Kysely
 * instance each unit of work is lent (`ctx.db`), whose pool's one connection is the unit's.
 */
export function kyselyDataLayer(pool: Pool): DemoDataLayer {
  return {
    kind: 'kysely',
    // The cast: the pool the library gives (its one connection the unit's) is typed more narrowly than Kysely's PostgresPool.
    database: kyselyDatabase({ pool, kysely: (unitPool) => new Kysely<DemoDatabase>({ dialect: new PostgresDialect({ pool: unitPool as unknown as PostgresPool }) }) }),
    store: (db) => kyselyStore(db as Kysely<DemoDatabase>),
    close: () => pool.end(),
  };
}

/**
 * The demo's statements through Kysely's query builder; its `sql` template (parameters bound, the same connection)
 * for the one that needs PostgreSQL's canonical uuid spelling of ids that may not be uuids at all. The balances are
 * written as an upsert of the rows lockAccounts created and locked: one statement, as the other layers' UPDATE.
 */
export function kyselyStore(db: Kysely<DemoDatabase>): DemoStore {
  return {
    async paymentFacts(paymentIds) {
      const { rows } = await sql<PaymentFacts>`
        SELECT v.p::uuid::text AS id,
               EXISTS (SELECT 1 FROM ledger_entries l WHERE l.payment_id = v.p::uuid) AS known,
               EXISTS (SELECT 1 FROM payment_approvals a WHERE a.payment_id = v.p::uuid) AS approved
          FROM unnest(${paymentIds}::text[]) WITH ORDINALITY AS v(p, n) ORDER BY v.n`.execute(db);
      return rows;
    },

    async lockAccounts(accountIds) {
      // ON CONFLICT DO UPDATE takes the row lock, row by row in the order of the values.
      const rows = await db
        .insertInto('accounts')
        .values(accountIds.map((account_id) => ({ account_id, balance_cents: '0' })))
        .onConflict((oc) => oc.column('account_id').doUpdateSet((eb) => ({ account_id: eb.ref('excluded.account_id') })))
        .returning(['account_id', 'balance_cents'])
        .execute();
      return new Map(rows.map((r) => [r.account_id, BigInt(r.balance_cents)]));
    },

    async setBalances(balances) {
      await db
        .insertInto('accounts')
        .values([...balances].map(([account_id, balance]) => ({ account_id, balance_cents: String(balance) })))
        .onConflict((oc) => oc.column('account_id').doUpdateSet((eb) => ({ balance_cents: eb.ref('excluded.balance_cents') })))
        .execute();
    },

    async addLedgerEntries(rows, processedAt) {
      await db
        .insertInto('ledger_entries')
        .values(
          rows.map((r) => ({
            payment_id: r.paymentId,
            account_id: r.accountId,
            amount_cents: String(r.amountCents),
            status: r.status,
            balance_after_cents: String(r.balanceAfterCents),
            processed_at: processedAt,
          })),
        )
        .execute();
    },

    async addUser({ userId, email, signedUpAt }) {
      const inserted = await db
        .insertInto('users')
        .values({ user_id: userId, email, signed_up_at: signedUpAt })
        .onConflict((oc) => oc.column('user_id').doNothing())
        .returning('user_id')
        .execute();
      return inserted.length > 0;
    },

    async addWelcomeEmailSent(row) {
      await db
        .insertInto('welcome_emails_sent')
        .values({ user_id: row.userId, email: row.email, message_id: row.messageId, topic: row.topic, attempt: row.attempt })
        .execute();
    },
  };
}
