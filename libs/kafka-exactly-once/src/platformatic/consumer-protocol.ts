import { wakeableSleep } from '../engine/sleep';
import { findApiId, platformaticKafka, type PlatformaticKafka } from './load';

/** A member's partitions, by topic name. */
export type Assignment = Map<string, Set<number>>;

/** What the membership tells the consumer it runs for. */
export interface MembershipEvents {
  /**
   * The member's partitions now (`incremental`: those it had and still has were its own throughout). Called after
   * each change, before it is told to the broker: partitions taken away are out of it first.
   */
  assigned(assignment: Assignment, incremental: boolean): void;
  /** Resolves once no unit of work of `revoked` runs (or the rebalance timeout passed): then the broker is told. */
  drained(revoked: Array<{ topic: string; partition: number }>): Promise<void>;
  /** A failure the membership cannot go on from (a broker without KIP-848, a refused group). */
  failed(error: Error): void;
}

/** Answers after which the member joins again from epoch 0 (its partitions lost, already someone else's). */
const REJOIN = ['FENCED_MEMBER_EPOCH', 'UNKNOWN_MEMBER_ID'];
/** Answers that will not change by retrying. */
const FATAL = ['UNSUPPORTED_VERSION', 'UNSUPPORTED_ASSIGNOR', 'INVALID_REQUEST', 'GROUP_MAX_SIZE_REACHED', 'GROUP_AUTHORIZATION_FAILED', 'INCONSISTENT_GROUP_PROTOCOL', 'UNRELEASED_INSTANCE_ID', 'GROUP_ID_NOT_FOUND'];

const key = (topic: string, partition: number) => `${topic}\u0000${partition}`;

/**
 * A member of a consumer group on Kafka 4's protocol (KIP-848), run by the library over the client's protocol
 * function (ConsumerGroupHeartbeat v0) rather than by the client: so that a partition the broker takes away is
 * given up only once its worker has ended its unit of work (the client acknowledges a revocation at once), while
 * every other partition goes on. The broker assigns; each heartbeat carries the partitions the member owns, and the
 * member reconciles: partitions taken away first (out of the assignment, drained, then acknowledged), then the new
 * ones. A fenced or unknown member has lost its partitions (the broker gave them away) and joins again.
 */
export class ConsumerProtocolMember {
  private memberId = '';
  private epoch = 0;
  private owned: Assignment = new Map();
  private running = false;
  private pool?: PlatformaticKafka.ConnectionPool;
  private coordinator?: PlatformaticKafka.Broker;
  private wake?: () => void;
  private loop?: Promise<void>;
  private joined = false;
  /** The broker's latest target assignment (an answer without one leaves it as it was). */
  private target?: Array<{ topicId: string; partitions: number[] }>;
  /** While partitions taken away are drained (see reconcile). */
  private revoking?: Promise<void>;
  /** Moves on when the member joins again: a drain of before then releases nothing. */
  private era = 0;

  constructor(
    private readonly client: PlatformaticKafka.Consumer,
    private readonly connection: { clientId: string } & Pick<PlatformaticKafka.ConnectionOptions, 'tls' | 'sasl' | 'connectTimeout' | 'requestTimeout'>,
    private readonly groupId: string,
    private readonly topics: string[],
    private readonly rebalanceTimeout: number,
    private readonly events: MembershipEvents,
    /** Past this long without an answer, the member takes its partitions as lost. */
    private readonly sessionTimeoutMs = 45000,
  ) {}

  get id(): string {
    return this.memberId;
  }

  /**
   * Whether the coordinator answered lately (within three heartbeat intervals, 5 s at least): a member that cannot
   * reach it may have lost its partitions unheard, and its units must not take them back from a new owner.
   */
  answeredLately(): boolean {
    return Date.now() - this.answeredAt < Math.max(5000, 3 * this.intervalMs);
  }

  private answeredAt = 0;
  private intervalMs = 1000;

