import { spawnSync } from 'child_process';
import { join } from 'path';
import { Client } from 'pg';
import { REPO_ROOT, adminDatabaseUrl } from '../support/environment';

export default async function globalTeardown(): Promise<void> {
  const state = globalThis as Record<string, unknown>;
  const database = state.__KEO_TEST_DATABASE__ as string | undefined;
  if (database && process.env.KEEP_TEST_DATABASE !== '1') {
    const admin = new Client({ connectionString: adminDatabaseUrl() });
    await admin.connect();
    try {
      // The run's database and the per-suite databases named after it.
      const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname = $1 OR datname LIKE $2`, [database, `${database}\\_%`]);
      for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  }
  const kafkaPort = state.__KEO_STARTED_KAFKA__ as string | undefined;
  if (kafkaPort && process.env.KEEP_KAFKA !== '1') {
    // Stop only the broker this run started (kafka.sh stops it by its pid file).
    spawnSync('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), 'stop'], {
      stdio: 'inherit',
      env: { ...process.env, KAFKA_PORT: kafkaPort },
    });
  }
}
