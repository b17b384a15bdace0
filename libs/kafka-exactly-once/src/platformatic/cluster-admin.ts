import type { ConfigEntries, DescribeConfigResponse, FetchOffsetsPartition, GroupDescription, GroupDescriptions, ITopicConfig, ITopicMetadata, ResourceConfigQuery } from 'kafkajs';
import type { KafkaConnectionOptions } from '../client/drivers';
import { KafkaConnectionError, KafkaProtocolError } from '../client/kafka-errors';
import { sleep } from '../engine/sleep';
import type { ClusterAdmin } from '../kafkajs';
import { connectionOptions, platformaticKafka, type PlatformaticKafka } from './load';
import { kafkaError, protocolError } from './producer-parts';

type Client = PlatformaticKafka.Admin;
type Connection = PlatformaticKafka.Connection;
type MetadataAnswer = Awaited<ReturnType<typeof PlatformaticKafka.metadataV12.api.async>>;
type ConfigsAnswer = Awaited<ReturnType<typeof PlatformaticKafka.describeConfigsV4.api.async>>;
type GroupsAnswer = Awaited<ReturnType<typeof PlatformaticKafka.describeGroupsV5.api.async>>;
type CreatedAnswer = Awaited<ReturnType<typeof PlatformaticKafka.createTopicsV7.api.async>>;

/** The retry options the admin takes over the connection's (KafkaJS's `admin({ retry })`). */
export interface ClusterAdminOptions {
  retry?: { retries?: number; initialRetryTime?: number; maxRetryTime?: number };
}

/** Kafka error codes the admin reads by number. */
const TOPIC_ALREADY_EXISTS = 36;
const NOT_CONTROLLER = 41;
/** Coordinator type of a consumer group in FindCoordinator. */
const GROUP = 0;
const BROKER = 4;
const BROKER_LOGGER = 8;
/** ConfigSource of a value nobody set (KafkaJS's `isDefault`). */
const DEFAULT_CONFIG = 5;
/** KafkaJS's CreateTopics timeout, and its wait for the new topics' leaders when none is given. */
const CREATE_TIMEOUT = 5000;
const LEADERS_WAIT = 10000;

/** Answers after which a request is sent again (besides no answer at all), per question, as KafkaJS retries them. */
const LEADER_MOVING = new Set(['LEADER_NOT_AVAILABLE']);
const CONTROLLER_MOVED = new Set(['NOT_CONTROLLER']);
/** Answers that mean "a new topic's partitions are not served yet". */
const NOT_YET_LED = new Set(['LEADER_NOT_AVAILABLE', 'UNKNOWN_TOPIC_OR_PARTITION']);

/**
 * The library's admin questions (ClusterAdmin: the boot's topic checks and provisioning, the health probe, the
 * operator console, waitForCommitted) on @platformatic/kafka, answered in the shapes KafkaJS 2.2.4's Admin gives,
 * so that every caller reads them unchanged. Built on the client's Admin (listTopics, listConsumerGroupOffsets,
 * metadata) and, where its answers lose what the callers read, on its protocol functions over the Admin's own
 * connections: Metadata v12 (a topic's error code; the Admin's metadata turns UNKNOWN_TOPIC_OR_PARTITION into
 * "Unknown topic"), CreateTopics v7 (configs per topic; the Admin's apply one set to all), DescribeConfigs v4 (each
 * resource's error code and message), FindCoordinator v4 and DescribeGroups v5 (the members' metadata and assignment
 * as bytes, which the Admin decodes; and v5, not v6, so that a group on the consumer protocol (KIP-848) or an unknown
 * one is described as KafkaJS sees it: state Dead, no members, no error).
 *
 * A broker's error code is thrown as KafkaProtocolError (`type` UNKNOWN_TOPIC_OR_PARTITION, say), no broker
 * answering as KafkaConnectionError. `retry.retries` bounds every question: 0 fails at the first refused or timed-out
 * connection (the health probe's and the console's). `connect` and `disconnect` may be called again; `disconnect`
 * closes every connection, and the next question (or `connect`) opens new ones.
 *
 * @example
 * const admin = platformaticAdmin({ clientId: 'probe', brokers: ['127.0.0.1:9092'] }, { retry: { retries: 0 } });
 * await admin.connect();
 * const { brokers } = await admin.describeCluster();
 * await admin.disconnect();
 */