  /** Joins; resolves after the first answer (the member's first assignment told to `assigned`). */
  async start(): Promise<void> {
    const { ConnectionPool } = platformaticKafka();
    // ConsumerGroupHeartbeat (API key 68) is there on Kafka 4 (and on 3.x brokers that turned the protocol on).
    const apis = await this.client.listApis();
    if (!apis.some((api) => api.apiKey === 68 && api.minVersion <= 0 && api.maxVersion >= 0)) {
      throw new Error(`consumer group ${this.groupId}: consumer.groupProtocol 'consumer' (Kafka 4's consumer groups, KIP-848) needs a broker that offers ConsumerGroupHeartbeat (Kafka 4.0 or later); this one does not. Use groupProtocol 'classic' with it.`);
    }
    const { clientId, ...options } = this.connection;
    this.pool = new ConnectionPool(clientId, options);
    this.running = true;
    let first!: () => void;
    let failedFirst!: (err: Error) => void;
    const firstAnswer = new Promise<void>((resolve, reject) => ((first = resolve), (failedFirst = reject)));
    this.loop = this.run(first, failedFirst).then(
      // Ended before the first answer (left at once): the start fails rather than waits for good.
      () => failedFirst(new Error(`consumer group ${this.groupId}: the membership ended before it joined`)),
      (err: Error) => {
        failedFirst(err);
        if (this.joined) this.events.failed(err);
      },
    );
    await firstAnswer;
  }

  /** Leaves the group (epoch -1) after the caller drained its partitions. */
  async leave(): Promise<void> {
    // Still a member unless the broker refused it for good (the loop ended by itself then).
    const member = this.running;
    this.running = false;
    this.wake?.();
    await this.loop;
    await this.revoking;
    if (member && this.memberId && this.joined) await this.heartbeat(-1).catch(() => undefined);
    await this.pool?.close().catch(() => undefined);
    this.pool = undefined;
  }

