import type { EntityManager } from 'typeorm';
import type { DemoStore, LedgerRow, PaymentFacts, WelcomeEmailRow } from './demo-store';

/**
 * The demo's statements through TypeORM (DATA_LAYER=typeorm, the default): SQL through the unit's EntityManager
 * (`ctx.db`, the same object as `ctx.manager`), as consumer-app has always run them.
 */
export function typeormStore(manager: EntityManager): DemoStore {
  return {
    paymentFacts: (paymentIds) =>
      manager.query<PaymentFacts[]>(
        `SELECT v.p::uuid::text AS id,
                EXISTS (SELECT 1 FROM ledger_entries l WHERE l.payment_id = v.p::uuid) AS known,
                EXISTS (SELECT 1 FROM payment_approvals a WHERE a.payment_id = v.p::uuid) AS approved
           FROM unnest($1::text[]) WITH ORDINALITY AS v(p, n) ORDER BY v.n`,
        [paymentIds],
      ),

    async lockAccounts(accountIds) {
      // ON CONFLICT DO UPDATE takes the row lock, as SELECT ... FOR UPDATE would, in the order of the array.
      const rows = await manager.query<Array<{ account_id: string; balance_cents: string }>>(
        `INSERT INTO accounts (account_id, balance_cents) SELECT unnest($1::text[]), 0
           ON CONFLICT (account_id) DO UPDATE SET account_id = EXCLUDED.account_id RETURNING account_id, balance_cents`,
        [accountIds],
      );
      return new Map(rows.map((r) => [r.account_id, BigInt(r.balance_cents)]));
    },

    async setBalances(balances) {
      await manager.query(`UPDATE accounts a SET balance_cents = v.b FROM unnest($1::text[], $2::bigint[]) AS v(id, b) WHERE a.account_id = v.id`, [
        [...balances.keys()],
        [...balances.values()].map(String),
      ]);
    },

    async addLedgerEntries(rows: readonly LedgerRow[], processedAt: Date) {
      await manager.query(
        `INSERT INTO ledger_entries (payment_id, account_id, amount_cents, status, balance_after_cents, processed_at)
         SELECT p, a, c, s, b, $6::timestamptz FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[]) AS v(p, a, c, s, b)`,
        [
          rows.map((r) => r.paymentId),
          rows.map((r) => r.accountId),
          rows.map((r) => String(r.amountCents)),
          rows.map((r) => r.status),
          rows.map((r) => String(r.balanceAfterCents)),
          processedAt,
        ],
      );
    },

    async addUser({ userId, email, signedUpAt }) {
      // RETURNING says whether this sign-up inserted the row (an INSERT without it reports nothing either way).
      const inserted: unknown[] = await manager.query(`INSERT INTO users (user_id, email, signed_up_at) VALUES ($1, $2, $3) ON CONFLICT (user_id) DO NOTHING RETURNING user_id`, [
        userId,
        email,
        signedUpAt,
      ]);
      return inserted.length > 0;
    },

    async addWelcomeEmailSent(row: WelcomeEmailRow) {
      await manager.query(`INSERT INTO welcome_emails_sent (user_id, email, message_id, topic, attempt) VALUES ($1, $2, $3, $4, $5)`, [
        row.userId,
        row.email,
        row.messageId,
        row.topic,
        row.attempt,
      ]);
    },
  };
}
