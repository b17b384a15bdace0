import { wakeableSleep } from '../engine/sleep';
import { EventEmitter } from 'events';
import type { KafkaMessage } from 'kafkajs';
import type { KafkaConnectionOptions } from '../client/drivers';
import { isBusy, runDrains } from '../client/group-drains';
import type { FetchedBatch, GroupConsumer, GroupConsumerConfig, GroupConsumerEvents, GroupConsumerRun, TopicPartitionsRef } from '../client/group-consumer';
import { type Assignment, ConsumerProtocolMember } from './consumer-protocol';
import { decodeFetchedPartition, type FetchedRecords } from './fetched-records';
import { connectionOptions, type FetchAnswer, findApiId, platformaticKafka, type PlatformaticKafka } from './load';

/** How long a broker may hold a fetch while a partition it leads is busy in its worker (as the KafkaJS driver's group). */
export const BUSY_FETCH_WAIT_MS = 10;

/**
 * The classic group protocol's protocol name, with KafkaJS's round-robin assignment: a group whose members run
 * either driver agrees on it (KafkaJS's members name it so), so that an application can move from one driver to
 * the other one instance at a time.
 */
const PROTOCOLS = [{ name: 'RoundRobinAssigner', version: 1 }];

/** What a partition's fetch state is: where the next fetch starts, from the group's committed offset at assignment. */
interface PartitionState {
  topic: string;
  partition: number;
  /** The next offset to fetch; undefined until read from the group's committed offsets. */
  position?: bigint;
}

/** An error the engine reads as "the group is rebalancing: rejoin" (its `type`, as KafkaJS's heartbeat errors). */
class RebalancingError extends Error {
  readonly type = 'REBALANCE_IN_PROGRESS';
}

const key = (topic: string, partition: number) => `${topic}\u0000${partition}`;

