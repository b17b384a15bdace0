import { Logger } from '@nestjs/common';
import type { Admin } from 'kafkajs';
import type { HandlerDefinition } from '../engine/handler-definition';
import { RetryTopicsError } from '../errors/retry-topics.error';
import { resolveRetryTiers } from './retry-tiers';
import { provisionRetryTopics } from './retry-topics.provisioner';

/** The admin calls the provisioner makes, answered from a table of topics (what a broker would say); a topic created is in it from then on. */
function admin(topics: Record<string, { partitions: number; configs?: Record<string, string> }>, createTopics: (args: unknown) => Promise<boolean>): Admin {
  return {
    fetchTopicMetadata: async ({ topics: names }: { topics: string[] }) => ({
      topics: names.filter((n) => topics[n]).map((name) => ({ name, partitions: Array.from({ length: topics[name].partitions }, (_, i) => ({ partitionId: i, leader: 1, replicas: [1, 2, 3] })) })),
    }),
    describeConfigs: async ({ resources }: { resources: Array<{ name: string }> }) => ({
      resources: resources.map((r) => ({ resourceName: r.name, configEntries: Object.entries(topics[r.name]?.configs ?? {}).map(([configName, configValue]) => ({ configName, configValue })) })),
    }),
    createTopics: async (args: { topics: Array<{ topic: string; numPartitions: number; configEntries: Array<{ name: string; value: string }> }> }) => {
      const answer = await createTopics(args);
      for (const t of args.topics) topics[t.topic] = { partitions: t.numPartitions, configs: Object.fromEntries(t.configEntries.map((c) => [c.name, c.value])) };
      return answer;
    },
  } as unknown as Admin;
}

const handler = { topic: 'orders', retryTopics: resolveRetryTiers('orders', { delays: ['10s', '1h'] }) } as HandlerDefinition;
const logger = new Logger('test');

describe('retry topics at boot', () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('creates the missing tiers like their topic: partitions, replicas, retention (7 days and twice the delay at least), room for the headers, deletion, append time', async () => {
    const created: unknown[] = [];
    const topics = { orders: { partitions: 12, configs: { 'max.message.bytes': '2000000', 'retention.ms': '604800000', 'min.insync.replicas': '2', 'cleanup.policy': 'delete' } } };
    const names = await provisionRetryTopics(admin(topics, async (args) => (created.push(args), true)), [handler], new Set(['orders']), logger);
    expect(names).toEqual(['orders.retry.1', 'orders.retry.2']);
    expect(created).toEqual([
      {
        waitForLeaders: false,
        topics: ['orders.retry.1', 'orders.retry.2'].map((topic) => ({
          topic,
          numPartitions: 12,
          replicationFactor: 3,
          configEntries: [
            { name: 'cleanup.policy', value: 'delete' },
            { name: 'message.timestamp.type', value: 'LogAppendTime' },
            { name: 'max.message.bytes', value: String(2000000 + 65536) },
            { name: 'retention.ms', value: '604800000' },
            { name: 'min.insync.replicas', value: '2' },
          ],
        })),
      },
    ]);
    const long = { ...handler, retryTopics: resolveRetryTiers('orders', { delays: ['5d'] }) } as HandlerDefinition;
    const retentions: string[] = [];
    const capture = async (args: unknown) => {
      for (const t of (args as { topics: Array<{ configEntries: Array<{ name: string; value: string }> }> }).topics) retentions.push(t.configEntries.find((c) => c.name === 'retention.ms')!.value);
      return true;
    };
    await provisionRetryTopics(admin({ orders: { partitions: 1, configs: { 'retention.ms': '3600000' } } }, capture), [long], new Set(['orders']), logger);
    await provisionRetryTopics(admin({ orders: { partitions: 1, configs: { 'retention.ms': '-1' } } }, capture), [long], new Set(['orders']), logger);
    expect(retentions).toEqual([String(10 * 86400000), '-1']);
  });

  it('refuses at boot when it may not create them, with the command that would', async () => {
    const refused = Object.assign(new Error('Topic authorization failed'), { type: 'TOPIC_AUTHORIZATION_FAILED' });
    const attempt = provisionRetryTopics(admin({ orders: { partitions: 6 } }, async () => Promise.reject(refused)), [handler], new Set(['orders', 'orders.retry.1']), logger);
    await expect(attempt).rejects.toThrow(RetryTopicsError);
    await expect(provisionRetryTopics(admin({ orders: { partitions: 6 } }, async () => Promise.reject(refused)), [handler], new Set(['orders', 'orders.retry.1']), logger)).rejects.toThrow(
      /the retry topic\(s\) orders\.retry\.2 do not exist and this application may not create them \(TOPIC_AUTHORIZATION_FAILED\): create them .*kafka-topics\.sh --create --topic orders\.retry\.2 --partitions 6 --replication-factor 3 --config cleanup\.policy=delete/,
    );
  });

  it('passes on any other failure of the creation (a broker away is tried again)', async () => {
    const away = Object.assign(new Error('Connection error: ECONNREFUSED'), { name: 'KafkaJSConnectionError' });
    await expect(provisionRetryTopics(admin({ orders: { partitions: 6 } }, async () => Promise.reject(away)), [handler], new Set(['orders']), logger)).rejects.toBe(away);
  });

  it('refuses tiers that would lose records: compacted, or kept no longer than their delay', async () => {
    const existing = new Set(['orders', 'orders.retry.1', 'orders.retry.2']);
    const compacted = { orders: { partitions: 6 }, 'orders.retry.1': { partitions: 6, configs: { 'cleanup.policy': 'compact,delete' } }, 'orders.retry.2': { partitions: 6 } };
    await expect(provisionRetryTopics(admin(compacted, async () => true), [handler], existing, logger)).rejects.toThrow(/retry topic orders\.retry\.1 is compacted .*Set cleanup\.policy=delete/);
    const short = { orders: { partitions: 6 }, 'orders.retry.1': { partitions: 6 }, 'orders.retry.2': { partitions: 6, configs: { 'retention.ms': '7199999' } } };
    await expect(provisionRetryTopics(admin(short, async () => true), [handler], existing, logger)).rejects.toThrow(
      /retry topic orders\.retry\.2 keeps records for 7199999 ms \(retention\.ms\), less than twice its delay \(3600000 ms\).*to 7200000 at least/,
    );
    const fine = { ...short, 'orders.retry.2': { partitions: 6, configs: { 'retention.ms': '-1' } } };
    await expect(provisionRetryTopics(admin(fine, async () => true), [handler], existing, logger)).resolves.toEqual([]);
  });
});
