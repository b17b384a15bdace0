import type { QueryRunner } from 'typeorm';
import { withDeadline } from './deadline';

interface PgClient {
  query(sql: string): Promise<unknown>;
  /** 'I' idle, 'T' in a transaction, 'E' in a failed transaction (pg >= 8.12). */
  getTransactionStatus?(): string | null;
}

/**
 * Gives a unit of work's connection back to the pool only outside a transaction: after any failure it is
 * rolled back first, and a connection that cannot be brought back to idle is destroyed instead of reused (a
 * pooled connection inside a failed transaction would make the next user's queries fail with "current
 * transaction is aborted").
 */
export async function releaseClean(runner: QueryRunner): Promise<void> {
  const client = (runner as unknown as { databaseConnection?: PgClient }).databaseConnection;
  let broken: Error | undefined;
  try {
    if (client && client.getTransactionStatus?.() !== 'I') await withDeadline(client.query('ROLLBACK'), 5000, 'ROLLBACK');
    const status = client?.getTransactionStatus?.();
    if (client && status !== 'I' && status !== null && status !== undefined) broken = new Error(`connection left in transaction state ${status}`);
  } catch (err) {
    broken = err as Error;
  }
  const release = (runner as unknown as { releasePostgresConnection?: (err?: Error) => Promise<void> }).releasePostgresConnection;
  if (release) await release.call(runner, broken).catch(() => undefined);
  else await runner.release().catch(() => undefined);
}
