import { Logger } from '@nestjs/common';
import { adminOf, type ClusterAdmin, ConfigResourceTypes, type KafkaClient } from '../kafkajs';
import { sleep } from '../engine/sleep';
import { withDeadline } from '../engine/deadline';
import { DEFAULT_MAX_MESSAGE_BYTES } from './record-size';

/** What the cluster said about a topic, and when. */
export interface TopicFacts {
  exists: boolean;
  /** The topic's `max.message.bytes` (else the broker's `message.max.bytes`, else Kafka's default). */
  maxMessageBytes: number;
  /** Where `maxMessageBytes` came from, for messages. */
  limitSource: 'topic max.message.bytes' | 'broker message.max.bytes' | 'Kafka default message.max.bytes';
  /** ms since the epoch */
  checkedAt: number;
}

export interface TopicInspectorOptions {
  /** How long one look-up may take before it counts as "Kafka unreachable". */
  lookupTimeoutMs: number;
  /** After a look-up failed, the same topic is not asked about again for this long (no storms in an outage). */
  retryAfterMs?: number;
}

/**
 * Learns from the cluster whether topics exist and how large a record each takes (admin metadata and
 * describeConfigs), caches the answers and looks again when asked for fresher ones. An answer it cannot get
 * (Kafka unreachable, no Describe permission) is `undefined`, never a guess.
 */
export class TopicInspector {
  private readonly logger = new Logger(TopicInspector.name);
  private readonly facts = new Map<string, TopicFacts>();
  private readonly lookups = new Map<string, Promise<TopicFacts | undefined>>();
  private readonly failedAt = new Map<string, number>();

  constructor(
    private readonly kafka: KafkaClient,
    private readonly options: TopicInspectorOptions,
  ) {}

  /** The last answer, however old. */
  cached(topic: string): TopicFacts | undefined {
    return this.facts.get(topic);
  }

  /**
   * An answer at most `maxAgeMs` old: the cached one, else a new look-up. When the look-up fails, the cached
   * answer (older) if any, else undefined.
   */
  async get(topic: string, maxAgeMs: number, now = Date.now()): Promise<TopicFacts | undefined> {
    const cached = this.facts.get(topic);
    if (cached && now - cached.checkedAt <= maxAgeMs) return cached;
    if (now - (this.failedAt.get(topic) ?? 0) < (this.options.retryAfterMs ?? 1000)) return cached;
    let lookup = this.lookups.get(topic);
    if (!lookup) {
      lookup = this.lookup(topic).finally(() => this.lookups.delete(topic));
      this.lookups.set(topic, lookup);
    }
    return (await lookup) ?? cached;
  }

  /** The next `get` looks again (e.g. after a send to the topic failed in a way a missing topic would explain). */
  markStale(topic: string): void {
    const cached = this.facts.get(topic);
    if (cached) this.facts.set(topic, { ...cached, checkedAt: 0 });
  }

  private async lookup(topic: string): Promise<TopicFacts | undefined> {
    const admin = adminOf(this.kafka, { retry: { retries: 0 } });
    try {
      const facts = await withDeadline(this.ask(admin, topic), this.options.lookupTimeoutMs, `a look-up of topic ${topic}`);
      const before = this.facts.get(topic);
      if (before?.exists !== facts.exists || before.maxMessageBytes !== facts.maxMessageBytes) {
        this.logger.log(facts.exists ? `topic ${topic}: records up to ${facts.maxMessageBytes} bytes (${facts.limitSource})` : `topic ${topic} does not exist`);
      }
      this.facts.set(topic, facts);
      this.failedAt.delete(topic);
      return facts;
    } catch (err) {
      this.failedAt.set(topic, Date.now());
      this.logger.debug(`could not look up topic ${topic}: ${(err as Error).message}`);
      return undefined;
    } finally {
      void withDeadline(admin.disconnect(), 5000).catch(() => undefined);
    }
  }

  private async ask(admin: ClusterAdmin, topic: string): Promise<TopicFacts> {
    await admin.connect();
    if (!(await this.exists(admin, topic))) {
      // A metadata answer can lag a topic created a moment ago: believe "missing" only when asked twice.
      await sleep(500);
      if (!(await this.exists(admin, topic))) {
        return { exists: false, maxMessageBytes: 0, limitSource: 'topic max.message.bytes', checkedAt: Date.now() };
      }
    }
    return { exists: true, ...(await this.limit(admin, topic)), checkedAt: Date.now() };
  }

  private async exists(admin: ClusterAdmin, topic: string): Promise<boolean> {
    try {
      const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
      return metadata.topics.some((t) => t.name === topic && t.partitions.length > 0);
    } catch (err) {
      if ((err as { type?: string }).type === 'UNKNOWN_TOPIC_OR_PARTITION') return false;
      throw err;
    }
  }

  private async limit(admin: ClusterAdmin, topic: string): Promise<Pick<TopicFacts, 'maxMessageBytes' | 'limitSource'>> {
    try {
      const described = await admin.describeConfigs({
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['max.message.bytes'] }],
        includeSynonyms: false,
      });
      const value = Number(described.resources[0]?.configEntries.find((e) => e.configName === 'max.message.bytes')?.configValue);
      if (Number.isInteger(value) && value > 0) return { maxMessageBytes: value, limitSource: 'topic max.message.bytes' };
    } catch (err) {
      this.logger.debug(`cannot read max.message.bytes of ${topic} (${(err as Error).message}); trying the broker's message.max.bytes`);
    }
    try {
      const { brokers } = await admin.describeCluster();
      const described = await admin.describeConfigs({
        resources: [{ type: ConfigResourceTypes.BROKER, name: String(brokers[0].nodeId), configNames: ['message.max.bytes'] }],
        includeSynonyms: false,
      });
      const value = Number(described.resources[0]?.configEntries.find((e) => e.configName === 'message.max.bytes')?.configValue);
      if (Number.isInteger(value) && value > 0) return { maxMessageBytes: value, limitSource: 'broker message.max.bytes' };
    } catch (err) {
      this.logger.debug(`cannot read the broker's message.max.bytes (${(err as Error).message}); assuming Kafka's default`);
    }
    return { maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES, limitSource: 'Kafka default message.max.bytes' };
  }
}
