import { spawnSync } from 'child_process';
import { join } from 'path';
import { Client } from 'pg';
import { REPO_ROOT, adminDatabaseUrl, kafkaBrokers, withDatabase } from '../support/environment';

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost']);

function probe(broker: string): { ok: boolean; detail: string } {
  const result = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts/kafka/probe.js'), broker, '3000'], { encoding: 'utf8' });
  return { ok: result.status === 0, detail: (result.stdout || result.stderr).trim() };
}

async function ensureKafka(): Promise<void> {
  const brokers = kafkaBrokers();
  const first = brokers[0];
  if (probe(first).ok) return;
  const [host, port] = first.split(':');
  if (brokers.length > 1 || !LOCAL_HOSTS.has(host)) {
    throw new Error(`Kafka does not answer at KAFKA_BROKERS=${brokers.join(',')}; start it, or unset KAFKA_BROKERS to use the local broker`);
  }
  process.stdout.write(`\nNo Kafka answers on ${first}: starting the local broker (scripts/kafka/kafka.sh start)\n`);
  const started = spawnSync('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), 'start'], {
    stdio: 'inherit',
    env: { ...process.env, KAFKA_PORT: port ?? '9092' },
  });
  if (started.status !== 0) {
    throw new Error('The local Kafka broker could not be started: see the kafka: line above');
  }
  (globalThis as Record<string, unknown>).__KEO_STARTED_KAFKA__ = port ?? '9092';
}

async function createRunDatabase(): Promise<void> {
  const admin = new Client({ connectionString: adminDatabaseUrl(), connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (err) {
    const safeUrl = adminDatabaseUrl().replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
    throw new Error(
      `PostgreSQL is not reachable at DATABASE_URL=${safeUrl} (${(err as Error).message}). ` +
        'Start PostgreSQL, or set DATABASE_URL to a server where this user may create databases.',
    );
  }
  const name = `keo_test_${Date.now().toString(36)}_${process.pid}`;
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  process.env.TEST_DATABASE_URL = withDatabase(adminDatabaseUrl(), name);
  (globalThis as Record<string, unknown>).__KEO_TEST_DATABASE__ = name;
}

/** The suites run the built apps as child processes (crash tests need real processes): build them first. */
function buildApps(): void {
  if (process.env.KEO_SKIP_BUILD === '1') return;
  process.stdout.write('\nBuilding the library and the apps for the integration suites (npm run build)\n');
  const built = spawnSync('npm', ['run', '-s', 'build'], { cwd: REPO_ROOT, stdio: 'inherit' });
  if (built.status !== 0) throw new Error('npm run build failed: the integration suites need the built apps');
}

export default async function globalSetup(globalConfig?: { maxWorkers?: number }): Promise<void> {
  // The topics of this run's earlier suites are deleted before each suite (test/setup/earlier-topics.ts): only
  // those stamped since this run began, and only when the suites run one at a time (--runInBand).
  process.env.KEO_RUN_STARTED = String(Date.now());
  process.env.KEO_RUN_SERIAL = globalConfig?.maxWorkers === 1 ? '1' : '0';
  await createRunDatabase();
  await ensureKafka();
  buildApps();
}
