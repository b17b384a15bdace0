import { randomBytes } from 'crypto';
import { Client } from 'pg';

export interface TestDatabase {
  /** The connection string of the new database, for `TypeOrmModule.forRoot({ type: 'postgres', url })`. */
  url: string;
  name: string;
  /** Drops the database, closing the connections still open to it (PostgreSQL 13+). */
  drop(): Promise<void>;
}

const DEFAULT_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A fresh PostgreSQL database for one test file or run (`kafka_eo_test_<random>` unless named), created through
 * `serverUrl` [DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres]: the library's migrations create
 * its tables there at start-up, so tests never share an inbox.
 */
export async function createTestDatabase(options: { serverUrl?: string; name?: string } = {}): Promise<TestDatabase> {
  const serverUrl = options.serverUrl ?? process.env.DATABASE_URL ?? DEFAULT_URL;
  const name = options.name ?? `kafka_eo_test_${randomBytes(6).toString('hex')}`;
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new RangeError(`createTestDatabase: name must be a lower-case SQL identifier of at most 63 characters, got ${JSON.stringify(name)}`);
  await withClient(serverUrl, (client) => client.query(`CREATE DATABASE "${name}"`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: () => withClient(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined),
  };
}

async function withClient<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
