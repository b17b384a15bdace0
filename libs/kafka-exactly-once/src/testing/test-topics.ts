import { randomBytes } from 'crypto';
import { logLevel, createKafkaClient } from '../kafkajs';
import { createTopicsAndWait } from '../kafka-topics';

export interface TestTopic {
  topic: string;
  /** [1] */
  numPartitions?: number;
  /** Topic configuration, e.g. `{ 'max.message.bytes': '65536' }`. */
  configs?: Record<string, string>;
}

/** A topic name of its own for one test: `<prefix>.<random>` (Kafka's legal characters only). */
export function uniqueTopicName(prefix = 'test'): string {
  if (!/^[a-zA-Z0-9._-]{1,200}$/.test(prefix)) throw new RangeError(`uniqueTopicName: prefix must be 1 to 200 of [a-zA-Z0-9._-], got ${JSON.stringify(prefix)}`);
  return `${prefix}.${randomBytes(4).toString('hex')}`;
}

/**
 * Creates the topics (replication factor 1, for the single test broker) unless they exist, and waits until each
 * partition has a leader: the library refuses to start while an input or output topic is missing.
 */
export async function createTestTopics(brokers: string[], topics: Array<string | TestTopic>): Promise<void> {
  const admin = createKafkaClient({ clientId: 'kafka-exactly-once-testing', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const wanted = topics.map((t) => (typeof t === 'string' ? { topic: t } : t));
    await createTopicsAndWait(
      admin,
      wanted.map((t) => ({
        topic: t.topic,
        numPartitions: t.numPartitions ?? 1,
        replicationFactor: 1,
        configEntries: Object.entries(t.configs ?? {}).map(([name, value]) => ({ name, value })),
      })),
    );
  } finally {
    await admin.disconnect();
  }
}
