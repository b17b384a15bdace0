import { type FetchBudget, wokenOrAfter } from '../client/fetch-budget';
import { isBusy, runDrains } from '../client/group-drains';

const WAITERS = Symbol('kafka-exactly-once:resume-waiters');
const MAX_WAIT = Symbol('kafka-exactly-once:max-wait');

/**
 * How long the broker may hold a fetch while some partition of the group is busy: a partition resumed meanwhile is
 * fetched only after the fetch in flight returns (one fetch per broker at a time), so it waits at most this long.
 */
export const BUSY_FETCH_WAIT_MS = 10;

type TopicPartitions = Array<{ topic: string; partitions: number[] }>;

interface ConsumerGroupInternals {
  groupId: string;
  maxWaitTime: number;
  /** The fetch-wide limit of its Fetch requests. */
  maxBytes: number;
  [MAX_WAIT]?: number;
  seekOffset: Map<string, unknown>;
  subscriptionState: { assigned(): TopicPartitions; active(): TopicPartitions };
  filterPartitionsByNode(nodeId: number, topicPartitions: TopicPartitions): TopicPartitions;
  fetch(nodeId: number): Promise<unknown[]>;
  memberId: string | null;
  joinAndSync(): Promise<void>;
  leave(): Promise<void>;
  resume(topicPartitions: TopicPartitions): void;
  [WAITERS]?: Set<() => void>;
}

/** KafkaJS 2.2.4's ConsumerGroup (src/consumer/consumerGroup.js), the class CorrectedConsumerGroup extends. */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const KafkaJsConsumerGroup = require('kafkajs/src/consumer/consumerGroup') as new (options: object) => ConsumerGroupInternals;

/**
 * NOTE: the library hands each fetched batch to its partition's worker and pauses the partition while it runs
 * (ExactlyOnceConsumer.onBatch), where KafkaJS 2.2.4 runs batches inside its fetch loop and fetches again only
 * when all of them are done. This subclass of KafkaJS's ConsumerGroup, the group of the consumers the library's
 * client creates (vendor/consumer.cjs), makes three changes that make that work:
 *
 * Before it joins or rejoins the group, and before it leaves it, it waits for the drains registered for its group
 * (registerDrain): the workers end their units of work, so that a rebalance still waits for them as it waits for
 * KafkaJS's own batches (no unit of work of a partition runs on after the partition was given to another member).
 * The leave matters where KafkaJS stops its consumer by itself (a crash, a disconnect): its stop waits for the
 * batches in flight, and the library's batches return at once.
 *
 * A fetch of a broker whose assigned partitions are all paused (every one busy) sleeps `maxWaitTime` (500 ms by
 * default) in KafkaJS, and a partition resumed during that sleep waits for it. Here it waits until a partition is
 * resumed or `maxWaitTime` passes (the runner heartbeats after an empty fetch either way), then returns nothing,
 * so that the runner's next fetch includes the resumed partition. With a seek pending it is KafkaJS's fetch that
 * runs: it carries the seek out first.
 *
 * A fetch that does go to the broker (other partitions are active: a retry tier, a quiet topic) is held there up
 * to `maxWaitTime` when none of them has records, and a partition resumed meanwhile waits for it (one fetch per
 * broker at a time): while some partition of the group that the broker leads is busy (markBusy), the broker
 * holds a fetch at most BUSY_FETCH_WAIT_MS. An idle consumer, or one whose partitions are paused for a backoff or
 * a retry tier's due time, keeps the long poll.
 *
 * With a fetch budget (consumer.maxBytesInFlight, client/fetch-budget.ts), each fetch asks for at most the bytes it
 * grants (KafkaJS's fetch-wide `maxBytes`), and while it grants none, waits for a release or `maxWaitTime` and
 * returns nothing, as when every partition is paused.
 *
 * The application's own KafkaJS consumers run KafkaJS's ConsumerGroup, unchanged.
 */
export class CorrectedConsumerGroup extends KafkaJsConsumerGroup {
  private readonly fetchBudget?: FetchBudget;

  constructor(options: { fetchBudget?: FetchBudget }) {
    super(options);
    this.fetchBudget = options.fetchBudget;
  }

  override async joinAndSync(): Promise<void> {
    await runDrains(this.groupId);
    return super.joinAndSync();
  }

  override async leave(): Promise<void> {
    // Without a member id KafkaJS sends no LeaveGroup (it never joined): there is nothing to wait for either.
    if (this.memberId) await runDrains(this.groupId, this.memberId);
    return super.leave();
  }

  override async fetch(nodeId: number): Promise<unknown[]> {
    const maxWait = (this[MAX_WAIT] ??= this.maxWaitTime);
    let state: { busy: boolean; allPaused: boolean };
    try {
      state = partitionsOf(this, nodeId);
    } catch {
      // Metadata not loaded yet, a leader being elected: KafkaJS's fetch refreshes it and recovers.
      state = { busy: false, allPaused: false };
    }
    this.maxWaitTime = state.busy ? Math.min(BUSY_FETCH_WAIT_MS, maxWait) : maxWait;
    const seek = this.seekOffset.size > 0;
    if (this.fetchBudget && (seek || !state.allPaused)) {
      const room = this.fetchBudget.grant(nodeId);
      if (room === 0) {
        // A seek pending waits too: the next fetch with room carries it out.
        await this.fetchBudget.waitForRoom(maxWait);
        return [];
      }
      // NOTE: read by KafkaJS when it sends the request; fetches to several brokers share it, as maxWaitTime above.
      this.maxBytes = room;
    }
    // A seek is carried out by the fetch.
    if (seek || !state.allPaused) return super.fetch(nodeId);
    await wokenOrAfter((this[WAITERS] ??= new Set()), maxWait);
    return [];
  }

  override resume(topicPartitions: TopicPartitions): void {
    super.resume(topicPartitions);
    for (const wake of [...(this[WAITERS] ?? [])]) wake();
  }
}

/** The methods of KafkaJS's ConsumerGroup that CorrectedConsumerGroup overrides (the boot checks they are there to override). */
export const CONSUMER_GROUP_OVERRIDES = ['fetch', 'resume', 'joinAndSync', 'leave'] as const;

/**
 * Of the group's assigned partitions that the broker `nodeId` leads: whether one is busy (its worker runs), and
 * whether there are some and every one is paused.
 */
function partitionsOf(group: ConsumerGroupInternals, nodeId: number): { busy: boolean; allPaused: boolean } {
  const active = new Map(group.subscriptionState.active().map(({ topic, partitions }) => [topic, new Set(partitions)]));
  let assigned = 0;
  let anyActive = false;
  let anyBusy = false;
  for (const { topic, partitions } of group.filterPartitionsByNode(nodeId, group.subscriptionState.assigned())) {
    for (const partition of partitions) {
      assigned++;
      if (active.get(topic)?.has(partition)) anyActive = true;
      if (isBusy(group.groupId, topic, partition)) anyBusy = true;
    }
  }
  return { busy: anyBusy, allPaused: assigned > 0 && !anyActive };
}
