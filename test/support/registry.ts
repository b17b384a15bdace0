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
