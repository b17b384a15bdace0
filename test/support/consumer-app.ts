import { execFile } from 'child_process';
import { join } from 'path';
import { createSuiteDatabase } from './database';
import { kafkaBrokers, REPO_ROOT, testDatabaseUrl } from './environment';
import { AppProcess, ProcessGroup } from './processes';
import { uniqueTopic } from './kafka';

export const CONSUMER_APP_MAIN = 'dist/apps/consumer-app/apps/consumer-app/src/main.js';

/** Everything one suite's consumer-app instances share: database, topic prefix, group. */
export interface ConsumerAppScope {
  label: string;
  databaseUrl: string;
  topicPrefix: string;
  groupId: string;
  topic(name: string): string;
}

/** A fresh database (dropped with the run) and fresh topic names and group for one suite. */
export async function createConsumerAppScope(label: string): Promise<ConsumerAppScope> {
  const topicPrefix = `${uniqueTopic(label)}.`;
  return {
    label,
    databaseUrl: await createSuiteDatabase(label),
    topicPrefix,
    groupId: `consumer-app.${topicPrefix}`,
    topic: (name: string) => `${topicPrefix}${name}`,
  };
}

let instance = 0;

/** Logs of one test run go to .test-logs/<run>/, so that no run reads another's. */
function runId(): string {
  return new URL(testDatabaseUrl()).pathname.slice(1);
}

/**
 * Starts consumer-app in a child process (added to `group` at once, so afterAll stops it even if start-up
 * fails) and waits until it consumes (its group assignment is logged). Sessions time out after 6 s, so that a
 * killed member's partitions move on quickly.
 */
export async function startConsumerApp(
  group: ProcessGroup,
  scope: ConsumerAppScope,
  env: Record<string, string> = {},
  options: { waitForAssignment?: boolean } = {},
): Promise<AppProcess> {
  instance += 1;
  const app = group.add(new AppProcess(
    `consumer-app#${instance}`,
    CONSUMER_APP_MAIN,
    {
      DATABASE_URL: scope.databaseUrl,
      KAFKA_TOPIC_PREFIX: scope.topicPrefix,
      KAFKA_GROUP_ID: scope.groupId,
      HTTP_PORT: '0',
      KAFKA_SESSION_TIMEOUT_MS: '6000',
      ...env,
    },
    join(REPO_ROOT, '.test-logs', runId(), scope.label, `consumer-app-${instance}.log`),
  ));
  // Both: the assignment may be logged before or after the HTTP server listens, and tests read the port.
  await app.waitForLog(/listening on http:\/\/127\.0\.0\.1:\d+/);
  if (options.waitForAssignment !== false) await app.waitForLog(/assigned .*payments\.requested\[/);
  return app;
}

/** The HTTP port a started consumer-app listens on (from its log). */
export function consumerAppPort(app: AppProcess): number {
  const port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(app.logs())?.[1];
  if (!port) throw new Error(`${app.name} has not logged its port yet`);
  return Number(port);
}

export const KAFKA_EO_CLI = 'dist/libs/kafka-exactly-once/cli/kafka-eo.js';

/**
 * Runs the built kafka-eo CLI as operators do, on the scope's database, broker and group (no admin token of the
 * test's own environment: `env` gives one); resolves its exit code and output.
 */
export function runKafkaEoCli(scope: ConsumerAppScope, args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const { ADMIN_TOKEN: _token, ADMIN_READ_ONLY_TOKEN: _readOnly, ...inherited } = process.env;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [KAFKA_EO_CLI, ...args],
      { cwd: REPO_ROOT, env: { ...inherited, DATABASE_URL: scope.databaseUrl, KAFKA_BROKERS: kafkaBrokers().join(','), KAFKA_EO_GROUP: scope.groupId, ...env }, timeout: 120000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
