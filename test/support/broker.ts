import { spawn, spawnSync } from 'child_process';
import { readFileSync } from 'fs';
import { join } from 'path';
import { REPO_ROOT, kafkaBrokers } from './environment';

/** kafka.sh's environment: the test's own (KAFKA_STATE_DIR, KAFKA_CONTROLLER_PORT...), with the port of KAFKA_BROKERS. */
function scriptEnv(): NodeJS.ProcessEnv {
  return { ...process.env, KAFKA_PORT: kafkaBrokers()[0].split(':')[1] ?? '9092' };
}

/**
 * Stops and starts the local broker through scripts/kafka/kafka.sh (by its pid file), for outage tests. Only
 * the broker those scripts started can be controlled; anything else fails with a clear message.
 */
export function kafkaControl(command: 'stop' | 'start' | 'kill'): void {
  const status = spawnSync('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), 'status'], { encoding: 'utf8', env: scriptEnv() });
  if (command !== 'start' && status.status !== 0) {
    throw new Error(`outage tests need the broker started by scripts/kafka/kafka.sh (npm run kafka:start); status: ${status.stdout.trim()}`);
  }
  const result = spawnSync('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), command], { encoding: 'utf8', env: scriptEnv() });
  if (result.status !== 0) throw new Error(`kafka.sh ${command} failed: ${result.stdout}${result.stderr}`);
}

/** kafkaControl without blocking the test's event loop, for tests that keep load running meanwhile. */
export async function kafkaControlAsync(command: 'start' | 'kill'): Promise<void> {
  const run = (arg: string) =>
    new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), arg], { env: scriptEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      child.on('close', (code) => resolve({ code, output }));
    });
  if (command !== 'start') {
    const status = await run('status');
    if (status.code !== 0) throw new Error(`outage tests need the broker started by scripts/kafka/kafka.sh (npm run kafka:start); status: ${status.output.trim()}`);
  }
  const result = await run(command);
  if (result.code !== 0) throw new Error(`kafka.sh ${command} failed: ${result.output}`);
}

/**
 * Freezes (SIGSTOP) or thaws (SIGCONT) the broker kafka.sh started, found by its pid file in KAFKA_STATE_DIR:
 * a broker that stalls keeps its connections open and answers late, unlike one that is killed.
 */
export function kafkaFreeze(signal: 'SIGSTOP' | 'SIGCONT'): void {
  const stateDir = process.env.KAFKA_STATE_DIR ?? join(REPO_ROOT, '.kafka');
  const pid = Number(readFileSync(join(stateDir, 'broker.pid'), 'utf8').trim());
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  if (!cmdline.includes(`kafka.Kafka ${stateDir}/`)) throw new Error(`pid ${pid} in ${stateDir}/broker.pid is not the broker kafka.sh started there`);
  process.kill(pid, signal);
  if (signal !== 'SIGSTOP') return;
  // A signal is delivered asynchronously: until every thread of the JVM has stopped, a request sent now could
  // still be answered. Wait (up to 2 s) until the kernel reports the process stopped.
  const stopped = () => /^\d+ \(.*\) T /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  const until = Date.now() + 2000;
  while (!stopped()) {
    if (Date.now() > until) throw new Error(`the broker (pid ${pid}) did not stop on SIGSTOP within 2 s`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
  }
}
