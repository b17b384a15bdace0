import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { MIGRATIONS_TABLE } from '../kafka-exactly-once.constants';
import { KAFKA_EXACTLY_ONCE_MIGRATIONS } from './migrations';

/** Arbitrary constant: the advisory lock that serialises instances applying the library's migrations. */
const MIGRATION_LOCK = 7_364_211_904;

/**
 * Applies the library's migrations that have not run yet, in one transaction under an advisory lock, so that
 * several instances booting at once do not race. Tracks them in their own table, apart from the application's
 * TypeORM migrations table.
 */
export async function runInboxMigrations(dataSource: DataSource, logger = new Logger('KafkaExactlyOnceMigrations')): Promise<void> {
  const queryRunner = dataSource.createQueryRunner();
  await queryRunner.connect();
  try {
    await queryRunner.startTransaction();
    await queryRunner.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await queryRunner.query(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (name text PRIMARY KEY, run_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set<string>((await queryRunner.query(`SELECT name FROM ${MIGRATIONS_TABLE}`)).map((r: { name: string }) => r.name));
    for (const Migration of KAFKA_EXACTLY_ONCE_MIGRATIONS) {
      const migration = new Migration();
      if (done.has(migration.name)) continue;
      await migration.up(queryRunner);
      await queryRunner.query(`INSERT INTO ${MIGRATIONS_TABLE} (name) VALUES ($1)`, [migration.name]);
      logger.log(`applied ${migration.name}`);
    }
    await queryRunner.commitTransaction();
  } catch (err) {
    if (queryRunner.isTransactionActive) await queryRunner.rollbackTransaction().catch(() => undefined);
    throw err;
  } finally {
    await queryRunner.release();
  }
}
