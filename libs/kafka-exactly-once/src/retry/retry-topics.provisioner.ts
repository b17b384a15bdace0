import type { Logger } from '@nestjs/common';
import { type ClusterAdmin, ConfigResourceTypes } from '../kafkajs';
import { createTopicsAndWait } from '../kafka-topics';
import type { HandlerDefinition } from '../engine/handler-definition';
import { RetryTopicsError } from '../errors/retry-topics.error';

/** Headroom of a tier's `max.message.bytes` over its topic's: the retry headers and the history of each tier. */
export const RETRY_HEADERS_ROOM = 65536;
const DEFAULT_MAX_MESSAGE_BYTES = 1048588;
/** A tier keeps its records at least this long, and at least twice its delay (a consumer down for a while must not let them expire). */
const MIN_TIER_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** What a tier of this delay must keep its records for, at least: twice the delay. */
export function minimumRetention(delayMs: number): number {
  return 2 * delayMs;
}

const AUTHORIZATION = new Set(['TOPIC_AUTHORIZATION_FAILED', 'CLUSTER_AUTHORIZATION_FAILED', 'POLICY_VIOLATION']);

/** What the broker says of a topic's settings that matter here. */
interface TopicSettings {
  partitions: number;
  replicationFactor: number;
  configs: Map<string, string>;
}

async function settingsOf(admin: ClusterAdmin, topics: string[]): Promise<Map<string, TopicSettings>> {
  const settings = new Map<string, TopicSettings>();
  if (topics.length === 0) return settings;
  const { topics: metadata } = await admin.fetchTopicMetadata({ topics });
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['max.message.bytes', 'retention.ms', 'cleanup.policy', 'min.insync.replicas'] })),
  });
  for (const t of metadata) {
    const configs = new Map<string, string>();
    for (const entry of resources.find((r) => r.resourceName === t.name)?.configEntries ?? []) configs.set(entry.configName, entry.configValue);
    settings.set(t.name, { partitions: t.partitions.length, replicationFactor: t.partitions[0]?.replicas.length ?? 1, configs });
  }
  return settings;
}

/**
 * The retry topics of the handlers: each missing one is created with its topic's partitions, replication factor
 * and `min.insync.replicas`, `max.message.bytes` with room for the retry headers, deletion as its cleanup policy
 * (compaction would drop a waiting record behind a later one of its key), the broker's append time as the
 * records' timestamps (a producer's clock cannot move a due time), and the topic's retention, but at least 7 days
 * and twice the tier's delay. One the application may not create, or one that could lose records (compacted, or
 * kept for less than twice its delay), fails the boot naming it. Resolves the topics created.
 */
export async function provisionRetryTopics(admin: ClusterAdmin, handlers: HandlerDefinition[], existing: ReadonlySet<string>, logger: Logger): Promise<string[]> {
  const tiers = handlers.flatMap((h) => (h.retryTopics?.topics ?? []).map((topic, i) => ({ handler: h, topic, delayMs: h.retryTopics!.delaysMs[i] })));
  if (tiers.length === 0) return [];
  const inputs = await settingsOf(admin, [...new Set(tiers.map((t) => t.handler.topic))]);
  const missing = tiers.filter((t) => !existing.has(t.topic));
  if (missing.length > 0) {
    const create = missing.map(({ handler, topic, delayMs }) => {
      const input = inputs.get(handler.topic)!;
      const retention = Number(input.configs.get('retention.ms') ?? MIN_TIER_RETENTION_MS);
      const configEntries = [
        { name: 'cleanup.policy', value: 'delete' },
        { name: 'message.timestamp.type', value: 'LogAppendTime' },
        { name: 'max.message.bytes', value: String((Number(input.configs.get('max.message.bytes')) || DEFAULT_MAX_MESSAGE_BYTES) + RETRY_HEADERS_ROOM) },
        { name: 'retention.ms', value: String(retention < 0 ? -1 : Math.max(retention, MIN_TIER_RETENTION_MS, minimumRetention(delayMs))) },
        ...(input.configs.has('min.insync.replicas') ? [{ name: 'min.insync.replicas', value: input.configs.get('min.insync.replicas')! }] : []),
      ];
      return { topic, numPartitions: input.partitions, replicationFactor: input.replicationFactor, configEntries };
    });
    try {
      await createTopicsAndWait(admin, create); // their settings are read back below
    } catch (err) {
      const type = (err as { type?: string })?.type ?? (err as { errors?: Array<{ type?: string }> })?.errors?.[0]?.type ?? '';
      if (!AUTHORIZATION.has(type) && !/authoriz/i.test((err as Error)?.message ?? '')) throw err;
      const names = create.map((t) => t.topic);
      throw new RetryTopicsError(
        names,
        `the retry topic(s) ${names.join(', ')} do not exist and this application may not create them (${type || (err as Error).message}): create them with the partitions of the topic they retry, e.g. ${create
          .map((t) => `kafka-topics.sh --create --topic ${t.topic} --partitions ${t.numPartitions} --replication-factor ${t.replicationFactor} --config cleanup.policy=delete`)
          .join('; ')}, or grant this application CREATE on them`,
        { cause: err },
      );
    }
    logger.log(`created retry topic(s) ${create.map((t) => `${t.topic} (${t.numPartitions} partitions)`).join(', ')}`);
  }
  const present = await settingsOf(admin, tiers.map((t) => t.topic));
  for (const { handler, topic, delayMs } of tiers) {
    const tier = present.get(topic);
    if (!tier) continue;
    if ((tier.configs.get('cleanup.policy') ?? 'delete').includes('compact')) {
      throw new RetryTopicsError([topic], `retry topic ${topic} is compacted (cleanup.policy=${tier.configs.get('cleanup.policy')}): a record waiting on it would be dropped behind a later record of its key. Set cleanup.policy=delete on it`);
    }
    const retention = Number(tier.configs.get('retention.ms'));
    if (Number.isFinite(retention) && retention >= 0 && retention < minimumRetention(delayMs)) {
      throw new RetryTopicsError(
        [topic],
        `retry topic ${topic} keeps records for ${retention} ms (retention.ms), less than twice its delay (${delayMs} ms): a record could be deleted before it is due, or soon after while the consumer is down. Raise its retention.ms to ${minimumRetention(delayMs)} at least`,
      );
    }
    const input = inputs.get(handler.topic)!;
    if (tier.partitions < input.partitions) {
      logger.warn(`retry topic ${topic} has ${tier.partitions} partitions, fewer than ${handler.topic} (${input.partitions}): its records are spread over fewer consumers`);
    }
  }
  return missing.map((t) => t.topic);
}
