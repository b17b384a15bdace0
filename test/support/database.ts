import { randomUUID } from 'crypto';
import { DataSource, DataSourceOptions } from 'typeorm';
import { Client } from 'pg';
import { testDatabaseUrl, withDatabase } from './environment';

/** A schema name no other suite uses, inside the run's fresh database. */
export function uniqueSchema(label: string): string {
  return `${label}_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
}

/**
 * A TypeORM DataSource on the run's database, in a schema of its own that is created first.
 * Test-only entities may be synchronized; the library's own tables come from its migrations.
 */
export async function createTestDataSource(options: {
  schema: string;
  entities?: DataSourceOptions['entities'];
  synchronize?: boolean;
}): Promise<DataSource> {
  const bootstrap = new DataSource({ type: 'postgres', url: testDatabaseUrl() });
  await bootstrap.initialize();
  try {
    await bootstrap.query(`CREATE SCHEMA IF NOT EXISTS "${options.schema}"`);
  } finally {
    await bootstrap.destroy();
  }
  const dataSource = new DataSource({
    type: 'postgres',
    url: testDatabaseUrl(),
    schema: options.schema,
    entities: options.entities ?? [],
    synchronize: options.synchronize ?? false,
  });
  return dataSource.initialize();
}

/** A fresh database for one suite, named after the run's database (the global teardown drops it). */
export async function createSuiteDatabase(label: string): Promise<string> {
  const base = new URL(testDatabaseUrl());
  const database = `${base.pathname.slice(1)}_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomUUID().slice(0, 6)}`.slice(0, 63);
  const admin = new Client({ connectionString: testDatabaseUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${database}`);
  } finally {
    await admin.end();
  }
  return withDatabase(testDatabaseUrl(), database);
}
