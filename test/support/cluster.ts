import { spawn } from 'child_process';
import { join } from 'path';
import { Kafka, logLevel } from 'kafkajs';
import { createTopicsAndWait } from 'kafka-exactly-once';
import { createKafkaClient, type KafkaClient } from 'kafka-exactly-once/kafkajs';
import { REPO_ROOT } from './environment';

/** The nodes of `kafka.sh --nodes 3` (KAFKA_CLUSTER_PORT_BASE moves them, as it moves the script's). */
export function clusterBrokers(): string[] {
  const base = Number(process.env.KAFKA_CLUSTER_PORT_BASE || 9192);
  return [0, 1, 2].map((i) => `127.0.0.1:${base + i}`);
}

/** A client of the three-node cluster, one the library builds (as testKafka's): its read-committed reads leave out aborted records. */
export function clusterKafka(clientId = 'kafka-exactly-once-cluster-tests'): KafkaClient {
  return createKafkaClient({ clientId, brokers: clusterBrokers(), logLevel: logLevel.NOTHING });
}

function clusterScript(...argv: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', [join(REPO_ROOT, 'scripts/kafka/kafka.sh'), '--nodes', '3', ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('close', (code) => resolve({ code, output }));
  });
}

/**
 * The three-node cluster of scripts/kafka (RF 3, min ISR 2), started here when it is not running. Resolves a
 * function that stops it again if (and only if) this call started it: by the pid files kafka.sh keeps.
 */
export async function ensureCluster(): Promise<() => Promise<void>> {
  if ((await clusterScript('status')).code === 0) return async () => undefined;
  const started = await clusterScript('start');
  if (started.code !== 0) throw new Error(`kafka.sh --nodes 3 start failed: ${started.output}`);
  return async () => {
    const stopped = await clusterScript('stop');
    if (stopped.code !== 0) throw new Error(`kafka.sh --nodes 3 stop failed: ${stopped.output}`);
  };
}

/** Creates topics with replication factor 3 (leaders spread over the three nodes). */
export async function createClusterTopics(kafka: Kafka, topics: string[], numPartitions: number): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await createTopicsAndWait(admin, topics.map((topic) => ({ topic, numPartitions, replicationFactor: 3 })));
  } finally {
    await admin.disconnect();
  }
}
