import type { ClusterAdmin, ITopicConfig } from './kafkajs';
import { sleep } from './engine/sleep';

/**
 * Creates topics, then waits until each partition has a leader. A topic that exists already is not an error.
 *
 * NOTE: KafkaJS's own `waitForLeaders: true` retries only LEADER_NOT_AVAILABLE, but a KRaft broker answers
 * UNKNOWN_TOPIC_OR_PARTITION ("This server does not host this topic-partition") for a moment after it accepted
 * CreateTopics, while the new topic's metadata reaches it; KafkaJS then fails the whole call although the topics
 * were created. The wait here treats that answer as "not yet".
 */
export async function createTopicsAndWait(admin: ClusterAdmin, topics: ITopicConfig[], timeoutMs = 30000): Promise<boolean> {
  const created = await admin.createTopics({ topics, waitForLeaders: false });
  await waitForTopicLeaders(admin, topics.map((t) => t.topic), timeoutMs);
  return created;
}

/**
 * Waits until every partition of the topics has a leader in the metadata: a topic that was just created may
 * not be served yet, and a consumer or producer using it at once fails.
 */
export async function waitForTopicLeaders(admin: ClusterAdmin, topics: string[], timeoutMs = 30000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const metadata = await admin.fetchTopicMetadata({ topics });
      if (metadata.topics.length === topics.length && metadata.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    if (Date.now() > deadline) throw new Error(`topics ${topics.join(', ')} have no leader after ${timeoutMs} ms`);
    await sleep(200);
  }
}