/** `items` by `by(item)`, in their order. */
function groupBy<K, T>(items: T[], by: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const k = by(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

/** The partitions of `states` as listOffsets takes them. */
function partitionsByTopic(states: PartitionState[]): { topics: string[]; partitions: Record<string, number[]> } {
  const partitions = Object.fromEntries([...groupBy(states, (s) => s.topic)].map(([topic, list]) => [topic, list.map((s) => s.partition)]));
  return { topics: Object.keys(partitions), partitions };
}

/**
 * The engine's consumer group on @platformatic/kafka. The client runs the group membership (the classic protocol:
 * JoinGroup, SyncGroup, heartbeats, LeaveGroup); this class runs the fetching, as the engine needs it and the
 * client's message stream does not offer it: each partition paused and resumed on its own (the stream pauses as a
 * whole), a Fetch of the unpaused partitions of each leader, its answer read committed with the aborted
 * transactions taken out by the library's own filter (fetched-records.ts), each partition's records handed to
 * `eachBatch` as a batch, the position moved only by `resolveOffset`. Before the member joins or rejoins the group
 * (the client's protocolsMetadata hook, awaited before each JoinGroup) and before it leaves it, the drains of the
 * group run (group-drains.ts): no unit of work of a partition runs on once the partition may be another member's.
 */
export class PlatformaticGroupConsumer implements GroupConsumer {
  readonly events = {
    GROUP_JOIN: 'consumer.group_join',
    END_BATCH_PROCESS: 'consumer.end_batch_process',
    REBALANCING: 'consumer.rebalancing',
    CRASH: 'consumer.crash',
    STOP: 'consumer.stop',
  } as const;

  private readonly emitter = new EventEmitter();
  private client?: PlatformaticKafka.Consumer;
  private topics: string[] = [];
  private fromBeginning = true;
  private running = false;
  /** Moves on at each rebalance, join and stop: a batch of an earlier generation is stale. */
  private generation = 0;
  private assigned = new Map<string, PartitionState>();
  /** Paused partitions (by key) and paused topics: kept across rebalances, as KafkaJS keeps them. */
  private readonly pausedPartitions = new Set<string>();
  private readonly pausedTopics = new Set<string>();
  private readonly wakers = new Set<() => void>();
  private loop?: Promise<void>;
  /** Between the classic protocol's rebalance and the member's next join. */
  private rejoining = false;
  /** Set by stop(): the group left (a crash stops the fetching only). */
  private stopped = false;
  private run_?: GroupConsumerRun;
  /** The KIP-848 membership (groupProtocol 'consumer'); the classic protocol's is the client's. */
  private member?: ConsumerProtocolMember;

  constructor(
    private readonly connection: KafkaConnectionOptions,
    private readonly config: GroupConsumerConfig,
  ) {}

  on<E extends keyof GroupConsumerEvents>(event: E, listener: (event: { payload: GroupConsumerEvents[E] }) => void): () => void {
    this.emitter.on(event, listener);
    return () => this.emitter.off(event, listener);
  }

  private emit<E extends keyof GroupConsumerEvents>(event: E, payload: GroupConsumerEvents[E]): void {
    this.emitter.emit(event, { payload });
  }

  async connect(): Promise<void> {
    const { Consumer, FetchIsolationLevels } = platformaticKafka();
    const { groupId, sessionTimeout, heartbeatInterval, rebalanceTimeout, maxWaitTimeInMs } = this.config;
    const client = new Consumer({
      ...connectionOptions(this.connection),
      groupId,
      sessionTimeout,
      heartbeatInterval,
      rebalanceTimeout,
      maxWaitTime: maxWaitTimeInMs,
      autocommit: false,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
      autocreateTopics: false,
      protocols: PROTOCOLS,
    });
    this.client = client;
    client.on('consumer:group:join', (payload: PlatformaticKafka.ConsumerGroupJoinPayload) => this.joined(payload));
    client.on('consumer:group:rebalance', () => {
      this.generation++;
      // Nothing is fetched until the member has joined again (its partitions may be another member's by then).
      this.rejoining = true;
      this.emit('consumer.rebalancing', { groupId, memberId: client.memberId ?? '' });
    });
    // The client's own failures (a rejoin that failed for good): the engine starts a new consumer.
    client.on('error', (error: Error) => this.crashed(error));
    await client.metadata({ topics: [] });
  }

  async subscribe(subscription: { topics: string[]; fromBeginning: boolean }): Promise<void> {
    this.topics = [...subscription.topics];
    this.fromBeginning = subscription.fromBeginning;
    this.client!.topics.trackAll(...this.topics);
  }

  async run(config: GroupConsumerRun): Promise<void> {
    const client = this.client!;
    this.run_ = config;
    this.running = true;
    if (this.config.groupProtocol === 'consumer') {
      const { clientId, tls, sasl, connectTimeout, requestTimeout } = connectionOptions(this.connection);
      this.member = new ConsumerProtocolMember(client, { clientId, tls, sasl, connectTimeout, requestTimeout }, this.config.groupId, this.topics, this.config.rebalanceTimeout, {
        assigned: (assignment, incremental) => this.reconciled(assignment, incremental),
        drained: (revoked) => this.drained(revoked),
        failed: (error) => this.crashed(error),
      });
      await this.member.start();
      this.loop = this.fetchLoop().catch((err) => this.crashed(err as Error));
      return;
    }
    await client.joinGroup({
      sessionTimeout: this.config.sessionTimeout,
      rebalanceTimeout: this.config.rebalanceTimeout,
      heartbeatInterval: this.config.heartbeatInterval,
      protocols: PROTOCOLS,
      // Awaited before each JoinGroup, the first and every rejoin: the workers end their units first.
      protocolsMetadata: async () => {
        // Every (re)join, whatever made it (a rebalance, a fenced or forgotten member): nothing is fetched, and the
        // batches handed out are stale, until the member has joined again.
        this.generation++;
        this.rejoining = true;
        this.emit('consumer.rebalancing', { groupId: this.config.groupId, memberId: client.memberId ?? '' });
        await runDrains(this.config.groupId);
        return Buffer.alloc(0);
      },
    });
    this.loop = this.fetchLoop().catch((err) => this.crashed(err as Error));
  }

  pause(topics: TopicPartitionsRef): void {
    for (const { topic, partitions } of topics) {
      if (partitions === undefined) this.pausedTopics.add(topic);
      else for (const p of partitions) this.pausedPartitions.add(key(topic, p));
    }
  }

  resume(topics: TopicPartitionsRef): void {
    for (const { topic, partitions } of topics) {
      if (partitions === undefined) {
        this.pausedTopics.delete(topic);
        for (const k of [...this.pausedPartitions]) if (k.startsWith(`${topic}\u0000`)) this.pausedPartitions.delete(k);
      } else for (const p of partitions) this.pausedPartitions.delete(key(topic, p));
    }
    this.wake();
  }

  /**
   * Stops fetching and leaves the group, once: also after a crash (which stopped the fetching only), so that a
   * member of Kafka 4's protocol stops heartbeating and releases its partitions.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.running = false;
    this.generation++;
    this.wake();
    await this.loop;
    const client = this.client;
    if (this.member) {
      if (this.member.id) await runDrains(this.config.groupId, this.member.id);
      await this.member.leave();
    } else if (client?.memberId) {
      await runDrains(this.config.groupId, client.memberId);
      // Its answer does not matter: a member that does not leave is dropped at its session timeout.
      await new Promise<void>((resolve) => client.leaveGroup(false, () => resolve()));
    }
    this.emit('consumer.stop', null);
  }

  async disconnect(): Promise<void> {
    await this.stop();
    await this.client?.close(true).catch(() => undefined);
    this.client = undefined;
  }

  private crashed(error: Error): void {
    if (!this.running) return;
    this.running = false;
    this.generation++;
    this.wake();
    this.emit('consumer.crash', { error, groupId: this.config.groupId, restart: false });
  }

  private joined(payload: PlatformaticKafka.ConsumerGroupJoinPayload): void {
    this.generation++;
    this.rejoining = false;
    const next = new Map<string, PartitionState>();
    const assignment: Record<string, number[]> = {};
    for (const { topic, partitions } of payload.assignments ?? []) {
      assignment[topic] = [...partitions].sort((a, b) => a - b);
      for (const partition of partitions) next.set(key(topic, partition), { topic, partition });
    }
    // Every partition's position is read again from the group's committed offsets, as after any rebalance.
    this.assigned = next;
    this.emit('consumer.group_join', { memberId: payload.memberId, memberAssignment: assignment });
    this.wake();
  }

  /**
   * A KIP-848 assignment: the partitions kept keep their state (their position, their batches current); those
   * taken away are out at once (their batches stale), the new ones read their committed offsets.
   */
  private reconciled(assignment: Assignment, incremental: boolean): void {
    const next = new Map<string, PartitionState>();
    const byTopic: Record<string, number[]> = {};
    for (const [topic, partitions] of assignment) {
      byTopic[topic] = [...partitions].sort((a, b) => a - b);
      for (const partition of partitions) next.set(key(topic, partition), (incremental && this.assigned.get(key(topic, partition))) || { topic, partition });
    }
    this.assigned = next;
    this.emit('consumer.group_join', { memberId: this.member?.id ?? '', memberAssignment: byTopic, incremental });
    this.wake();
  }

  /** Resolves once no worker of `revoked` runs a unit of work, or after the rebalance timeout. */
  private async drained(revoked: Array<{ topic: string; partition: number }>): Promise<void> {
    const deadline = Date.now() + this.config.rebalanceTimeout;
    while (revoked.some(({ topic, partition }) => isBusy(this.config.groupId, topic, partition)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  }

  private isPaused(state: PartitionState): boolean {
    return this.pausedTopics.has(state.topic) || this.pausedPartitions.has(key(state.topic, state.partition));
  }

  /** Fetches while the consumer runs: each round, one Fetch per leader of the unpaused assigned partitions. */
  private async fetchLoop(): Promise<void> {
    let failures = 0;
    while (this.running) {
      try {
        await this.fetchRound();
        failures = 0;
      } catch (err) {
        // A coordinator loading, a broker restarting: tried again with a backoff; the consumer is started anew
        // (by the engine) only when it lasts.
        if (!this.running) return;
        if (++failures >= 10) throw err;
        this.client?.clearMetadata();
        await this.sleep(Math.min(5000, 100 * 2 ** failures));
      }
    }
  }

  /** One round: positions read where missing, then one Fetch per leader of the unpaused assigned partitions. */
  private async fetchRound(): Promise<void> {
    const generation = this.generation;
    await this.readPositions();
    if (!this.running || generation !== this.generation) return;
    const active = this.rejoining ? [] : [...this.assigned.values()].filter((s) => s.position !== undefined && !this.isPaused(s));
    if (active.length === 0) {
      await this.sleep(this.config.maxWaitTimeInMs);
      return;
    }
    const metadata = await this.client!.metadata({ topics: this.topics });
    const led = active.filter((s) => (metadata.topics.get(s.topic)?.partitions[s.partition]?.leader ?? -1) >= 0);
    const byLeader = groupBy(led, (s) => metadata.topics.get(s.topic)!.partitions[s.partition].leader);
    if (byLeader.size === 0) {
      await this.sleep(Math.min(this.config.maxWaitTimeInMs, 500));
      return;
    }
    // The bytes held across partitions (consumer.maxBytesInFlight): what is left is shared among this round's Fetch
    // requests; none is sent while nothing is left. The round before handed over all it fetched (handOver).
    let maxBytes: number | undefined;
    if (this.config.fetchBudget) {
      const room = this.config.fetchBudget.grant(this);
      if (room === 0) {
        await this.config.fetchBudget.waitForRoom(this.config.maxWaitTimeInMs);
        return;
      }
      maxBytes = Math.max(1, Math.floor(room / byLeader.size));
    }
    await Promise.all([...byLeader].map(([node, states]) => this.fetchFrom(node, states, metadata, generation, maxBytes)));
  }

  /** The committed offsets of the assigned partitions without a position (the earliest, or the latest, where none). */
  private async readPositions(): Promise<void> {
    const missing = [...this.assigned.values()].filter((s) => s.position === undefined);
    if (missing.length === 0) return;
    const client = this.client!;
    const committed = await client.listCommittedOffsets({ topics: [...groupBy(missing, (s) => s.topic)].map(([topic, list]) => ({ topic, partitions: list.map((s) => s.partition) })) });
    const unset: PartitionState[] = [];
    for (const s of missing) {
      const offset = committed.get(s.topic)?.[s.partition];
      if (offset !== undefined && offset >= 0n) s.position = offset;
      else unset.push(s);
    }
    if (unset.length > 0) {
      const offsets = await client.listOffsets({ ...partitionsByTopic(unset), timestamp: this.fromBeginning ? -2n : -1n });
      for (const s of unset) {
        const offset = offsets.get(s.topic)?.[s.partition];
        if (offset !== undefined) s.position = offset;
      }
    }
  }

  private async fetchFrom(node: number, states: PartitionState[], metadata: PlatformaticKafka.ClusterMetadata, generation: number, maxBytes?: number): Promise<void> {
    const { FetchIsolationLevels } = platformaticKafka();
    const byTopic = groupBy(states, (s) => s.topic);
    const busy = states.some((s) => isBusy(this.config.groupId, s.topic, s.partition)) || [...this.assigned.values()].some((s) => this.isPaused(s) && isBusy(this.config.groupId, s.topic, s.partition));
    const topicIds = new Map<string, string>();
    for (const [topic, topicMetadata] of metadata.topics) topicIds.set(topicMetadata.id, topic);
    const requested = new Map(states.map((s) => [key(s.topic, s.partition), s.position!]));
    let response: FetchAnswer;
    try {
      response = await this.client!.fetch({
        node,
        maxWaitTime: busy ? Math.min(BUSY_FETCH_WAIT_MS, this.config.maxWaitTimeInMs) : this.config.maxWaitTimeInMs,
        minBytes: 1,
        ...(maxBytes === undefined ? {} : { maxBytes }),
        isolationLevel: FetchIsolationLevels.READ_COMMITTED,
        topics: [...byTopic].map(([topic, list]) => ({
          topicId: metadata.topics.get(topic)!.id,
          partitions: list.map((s) => ({ partition: s.partition, fetchOffset: s.position!, partitionMaxBytes: this.config.maxBytesPerPartition, currentLeaderEpoch: -1, lastFetchedEpoch: -1 })),
        })),
      });
    } catch (err) {
      if (!this.running) return;
      if (findApiId(err, 'OFFSET_OUT_OF_RANGE')) {
        // A position below the log's start (retention deleted the records) or past its end (the log was truncated):
        // the partition goes on from the nearest end, as a consumer reset to the earliest or latest offset would.
        await this.clampPositions(states).catch(() => undefined);
      } else {
        this.client?.clearMetadata();
      }
      await this.sleep(200);
      return;
    }
    const batches: Array<{ state: PartitionState; records: FetchedRecords; highWatermark: bigint }> = [];
    for (const topicResponse of response.responses) {
      const topic = topicIds.get(topicResponse.topicId) ?? topicResponse.topicId;
      for (const partitionResponse of topicResponse.partitions) {
        const state = this.assigned.get(key(topic, partitionResponse.partitionIndex));
        if (!state || state.position !== requested.get(key(topic, partitionResponse.partitionIndex))) continue;
        if (partitionResponse.errorCode !== 0) continue;
        const records = decodeFetchedPartition(partitionResponse, state.position!);
        if (records.lastOffset < state.position!) continue;
        batches.push({ state, records, highWatermark: partitionResponse.highWatermark });
      }
    }
    await this.handOver(batches, generation);
  }

  /** Moves each position of `states` into its partition's log (between its earliest and its latest offset). */
  private async clampPositions(states: PartitionState[]): Promise<void> {
    const [earliest, latest] = await Promise.all([-2n, -1n].map((timestamp) => this.client!.listOffsets({ ...partitionsByTopic(states), timestamp })));
    for (const s of states) {
      const low = earliest.get(s.topic)?.[s.partition];
      const high = latest.get(s.topic)?.[s.partition];
      if (s.position === undefined || low === undefined || high === undefined) continue;
      if (s.position < low) s.position = low;
      else if (s.position > high) s.position = high;
    }
  }

  /** Hands each partition's records to eachBatch, at most partitionsConsumedConcurrently at once. */
  private async handOver(batches: Array<{ state: PartitionState; records: FetchedRecords; highWatermark: bigint }>, generation: number): Promise<void> {
    const run = this.run_!;
    const queue = [...batches];
    const next = async (): Promise<void> => {
      for (let item = queue.shift(); item; item = queue.shift()) {
        if (!this.running || generation !== this.generation) return;
        const { state, records, highWatermark } = item;
        const { topic, partition } = state;
        if (records.messages.length === 0) {
          // Markers or aborted records only: the position moves past them, nothing is handed over.
          state.position = records.lastOffset + 1n;
          this.emit('consumer.end_batch_process', { topic, partition, batchSize: 0, lastOffset: String(records.lastOffset), highWatermark: String(highWatermark) });
          continue;
        }
        await run.eachBatch(this.batch(state, records, highWatermark, generation));
        this.emit('consumer.end_batch_process', { topic, partition, batchSize: records.messages.length, lastOffset: String(records.lastOffset), highWatermark: String(highWatermark) });
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(run.partitionsConsumedConcurrently, queue.length)) }, next));
  }

  private batch(state: PartitionState, records: FetchedRecords, highWatermark: bigint, generation: number): FetchedBatch {
    const { topic, partition } = state;
    const messages = records.messages as KafkaMessage[];
    const current = () => this.running && generation === this.generation && this.assigned.get(key(topic, partition)) === state;
    return {
      batch: {
        topic,
        partition,
        highWatermark: String(highWatermark),
        messages,
        firstOffset: () => (messages.length > 0 ? messages[0].offset : null),
        lastOffset: () => String(records.lastOffset),
      },
      resolveOffset: (offset: string) => {
        if (current()) state.position = BigInt(offset) + 1n;
      },
      heartbeat: async () => {
        // KIP-848: only this partition's revocation concerns its worker; the classic protocol: any rebalance.
        const rebalancing = this.member ? this.running && (!current() || !this.member.answeredLately()) : this.running && generation !== this.generation;
        if (rebalancing) throw new RebalancingError('the group is rebalancing');
      },
      pause: () => {
        this.pause([{ topic, partitions: [partition] }]);
        return () => this.resume([{ topic, partitions: [partition] }]);
      },
      isRunning: () => this.running,
      isStale: () => !current(),
    };
  }

  /** Waits `ms`, or until woken (a change to act on, or the stop); the fetches of several leaders wait at once. */
  private sleep(ms: number): Promise<void> {
    let own: (() => void) | undefined;
    return wakeableSleep(ms, (wake) => {
      if (wake) this.wakers.add((own = wake));
      else if (own) this.wakers.delete(own);
    });
  }

  /** Ends every wait (see sleep). */
  private wake(): void {
    for (const wake of [...this.wakers]) wake();
  }
}
