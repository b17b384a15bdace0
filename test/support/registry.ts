import { spawnSync } from 'child_process';
import { readFileSync } from 'fs';
import { join } from 'path';
import { REPO_ROOT } from './environment';

/** The port of the test registry (scripts/registry/registry.sh), REGISTRY_PORT or its default. */
export function registryPort(): number {
  return Number(process.env.REGISTRY_PORT ?? 28081);
}

/** The Confluent-compatible base URL of the test registry. */
export function registryUrl(): string {
  return `http://127.0.0.1:${registryPort()}/apis/ccompat/v7`;
}

function script(command: string): { status: number | null; output: string } {
  const result = spawnSync('bash', [join(REPO_ROOT, 'scripts/registry/registry.sh'), command], { encoding: 'utf8', env: process.env });
  return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() };
}

/**
 * A real Schema Registry for a suite: scripts/registry/registry.sh starts Apicurio Registry (built once from Maven
 * Central), unless one answers already. `stop` stops it only when this call started it.
 */
export function startTestRegistry(): { url: string; stop: () => void } {
  const answering = script('status').status === 0;
  if (!answering) {
    const started = script('start');
    if (started.status !== 0) throw new Error(`scripts/registry/registry.sh start failed: ${started.output}`);
  }
  return {
    url: registryUrl(),
    stop: () => {
      if (!answering) script('stop');
    },
  };
}

/**
 * Freezes (SIGSTOP) or thaws (SIGCONT) the registry registry.sh started (its pid file): it keeps its connections
 * and its schemas, and answers nothing meanwhile, as a registry that is away does.
 */
export function registryFreeze(signal: 'SIGSTOP' | 'SIGCONT'): void {
  const stateDir = process.env.REGISTRY_STATE_DIR ?? join(REPO_ROOT, '.registry');
  const pid = Number(readFileSync(join(stateDir, 'registry.pid'), 'utf8').trim());
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  if (!cmdline.includes('-runner.jar')) throw new Error(`pid ${pid} in ${stateDir}/registry.pid is not the registry registry.sh started`);
  process.kill(pid, signal);
}

/**
 * An HTTP proxy in front of the test registry, on 127.0.0.1: it forwards every request (counting them by method
 * and path), or, while `away` is set, answers 404 with a page of its own, as a proxy whose upstream is away does.
 * While `slow` is set, the requests whose `METHOD path` it matches are forwarded `slow.ms` late (a registry that
 * answers, slowly).
 */
export async function startRegistryProxy(target = registryUrl()): Promise<{
  url: string;
  requests: Map<string, number>;
  count: (pattern: RegExp) => number;
  away: boolean;
  slow: { pattern: RegExp; ms: number } | undefined;
  close: () => Promise<void>;
}> {
  const { createServer, request } = await import('http');
  const upstream = new URL(target);
  const requests = new Map<string, number>();
  const state: { away: boolean; slow?: { pattern: RegExp; ms: number } } = { away: false };
  const server = createServer(async (req, res) => {
    const path = (req.url ?? '').slice(upstream.pathname.length);
    const key = `${req.method} ${path}`;
    requests.set(key, (requests.get(key) ?? 0) + 1);
    if (state.slow?.pattern.test(key)) await new Promise((resolve) => setTimeout(resolve, state.slow!.ms));
    if (state.away) {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<html><body>404 Not Found</body></html>');
      return;
    }
    const forwarded = request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}${upstream.pathname}`,
    requests,
    count: (pattern) => [...requests.entries()].filter(([key]) => pattern.test(key)).reduce((n, [, c]) => n + c, 0),
    get away() {
      return state.away;
    },
    set away(value: boolean) {
      state.away = value;
    },
    get slow() {
      return state.slow;
    },
    set slow(value: { pattern: RegExp; ms: number } | undefined) {
      state.slow = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