export function platformaticAdmin(connection: KafkaConnectionOptions, options: ClusterAdminOptions = {}): ClusterAdmin {
  return new PlatformaticClusterAdmin(connection, options);
}

class PlatformaticClusterAdmin implements ClusterAdmin {
  private readonly options: ReturnType<typeof connectionOptions>;
  private readonly bootstrap: Array<{ host: string; port: number }>;
  private client?: Client;
  /** Set by disconnect, cleared by connect: no connection is opened in between. */
  private disconnected = false;

  constructor(connection: KafkaConnectionOptions, { retry }: ClusterAdminOptions) {
    this.options = connectionOptions({ ...connection, retry: { ...connection.retry, ...retry } });
    // Loaded now: a Node.js the client cannot run on is told at once, not at the first question.
    const { parseBroker } = platformaticKafka();
    this.bootstrap = this.options.bootstrapBrokers.map((b) => parseBroker(b));
  }

  async connect(): Promise<void> {
    this.disconnected = false;
    await this.ask((client) => client.metadata({ topics: [], forceUpdate: true }));
  }

  /** Closes every connection; a question asked after it (one that outlived its caller's deadline) fails until `connect`. */
  async disconnect(): Promise<void> {
    this.disconnected = true;
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => undefined);
  }

  /** Every topic the metadata names, the internal ones too (as KafkaJS's). */
  listTopics(): Promise<string[]> {
    return this.ask((client) => client.listTopics({ includeInternals: true }));
  }

  /**
   * Creates the topics (each with its own configs) at the controller: true when one was created, false when each
   * existed already; any other refusal is thrown. With `waitForLeaders` (the default) it resolves once every
   * partition of the topics has a leader.
   *
   * NOTE: KafkaJS answers false as soon as one of the topics existed, even when others were created (its check is
   * that every error was TOPIC_ALREADY_EXISTS); here "created" is what the broker said of each topic.
   */
  async createTopics({ topics, validateOnly = false, timeout, waitForLeaders = true }: { topics: ITopicConfig[]; validateOnly?: boolean; timeout?: number; waitForLeaders?: boolean }): Promise<boolean> {
    if (!Array.isArray(topics)) throw new Error(`Invalid topics array ${String(topics)}`);
    if (topics.some((t) => typeof t?.topic !== 'string')) throw new Error('Invalid topics array, the topic names have to be a valid string');
    if (new Set(topics.map((t) => t.topic)).size < topics.length) throw new Error('Invalid topics array, it cannot have multiple entries for the same topic');
    const { createTopicsV7 } = platformaticKafka();
    const requests = topics.map((t) => ({
      name: t.topic,
      numPartitions: t.numPartitions ?? -1,
      replicationFactor: t.replicationFactor ?? -1,
      assignments: (t.replicaAssignment ?? []).map((a) => ({ partitionIndex: a.partition, brokerIds: a.replicas })),
      configs: (t.configEntries ?? []).map((e) => ({ name: e.name, value: e.value })),
    }));
    const answer = await this.again('createTopics', CONTROLLER_MOVED, async (client) => {
      const connection = await this.controllerConnection(client);
      let created: CreatedAnswer;
      try {
        created = await createTopicsV7.api.async(connection, requests, timeout ?? CREATE_TIMEOUT, validateOnly);
      } catch (err) {
        // Each topic's error code comes with the answer.
        const carried = (err as { response?: CreatedAnswer }).response;
        if (!carried?.topics) throw err;
        created = carried;
      }
      if (created.topics.some((t) => t.errorCode === NOT_CONTROLLER)) throw protocolError(NOT_CONTROLLER);
      return created;
    });
    const refused = answer.topics.find((t) => t.errorCode !== 0 && t.errorCode !== TOPIC_ALREADY_EXISTS);
    if (refused) throw answerError(refused.errorCode, `topic ${refused.name}`, refused.errorMessage);
    const created = answer.topics.some((t) => t.errorCode === 0);
    if (created && waitForLeaders && !validateOnly) await this.waitForLeaders(topics.map((t) => t.topic), timeout ?? LEADERS_WAIT);
    return created;
  }

  /**
   * The partitions of the topics (of every topic when none is named). A topic the broker does not know is thrown
   * as KafkaJS throws it: UNKNOWN_TOPIC_OR_PARTITION (the callers read that `type` as "missing").
   */
  async fetchTopicMetadata({ topics = [] }: { topics: string[] } = { topics: [] }): Promise<{ topics: ITopicMetadata[] }> {
    for (const topic of topics) if (!topic || typeof topic !== 'string') throw new Error(`Invalid topic ${String(topic)}`);
    const answer = await this.again('metadata', LEADER_MOVING, (client) => this.metadataOf(client, topics));
    return {
      topics: answer.topics.map((t) => ({
        name: t.name as string,
        partitions: t.partitions.map((p) => ({ partitionErrorCode: p.errorCode, partitionId: p.partitionIndex, leader: p.leaderId, replicas: p.replicaNodes, isr: p.isrNodes, offlineReplicas: p.offlineReplicas })),
      })),
    };
  }

  /** The configs asked for: a broker's (or its loggers') from that broker, a topic's from the controller, as KafkaJS asks. */
  async describeConfigs({ resources, includeSynonyms }: { resources: ResourceConfigQuery[]; includeSynonyms: boolean }): Promise<DescribeConfigResponse> {
    if (!Array.isArray(resources) || resources.length === 0) throw new Error('Resources array cannot be empty');
    const invalid = resources.find((r) => !r?.name || typeof r.name !== 'string');
    if (invalid) throw new Error(`Invalid resource name ${String(invalid?.name)}: ${JSON.stringify(invalid)}`);
    const { describeConfigsV4 } = platformaticKafka();
    const byBroker = new Map<number, ResourceConfigQuery[]>();
    for (const resource of resources) {
      const broker = resource.type === BROKER || resource.type === BROKER_LOGGER ? Number(resource.name) : -1;
      byBroker.set(broker, [...(byBroker.get(broker) ?? []), resource]);
    }
    const answers = await this.again('describeConfigs', CONTROLLER_MOVED, async (client) => {
      const metadata = await client.metadata({ topics: [], forceUpdate: true, retries: 0 });
      return Promise.all(
        [...byBroker].map(async ([nodeId, asked]): Promise<ConfigsAnswer> => {
          const node = metadata.brokers.get(nodeId === -1 ? metadata.controllerId : nodeId);
          if (!node && nodeId !== -1) throw new KafkaConnectionError(`broker ${nodeId} is not in the cluster's metadata`);
          const connection = node ? await client.connections.get(node) : await this.anyConnection(client);
          const request = asked.map((r) => ({ resourceType: r.type as number, resourceName: r.name, configurationKeys: r.configNames ?? null }));
          return describeConfigsV4.api.async(connection, request as Parameters<typeof describeConfigsV4.api.async>[1], includeSynonyms ?? false, false);
        }),
      );
    });
    return {
      resources: answers.flatMap((a) =>
        a.results.map((r) => ({
          errorCode: r.errorCode,
          errorMessage: r.errorMessage as string,
          resourceType: r.resourceType as number,
          resourceName: r.resourceName,
          configEntries: r.configs.map(
            (c): ConfigEntries => ({
              configName: c.name,
              configValue: c.value as string,
              readOnly: c.readOnly,
              isDefault: c.configSource === DEFAULT_CONFIG,
              configSource: c.configSource as number,
              isSensitive: c.isSensitive,
              configSynonyms: c.synonyms.map((s) => ({ configName: s.name, configValue: s.value as string, configSource: s.source as number })),
            }),
          ),
        })),
      ),
      // KafkaJS's admin does not pass it on; its type names it.
      throttleTime: 0,
    };
  }

  /** The brokers, the controller (null when none) and the cluster's id. */
  async describeCluster(): Promise<{ brokers: Array<{ nodeId: number; host: string; port: number }>; controller: number | null; clusterId: string }> {
    const metadata = await this.ask((client) => client.metadata({ topics: [], forceUpdate: true }));
    return {
      brokers: [...metadata.brokers].map(([nodeId, { host, port }]) => ({ nodeId, host, port })),
      controller: metadata.controllerId === -1 ? null : metadata.controllerId,
      clusterId: metadata.id,
    };
  }

  /**
   * The groups as their coordinators describe them (DescribeGroups v5), the members' metadata and assignment as
   * the bytes the members sent. A group the coordinator does not know, or one on the consumer protocol, is `Dead`
   * with no members, as KafkaJS reports it.
   */
  async describeGroups(groupIds: string[]): Promise<GroupDescriptions> {
    if (groupIds.length === 0) return { groups: [] };
    const { describeGroupsV5, findCoordinatorV4 } = platformaticKafka();
    return this.again('describeGroups', 'retriable', async (client) => {
      const found = await findCoordinatorV4.api.async(await this.anyConnection(client), GROUP, groupIds);
      const coordinators = new Map<number, { node: { host: string; port: number }; groups: string[] }>();
      for (const c of found.coordinators) {
        if (c.errorCode !== 0) throw answerError(c.errorCode, `coordinator of group ${c.key}`, c.errorMessage);
        const entry = coordinators.get(c.nodeId) ?? { node: { host: c.host, port: c.port }, groups: [] };
        entry.groups.push(c.key);
        coordinators.set(c.nodeId, entry);
      }
      // KafkaJS asks the coordinators in the order of their node ids.
      const asked = [...coordinators].sort(([a], [b]) => a - b);
      const answers: GroupsAnswer[] = await Promise.all(asked.map(async ([, { node, groups }]) => describeGroupsV5.api.async(await client.connections.get(node), groups, false)));
      const groups = answers.flatMap((a) =>
        a.groups.map((g) => ({
          errorCode: g.errorCode,
          groupId: g.groupId,
          state: g.groupState as GroupDescription['state'],
          protocolType: g.protocolType,
          protocol: g.protocolData,
          members: g.members.map((m) => ({ memberId: m.memberId, clientId: m.clientId, clientHost: m.clientHost, memberMetadata: m.memberMetadata, memberAssignment: m.memberAssignment })),
        })),
      );
      return { groups };
    });
  }

  /**
   * The group's committed offsets of every partition of the topics: a string, '-1' for a partition without one,
   * and the commit's metadata or null. A topic the broker does not know is thrown as UNKNOWN_TOPIC_OR_PARTITION.
   * Without topics, those of every partition the group committed (KafkaJS sends an empty list as "all").
   */
  async fetchOffsets({ groupId, topics = [], resolveOffsets }: { groupId: string; topics?: string[]; resolveOffsets?: boolean }): Promise<Array<{ topic: string; partitions: FetchOffsetsPartition[] }>> {
    if (!groupId) throw new Error(`Invalid groupId ${groupId}`);
    if (resolveOffsets) throw new Error('kafka-exactly-once: the "platformatic" driver\'s admin does not resolve offsets (fetchOffsets with resolveOffsets)');
    const asked =
      topics.length === 0
        ? null
        : (await this.fetchTopicMetadata({ topics })).topics.map((t) => ({ name: t.name, partitionIndexes: t.partitions.map((p) => p.partitionId).sort((a, b) => a - b) }));
    const [group] = await this.ask((client) => client.listConsumerGroupOffsets({ groups: [{ groupId, topics: asked }] }));
    return (group?.topics ?? []).map((t) => ({
      topic: t.name,
      partitions: t.partitions.map((p) => ({ partition: p.partitionIndex, offset: p.committedOffset.toString(), metadata: p.metadata || null })),
    }));
  }

  /** The client, made anew after a disconnect (a closed client of @platformatic/kafka does not reopen). */
  private current(): Client {
    if (this.disconnected) throw new KafkaConnectionError('the admin is disconnected');
    if (!this.client) {
      const { Admin } = platformaticKafka();
      this.client = new Admin(this.options);
    }
    return this.client;
  }

  /** One question to the client's Admin, which retries by itself (`retries`); its failure as the library's error. */
  private async ask<T>(work: (client: Client) => Promise<T>): Promise<T> {
    try {
      return await work(this.current());
    } catch (err) {
      throw kafkaError(err);
    }
  }

  /**
   * One question sent with the protocol functions, sent again (up to `retries` times, after the connection's retry
   * delays) when no broker answered or the broker answered one of `again` ('retriable': any error it means to be
   * retried). Anything else is thrown at once.
   */
  private async again<T>(operation: string, again: ReadonlySet<string> | 'retriable', work: (client: Client) => Promise<T>): Promise<T> {
    const retries = Number(this.options.retries ?? 0);
    for (let attempt = 0; ; attempt++) {
      const client = this.current();
      try {
        return await work(client);
      } catch (err) {
        const error = err instanceof KafkaProtocolError || err instanceof KafkaConnectionError ? err : kafkaError(err);
        const retriable = error instanceof KafkaConnectionError || (error instanceof KafkaProtocolError && (again === 'retriable' ? error.retriable : again.has(error.type)));
        if (!retriable || attempt >= retries || client.closed) throw error;
        const delay = this.options.retryDelay;
        await sleep(typeof delay === 'function' ? delay(client, operation, attempt + 1, retries, error) : (delay ?? 1000));
      }
    }
  }

  /** Metadata v12 of the topics (all when none), its first topic's or partition's error thrown, as KafkaJS's parser does. */
  private async metadataOf(client: Client, topics: string[]): Promise<MetadataAnswer> {
    const { metadataV12 } = platformaticKafka();
    const connection = await this.anyConnection(client);
    let answer: MetadataAnswer;
    try {
      answer = await metadataV12.api.async(connection, topics.length > 0 ? topics : null, false, false);
    } catch (err) {
      const carried = (err as { response?: MetadataAnswer }).response;
      if (!carried?.topics) throw err;
      answer = carried;
    }
    const topic = answer.topics.find((t) => t.errorCode !== 0);
    if (topic) throw answerError(topic.errorCode, `topic ${topic.name}`);
    for (const t of answer.topics) {
      const partition = t.partitions.find((p) => p.errorCode !== 0);
      if (partition) throw answerError(partition.errorCode, `${t.name}[${partition.partitionIndex}]`);
    }
    return answer;
  }

  /** Waits until every partition of the topics has a leader; a topic not served yet is asked again every 100 ms. */
  private async waitForLeaders(topics: string[], timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const answer = await this.metadataOf(this.current(), topics);
        if (answer.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leaderId >= 0))) return;
      } catch (err) {
        if (!(err instanceof KafkaProtocolError && NOT_YET_LED.has(err.type))) throw err instanceof KafkaConnectionError ? err : kafkaError(err);
      }
      if (Date.now() >= deadline) throw new KafkaConnectionError(`Timed out while waiting for topic leaders of ${topics.join(', ')} (${timeoutMs} ms)`);
      await sleep(100);
    }
  }

  /** A connection to any broker: the bootstrap list's first that answers, then those the metadata named. */
  private anyConnection(client: Client): Promise<Connection> {
    const known = [...(client.currentMetadata?.brokers.values() ?? [])];
    return client.connections.getFirstAvailable([...this.bootstrap, ...known]);
  }

  /** A connection to the controller the metadata names (any broker when it names none: a KRaft broker forwards). */
  private async controllerConnection(client: Client): Promise<Connection> {
    const metadata = await client.metadata({ topics: [], forceUpdate: true, retries: 0 });
    const controller = metadata.brokers.get(metadata.controllerId);
    return controller ? client.connections.get(controller) : this.anyConnection(client);
  }
}

/** A broker's error code about `subject` as the library's error, with the broker's message when it gave one. */
function answerError(code: number, subject: string, message?: string | null): KafkaProtocolError {
  const known = protocolError(code);
  const text = message || known.message.replace(`${known.type}: `, '');
  return new KafkaProtocolError(known.type, code, known.retriable, `${text} (${subject})`);
}
