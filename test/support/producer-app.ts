import { mkdtempSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { REPO_ROOT, testDatabaseUrl } from './environment';
import { AppProcess, ProcessGroup } from './processes';

export const PRODUCER_APP_MAIN = 'dist/apps/producer-app/apps/producer-app/src/main.js';

let instance = 0;

export interface RunningProducerApp {
  app: AppProcess;
  baseUrl: string;
}

export function newSpoolDirectory(): string {
  return mkdtempSync(join(tmpdir(), 'keo-spool-'));
}

/** Starts producer-app in a child process with its own spool directory and topic prefix; resolves with its URL. */
export async function startProducerApp(group: ProcessGroup, options: { topicPrefix: string; spoolDir: string; label: string; env?: Record<string, string> }): Promise<RunningProducerApp> {
  instance += 1;
  const run = new URL(testDatabaseUrl()).pathname.slice(1);
  const app = group.add(
    new AppProcess(
      `producer-app#${instance}`,
      PRODUCER_APP_MAIN,
      { KAFKA_TOPIC_PREFIX: options.topicPrefix, SPOOL_DIR: options.spoolDir, HTTP_PORT: '0', PUBLISH_TIMEOUT_MS: '1000', ...options.env },
      join(REPO_ROOT, '.test-logs', run, options.label, `producer-app-${instance}.log`),
    ),
  );
  await app.waitForLog(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
  const port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(app.logs())?.[1];
  return { app, baseUrl: `http://127.0.0.1:${port}` };
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

export async function getJson(url: string): Promise<{ status: number; body: any }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.json() };
}
