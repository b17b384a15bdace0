import { Logger } from '@nestjs/common';
import type { SessionSource } from '../database/database.port';
import type { MigrationInterface } from 'typeorm';
import { MIGRATIONS_TABLE } from '../kafka-exactly-once.constants';
import { KAFKA_EXACTLY_ONCE_MIGRATIONS } from './migrations';

/** Arbitrary constant: the advisory lock that serialises instances applying the library's migrations. */
const MIGRATION_LOCK = 7_364_211_904;

/**
 * A migration that commits its work page by page when it runs outside a transaction, so that a long one
 * interrupted (a crash, a deploy) keeps its progress and the next boot finishes it.
 */
function commitsInPages(migration: MigrationInterface): boolean {
  return (migration as { commitsInPages?: boolean }).commitsInPages === true;
}

/**
 * Applies the library's migrations that have not run yet, under an advisory lock, so that several instances
 * booting at once do not race. Tracks them in their own table, apart from the application's TypeORM migrations
 * table. The migrations run in one transaction, except one that commits page by page (re-keying a whole inbox):
 * that one runs after the transaction of those before it commits, and is recorded once it has finished.
 */
export async function runInboxMigrations(dataSource: SessionSource, logger = new Logger('KafkaExactlyOnceMigrations')): Promise<void> {
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.connect();
  let locked = false;
  try {
    // The session's lock, not a transaction's: it must outlast the transactions of a migration that commits
    // page by page. Instances of earlier versions take the same lock per transaction, and wait for it all the same.
    await queryRunner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    locked = true;
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (name text PRIMARY KEY, run_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set<string>((await queryRunner.query(`SELECT name FROM ${MIGRATIONS_TABLE}`)).map((r: { name: string }) => r.name));
    for (const Migration of KAFKA_EXACTLY_ONCE_MIGRATIONS) {
      const migration = new Migration();
      if (done.has(migration.name)) continue;
      if (commitsInPages(migration)) {
        if (queryRunner.isTransactionActive) await queryRunner.commitTransaction();
      } else if (!queryRunner.isTransactionActive) {
        await queryRunner.startTransaction();
      }
      // The library's migrations use a session's statements and transaction only (a TypeORM QueryRunner's subset).
      await migration.up(queryRunner as never);
      await queryRunner.query(`INSERT INTO ${MIGRATIONS_TABLE} (name) VALUES ($1)`, [migration.name]);
      logger.log(`applied ${migration.name}`);
    }
    if (queryRunner.isTransactionActive) await queryRunner.commitTransaction();
  } catch (err) {
    if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction().catch(() => undefined);
    throw err;
  } finally {
    // An unlock that fails has lost its session, and the session's locks with it.
    if (locked) await queryRunner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await queryRunner.release();
  }
}
