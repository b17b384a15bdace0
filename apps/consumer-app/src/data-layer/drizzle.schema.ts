import { bigint, bigserial, integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';

/**
 * consumer-app's tables as Drizzle sees them (DATA_LAYER=drizzle). The tables are created by the app's TypeORM
 * migrations (src/migrations), the same for every data layer: this schema is never pushed or migrated by drizzle-kit.
 */
export const accounts = pgTable('accounts', {
  accountId: text('account_id').primaryKey(),
  balanceCents: bigint('balance_cents', { mode: 'bigint' }).notNull(),
});

export const ledgerEntries = pgTable('ledger_entries', {
  paymentId: uuid('payment_id').primaryKey(),
  accountId: text('account_id').notNull(),
  amountCents: bigint('amount_cents', { mode: 'bigint' }).notNull(),
  status: text('status').notNull(),
  balanceAfterCents: bigint('balance_after_cents', { mode: 'bigint' }).notNull(),
  processedAt: timestamp('processed_at', { withTimezone: true }).notNull(),
});

export const paymentApprovals = pgTable('payment_approvals', {
  paymentId: uuid('payment_id').primaryKey(),
  approvedBy: text('approved_by').notNull(),
  approvedAt: timestamp('approved_at', { withTimezone: true }).notNull().defaultNow(),
});

export const users = pgTable('users', {
  userId: integer('user_id').primaryKey(),
  email: text('email').notNull(),
  signedUpAt: timestamp('signed_up_at', { withTimezone: true }).notNull(),
});

export const welcomeEmailsSent = pgTable('welcome_emails_sent', {
  id: bigserial('id', { mode: 'bigint' }).primaryKey(),
  userId: integer('user_id').notNull(),
  email: text('email').notNull(),
  messageId: text('message_id').notNull(),
  topic: text('topic').notNull(),
  attempt: integer('attempt').notNull(),
  sentAt: timestamp('sent_at', { withTimezone: true }).notNull().defaultNow(),
});

export const schema = { accounts, ledgerEntries, paymentApprovals, users, welcomeEmailsSent };