  private async run(first: () => void, failedFirst: (err: Error) => void): Promise<void> {
    let intervalMs = 1000;
    let failures = 0;
    let answered = Date.now();
    while (this.running) {
      let answer: Awaited<ReturnType<typeof this.heartbeat>>;
      try {
        answer = await this.heartbeat(this.epoch);
        failures = 0;
        answered = this.answeredAt = Date.now();
      } catch (err) {
        if (!this.running) return;
        if (FATAL.some((id) => findApiId(err, id))) {
          const error = new Error(`consumer group ${this.groupId}: the broker refused the consumer group protocol (KIP-848; a Kafka 4 broker is needed): ${(err as Error).message}`, { cause: err });
          if (!this.joined) failedFirst(error);
          else this.events.failed(error);
          this.running = false;
          return;
        }
        if (REJOIN.some((id) => findApiId(err, id))) {
          // The broker gave this member's partitions away: they are no longer its own.
          this.lost(findApiId(err, 'UNKNOWN_MEMBER_ID'));
          continue;
        }
        // The coordinator moved or is away: found again at the next try.
        this.coordinator = undefined;
        failures++;
        if (Date.now() - answered > this.sessionTimeoutMs && (this.owned.size > 0 || this.epoch > 0)) {
          // No answer for a session timeout: the broker has given this member's partitions away by now, unheard.
          this.lost();
        }
        await this.sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)));
        continue;
      }
      this.memberId = answer.memberId ?? this.memberId;
      this.epoch = answer.memberEpoch;
      if (answer.heartbeatIntervalMs > 0) intervalMs = this.intervalMs = answer.heartbeatIntervalMs;
      if (answer.assignment) this.target = answer.assignment.topicPartitions;
      let changed = false;
      try {
        changed = await this.reconcile();
      } catch {
        // The metadata to name the assignment's topics did not come: reconciled at the next answer.
        this.coordinator = undefined;
      }
      if (!this.joined) {
        this.joined = true;
        if (!changed) this.events.assigned(new Map(this.owned), false);
        first();
      }
      // A change is told to the broker at once; otherwise at the broker's interval.
      if (!changed) await this.sleep(intervalMs);
    }
  }

  /** This member's partitions are someone else's (fenced, unknown, or unheard for a session timeout): it joins again. */
  private lost(forgotten = true): void {
    if (forgotten) this.memberId = '';
    this.epoch = 0;
    this.target = undefined;
    this.era++;
    this.revoking = undefined;
    if (this.owned.size > 0) {
      this.owned = new Map();
      this.events.assigned(new Map(), false);
    }
  }

  /**
   * The latest target assignment, against what the member owns: partitions taken away first (out of what the
   * consumer fetches at once, released to the broker once their workers are drained, heartbeats going on
   * meanwhile with them still owned), then the new ones. True when the member took new partitions (told at once).
   */
  private async reconcile(): Promise<boolean> {
    if (this.revoking || !this.target) return false;
    const names = await this.topicNames(this.target.map((t) => t.topicId));
    const wanted = new Set<string>();
    for (const { topicId, partitions } of this.target) {
      const topic = names.get(topicId);
      // A topic this member cannot name yet (its metadata not there): taken at a later answer.
      if (topic === undefined) continue;
      for (const partition of partitions) wanted.add(key(topic, partition));
    }
    const revoked: Array<{ topic: string; partition: number }> = [];
    for (const [topic, partitions] of this.owned) for (const partition of partitions) if (!wanted.has(key(topic, partition))) revoked.push({ topic, partition });
    if (revoked.length > 0) {
      const kept: Assignment = new Map();
      for (const [topic, partitions] of this.owned) {
        const left = [...partitions].filter((p) => wanted.has(key(topic, p)));
        if (left.length > 0) kept.set(topic, new Set(left));
      }
      this.events.assigned(new Map([...kept].map(([t, ps]) => [t, new Set(ps)])), true);
      const era = this.era;
      this.revoking = this.events.drained(revoked).then(() => {
        if (era !== this.era) return;
        this.owned = kept;
        this.revoking = undefined;
        // Released: told to the broker now.
        this.wake?.();
      });
      return false;
    }
    let added = false;
    for (const item of wanted) {
      const [topic, p] = item.split('\u0000');
      const partition = Number(p);
      if (this.owned.get(topic)?.has(partition)) continue;
      if (!this.owned.has(topic)) this.owned.set(topic, new Set());
      this.owned.get(topic)!.add(partition);
      added = true;
    }
    if (added) this.events.assigned(new Map([...this.owned].map(([t, ps]) => [t, new Set(ps)])), this.joined);
    return added;
  }

  private async topicNames(ids: string[]): Promise<Map<string, string>> {
    let metadata = await this.client.metadata({ topics: this.topics });
    const names = () => new Map([...metadata.topics].map(([name, t]) => [t.id, name]));
    if (ids.some((id) => !names().has(id))) metadata = await this.client.metadata({ topics: this.topics, forceUpdate: true });
    return names();
  }

  /** Topic ids by name, from the metadata of each heartbeat. */
  private readonly topicIds = new Map<string, string>();

  /** One ConsumerGroupHeartbeat at `epoch` (-1: the leave), carrying the partitions the member owns. */
  private async heartbeat(epoch: number) {
    const { consumerGroupHeartbeatV0 } = platformaticKafka();
    const metadata = await this.client.metadata({ topics: this.topics });
    for (const [name, t] of metadata.topics) this.topicIds.set(name, t.id);
    // A topic deleted while owned has no id any more: its partitions are not claimed.
    const owned = [...this.owned].filter(([topic]) => this.topicIds.has(topic)).map(([topic, partitions]) => ({ topicId: this.topicIds.get(topic)!, partitions: [...partitions].sort((a, b) => a - b) }));
    if (!this.coordinator) {
      // Asked each time it is lost (the client's own answer is cached until its own group requests fail).
      const { findCoordinatorV4 } = platformaticKafka();
      const any = await this.pool!.getFirstAvailable([...metadata.brokers.values()]);
      const found = await findCoordinatorV4.api.async(any, 0, [this.groupId]);
      const coordinator = found.coordinators[0];
      if (!coordinator || coordinator.errorCode !== 0) throw new Error(`no coordinator for group ${this.groupId} yet`);
      this.coordinator = { host: coordinator.host, port: coordinator.port };
    }
    const connection = await this.pool!.get(this.coordinator);
    return consumerGroupHeartbeatV0.api.async(connection, this.groupId, this.memberId, epoch, null, null, this.rebalanceTimeout, epoch < 0 ? null : this.topics, null, null, epoch < 0 ? null : owned);
  }

  /** Waits `ms`, or until `wake` (a change to act on, or the stop). */
  private sleep(ms: number): Promise<void> {
    return wakeableSleep(ms, (wake) => (this.wake = wake));
  }
}
