import type { Admin } from 'kafkajs';
import { createTopicsAndWait, waitForTopicLeaders } from './kafka-topics';

/** An admin whose metadata answers follow a script: what a KRaft broker says just after CreateTopics. */
function scripted(answers: Array<'unknown-topic' | 'no-leader' | 'ready'>) {
  const calls: string[] = [];
  const admin = {
    createTopics: async (args: { waitForLeaders: boolean }) => (calls.push(`create waitForLeaders=${args.waitForLeaders}`), true),
    fetchTopicMetadata: async ({ topics }: { topics: string[] }) => {
      const answer = answers.shift() ?? 'ready';
      calls.push(`metadata ${answer}`);
      if (answer === 'unknown-topic') throw Object.assign(new Error('This server does not host this topic-partition'), { type: 'UNKNOWN_TOPIC_OR_PARTITION', code: 3, retriable: true });
      return { topics: topics.map((name) => ({ name, partitions: [{ partitionId: 0, leader: answer === 'ready' ? 1 : -1, replicas: [1], isr: [1] }] })) };
    },
  } as unknown as Admin;
  return { admin, calls };
}

describe('createTopicsAndWait', () => {
  it('treats "does not host this topic-partition" after a create as not yet, and returns once every partition has a leader', async () => {
    const { admin, calls } = scripted(['unknown-topic', 'unknown-topic', 'no-leader', 'ready']);
    await expect(createTopicsAndWait(admin, [{ topic: 'orders', numPartitions: 1 }])).resolves.toBe(true);
    expect(calls).toEqual(['create waitForLeaders=false', 'metadata unknown-topic', 'metadata unknown-topic', 'metadata no-leader', 'metadata ready']);
  });

  it('gives up after its timeout with the broker\'s own error', async () => {
    const { admin } = scripted(Array(100).fill('unknown-topic'));
    await expect(waitForTopicLeaders(admin, ['orders'], 300)).rejects.toThrow(/does not host this topic-partition/);
  });

  it('names the topics that still have no leader after its timeout', async () => {
    const { admin } = scripted(Array(100).fill('no-leader'));
    await expect(waitForTopicLeaders(admin, ['orders', 'orders.dlq'], 300)).rejects.toThrow('topics orders, orders.dlq have no leader after 300 ms');
  });
});
