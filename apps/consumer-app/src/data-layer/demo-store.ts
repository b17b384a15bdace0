import type { DatabasePort } from 'kafka-exactly-once';
import type { DataLayerKind } from '../consumer-app.config';
import type { PaymentStatus } from '../payments/ledger-entry.entity';

/** What the database knows of a payment (one row per payment id asked for, in that order). */
export interface PaymentFacts {
  /** The payment id in PostgreSQL's canonical uuid form, so that two spellings of one id are one payment. */
  id: string;
  /** Already in the ledger: republished under another message id. */
  known: boolean;
  approved: boolean;
}

/** A row of `ledger_entries`. */
export interface LedgerRow {
  /** Canonical uuid (PaymentFacts.id). */
  paymentId: string;
  accountId: string;
  amountCents: bigint;
  status: PaymentStatus;
  balanceAfterCents: bigint;
}

/** A row of `welcome_emails_sent`. */
export interface WelcomeEmailRow {
  userId: number;
  email: string;
  messageId: string;
  topic: string;
  attempt: number;
}

/**
 * The demo's reads and writes, over a handler's `ctx.db` (the unit of work's transaction), one implementation per
 * data layer (DATA_LAYER): the handlers' logic (PaymentsLedger's rule, the users' and emails' handlers) is the
 * same whatever the layer, and so are the tables, the outcomes and the events. Each method is one statement (one
 * round trip), set-based for a batch of payments.
 */
export interface DemoStore {
  /**
   * Each payment's canonical id, whether the ledger has it, whether it is approved, in the order given. A payment
   * id that is not a uuid fails the statement (and so the batch; alone, it fails its own payment).
   */
  paymentFacts(paymentIds: readonly string[]): Promise<PaymentFacts[]>;
  /**
   * Creates the accounts that are new and locks every account given, in the order given (the caller sorts them,
   * so that two partitions sharing accounts cannot deadlock), returning their balances.
   */
  lockAccounts(accountIds: readonly string[]): Promise<Map<string, bigint>>;
  /** Sets the balances of accounts locked by lockAccounts (a balance out of bigint's range fails here). */
  setBalances(balances: ReadonlyMap<string, bigint>): Promise<void>;
  /** Inserts the ledger rows of a batch, all processed at `processedAt`. */
  addLedgerEntries(rows: readonly LedgerRow[], processedAt: Date): Promise<void>;
  /** Inserts a user unless its id is taken; true when this call inserted it. */
  addUser(user: { userId: number; email: string; signedUpAt: Date }): Promise<boolean>;
  addWelcomeEmailSent(row: WelcomeEmailRow): Promise<void>;
}

/** consumer-app's data layer: the library's `database` option, and the demo's statements over a handler's `ctx.db`. */
export interface DemoDataLayer {
  readonly kind: DataLayerKind;
  /**
   * The module's `database` option: `prismaDatabase(...)`, `drizzleDatabase(...)`, `kyselyDatabase(...)` over a pool
   * of DATABASE_URL. Undefined for TypeORM: the library's default, TypeOrmModule's DataSource.
   */
  readonly database?: DatabasePort;
  /** The demo's statements over a handler's `ctx.db` (BatchContext.db, EventContext.db). */
  store(db: unknown): DemoStore;
  /** Ends the pool of the layer (at application shutdown, after the consumer has stopped). */
  close(): Promise<void>;
}

/** Injection token of the application's DemoDataLayer. */
export const DATA_LAYER = Symbol('consumer-app:data-layer');
