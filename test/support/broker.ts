import { spawnSync } from 'child_process';
import { join } from 'path';
import { REPO_ROOT, kafkaBrokers } from './environment';

/**
 * Stops and starts the local broker through scripts/kafka/kafka.sh (by its pid file), for outage tests. Only
 * the broker those scripts started can be controlled; anything else fails with a clear message.
 */
export function kafkaControl(command: 'stop' | 'start' | 'kill'): void {
  const port = kafkaBrokers()[0].split(':')[1] ?? '9092';
  const status = spawnSync('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), 'status'], { encoding: 'utf8', env: { ...process.env, KAFKA_PORT: port } });
  if (command !== 'start' && status.status !== 0) {
    throw new Error(`outage tests need the broker started by scripts/kafka/kafka.sh (npm run kafka:start); status: ${status.stdout.trim()}`);
  }
  const result = spawnSync('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), command], { encoding: 'utf8', env: { ...process.env, KAFKA_PORT: port } });
  if (result.status !== 0) throw new Error(`kafka.sh ${command} failed: ${result.stdout}${result.stderr}`);
}
