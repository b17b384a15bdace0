import type { Message, PartitionMetadata, RetryOptions } from 'kafkajs';
import { ProduceIncompleteError, WrittenRecord } from '../../errors/produce-incomplete.error';
import type { ProduceBroker, ProducerCluster } from '../../client/producer-parts';
import type { EosManager, ProduceAnswer, ProduceArgs } from './kafkajs-internals';

export interface TopicMessages {
  topic: string;
  messages: Message[];
}

/** Where a message was written: its partition, and its offset when the broker said (a duplicate's may be unknown). */
export type Placement = WrittenRecord;

export interface ProduceCallDeps {
  cluster: ProducerCluster;
  eos: EosManager;
  /** The partition of a message, decided once per call. */
  partition(topic: string, partitions: PartitionMetadata[], message: Message): number;
  /** Sends one Produce request and returns every partition's answer (errors included, never thrown). */
  produce(broker: ProduceBroker, args: ProduceArgs): Promise<ProduceAnswer>;
  retry: Required<Pick<RetryOptions, 'retries' | 'initialRetryTime' | 'multiplier' | 'maxRetryTime' | 'factor'>>;
  /** How long the broker may wait for the in-sync replicas (the Produce request's timeout). */
  ackTimeoutMs: number;
  /** True once the producer is disconnecting: no further request is started. */
  stopped(): boolean;
  /** No request is started after this time (ms since the epoch). */
  deadline?: number;
  /** KafkaJS's protocol error for a Kafka error code (it knows which are retriable). */
  protocolError(code: number): Error & { retriable: boolean };
  log(message: string): void;
  sleep(ms: number): Promise<void>;
}

/** Kafka error codes of a Produce answer that are not errors of the batch: the broker had it already. */
const DUPLICATE_SEQUENCE_NUMBER = 46;

/** One partition's records of the call: one record batch, with the same sequence numbers in every request that carries it. */
interface Batch {
  topic: string;
  partition: number;
  messages: Message[];
  /** The timestamp of its records that have none of their own: the same in every request that carries them. */
  timestamp: string;
  /** Assigned when the batch is first sent, never given back: a resend carries the same numbers. */
  firstSequence?: number;
  /** The broker's answer: written at this base offset ('-1': written, offset unknown). */
  baseOffset?: string;
  /** The broker refused the batch for good (not written). */
  refused?: Error;
  /** The batch went out at least once without an answer: it may be written. */
  inDoubt: boolean;
  lastError?: unknown;
}

/**
 * One send of records (the idempotent or transactional producer's), which succeeds only when the broker answered
 * for every partition the records were placed on. KafkaJS 2.2.4's own send path (src/producer/sendMessages.js)
 * does not hold to that, and this replaces it:
 * - Each record's partition is chosen once, and each partition's records are one batch whose sequence numbers
 *   are assigned once. A retry sends again exactly the batches without an answer, with the same sequence
 *   numbers, to their current leaders: the broker writes a batch it never got and answers "duplicate" (with the
 *   offset) for one it has. KafkaJS keeps its answers per broker across the retries of a call, so after a leader
 *   move the partitions that moved to a broker that had answered are never sent, and the call resolves.
 * - Sequence numbers are never rolled back. KafkaJS rolls a partition's sequence back when a request fails
 *   although the request may have been written; the next batch then reuses the numbers and the broker drops it
 *   as a duplicate while answering success. Here a call that ends with a batch in doubt leaves the producer's
 *   sequences in doubt: the producer takes a new producer id or epoch before it sends again (CheckedProducer).
 * - Requests of a round run to the end before the next round (never a second request to a broker whose first
 *   one is still in flight: KafkaJS retries as soon as one broker fails, and sends the others' batches again with
 *   new sequence numbers, both copies written in one transaction).
 * NOTE: upstream https://github.com/tulios/kafkajs/issues/1303 (records lost when a broker is lost) and
 * https://github.com/tulios/kafkajs/pull/1798 (answers kept across retries), neither released.
 */
export class ProduceCall {
  private readonly batches: Batch[] = [];
  private readonly order: Array<{ batch: number; index: number }> = [];
  private placed = false;
  /** An AddPartitionsToTxn given up at the deadline may still be carried out. */
  private transactionInDoubt = false;

  constructor(
    private readonly deps: ProduceCallDeps,
    private readonly topicMessages: TopicMessages[],
  ) {}

  /** Sends until every batch is answered; throws ProduceIncompleteError (with what was written) otherwise. */
  async run(): Promise<Placement[]> {
    const { retry } = this.deps;
    let lastError: unknown;
    let quick = 0;
    for (let attempt = 0; ; attempt++) {
      if (this.deps.stopped()) throw this.incomplete('the producer is disconnecting', lastError);
      if (this.deps.deadline !== undefined && Date.now() >= this.deps.deadline) throw this.incomplete('the send deadline passed', lastError);
      try {
        await this.round();
      } catch (err) {
        lastError = err;
      }
      if (this.placed && this.batches.every((b) => b.baseOffset !== undefined)) return this.placements();
      const refused = this.batches.find((b) => b.refused);
      if (refused) throw this.incomplete(`the broker refused the records for ${refused.topic}[${refused.partition}]`, refused.refused, { topic: refused.topic, partition: refused.partition });
      lastError = this.batches.find((b) => b.baseOffset === undefined && b.lastError)?.lastError ?? lastError;
      // The transaction before this one still ending (its EndTxn answered, its markers not all written): the
      // coordinator answers AddPartitionsToTxn CONCURRENT_TRANSACTIONS for a few milliseconds. A few short waits
      // first, not counted as attempts (a producer on the default retry options waited 300 ms each time).
      const concurrent = quick < 5 && (lastError as { type?: string } | undefined)?.type === 'CONCURRENT_TRANSACTIONS';
      if (concurrent) attempt--;
      else if (attempt >= retry.retries) throw this.incomplete(`no answer for every partition after ${attempt + 1} attempts`, lastError);
      this.deps.log(`send not answered for ${this.unanswered().map((b) => `${b.topic}[${b.partition}]`).join(', ')} (${(lastError as Error)?.message ?? lastError}); sending again`);
      let wait = concurrent ? 10 * 2 ** quick++ : delay(retry, attempt);
      if (this.deps.deadline !== undefined) wait = Math.min(wait, Math.max(0, this.deps.deadline - Date.now()));
      await this.deps.sleep(wait);
      if (!concurrent) await this.withinDeadline(this.deps.cluster.refreshMetadata()).catch((err) => (lastError = err));
    }
  }

  /** Whether a batch went out without an answer: the records may be written, and the sequences are in doubt. */
  get inDoubt(): boolean {
    return this.transactionInDoubt || this.batches.some((b) => b.baseOffset === undefined && b.firstSequence !== undefined);
  }

  private unanswered(): Batch[] {
    return this.batches.filter((b) => b.baseOffset === undefined && !b.refused);
  }

  /** Sends every unanswered batch to its partition's leader, one request per broker, and waits for all of them. */
  private async round(): Promise<void> {
    const { cluster, eos } = this.deps;
    // Reaching the cluster retries inside KafkaJS (a broker restarting: tens of seconds): not past the deadline.
    if (!cluster.isConnected()) await this.withinDeadline(cluster.connect());
    await this.withinDeadline(cluster.addMultipleTargetTopics([...new Set(this.topicMessages.map((t) => t.topic))]));
    await this.withinDeadline(cluster.refreshMetadataIfNecessary());
    if (!this.placed) this.place();
    const pending = this.unanswered();
    // All new partitions join the transaction in one AddPartitionsToTxn request, before any record is sent.
    if (eos.isTransactional()) {
      // Given up, it may still add the partitions on the broker: the transaction is in doubt then (ended by the
      // next epoch, not by an EndTxn this producer might not even send).
      await this.withinDeadline(eos.addPartitionsToTransaction(topicData(pending))).catch((err) => {
        if (err instanceof StepGivenUp) this.transactionInDoubt = true;
        throw err;
      });
    }
    // Reaching the cluster may have taken long (KafkaJS retries inside): no request starts once the producer is
    // disconnecting or the deadline has passed (run() then ends the call).
    if (this.deps.stopped() || (this.deps.deadline !== undefined && Date.now() >= this.deps.deadline)) return;
    const perLeader = new Map<number, Batch[]>();
    for (const batch of pending) {
      const leader = cluster.findTopicPartitionMetadata(batch.topic).find((p) => p.partitionId === batch.partition)?.leader;
      if (leader === undefined || leader === null || leader < 0) {
        batch.lastError = new Error(`${batch.topic}[${batch.partition}] has no leader in the metadata`);
        continue;
      }
      perLeader.set(leader, [...(perLeader.get(leader) ?? []), batch]);
    }
    await Promise.allSettled([...perLeader].map(([nodeId, batches]) => this.sendTo(nodeId, batches)));
  }

  /**
   * `step`, or a rejection once the call's deadline passes (the step runs on: it only reaches the cluster, it sends
   * no record). Produce requests are never given up this way: a round waits for every one it sent.
   */
  private withinDeadline<T>(step: Promise<T>): Promise<T> {
    const deadline = this.deps.deadline;
    if (deadline === undefined) return step;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new StepGivenUp()), Math.max(0, deadline - Date.now()))));
    return Promise.race([step, late]).finally(() => clearTimeout(timer));
  }

  private async sendTo(nodeId: number, batches: Batch[]): Promise<void> {
    const { cluster, eos } = this.deps;
    let broker: ProduceBroker;
    try {
      broker = await cluster.findBroker({ nodeId });
    } catch (err) {
      for (const batch of batches) batch.lastError = err;
      return;
    }
    for (const batch of batches) {
      if (batch.firstSequence !== undefined) continue;
      batch.firstSequence = eos.getSequence(batch.topic, batch.partition);
      eos.updateSequence(batch.topic, batch.partition, batch.messages.length);
    }
    let answer: ProduceAnswer;
    try {
      answer = await this.deps.produce(broker, {
        acks: -1,
        timeout: this.deps.ackTimeoutMs,
        transactionalId: eos.isTransactional() ? eos.getTransactionalId() : undefined,
        producerId: eos.getProducerId(),
        producerEpoch: eos.getProducerEpoch(),
        topicData: topicData(batches).map(({ topic, partitions }) => ({
          topic,
          partitions: partitions.map((b) => ({ partition: b.partition, firstSequence: b.firstSequence as number, messages: b.messages, timestamp: b.timestamp })),
        })),
      });
    } catch (err) {
      for (const batch of batches) {
        batch.inDoubt = true;
        batch.lastError = err;
      }
      const closed = err as { name?: string; host?: string; port?: number };
      if (closed.name === 'KafkaJSConnectionClosedError' && closed.host) cluster.removeBroker({ host: closed.host, port: closed.port as number });
      return;
    }
    for (const batch of batches) {
      const mine = answer.topics.find((t) => t.topicName === batch.topic)?.partitions.find((p) => p.partition === batch.partition);
      if (!mine) {
        batch.inDoubt = true;
        batch.lastError = new Error(`the broker's answer has no result for ${batch.topic}[${batch.partition}]`);
      } else if (mine.errorCode === 0) {
        batch.baseOffset = mine.baseOffset;
      } else if (mine.errorCode === DUPLICATE_SEQUENCE_NUMBER) {
        batch.baseOffset = '-1';
      } else {
        const error = this.deps.protocolError(mine.errorCode);
        if (error.retriable) {
          batch.inDoubt = true;
          batch.lastError = error;
        } else batch.refused = error;
      }
    }
  }

  /** Each record's partition, once: a retry never moves a record (nor re-cuts a batch whose numbers are assigned). */
  private place(): void {
    const { cluster } = this.deps;
    const index = new Map<string, Map<number, number>>();
    const stamp = String(Date.now());
    for (const { topic, messages } of this.topicMessages) {
      const partitions = cluster.findTopicPartitionMetadata(topic);
      if (partitions.length === 0) throw Object.assign(new Error(`no metadata for topic ${topic}`), { name: 'KafkaJSMetadataNotLoaded' });
      let ofTopic = index.get(topic);
      if (ofTopic === undefined) index.set(topic, (ofTopic = new Map()));
      for (const message of messages) {
        const partition = this.deps.partition(topic, partitions, message);
        let at = ofTopic.get(partition);
        if (at === undefined) {
          // A record without a timestamp of its own gets the batch's: the same in every request that carries it.
          at = this.batches.push({ topic, partition, messages: [], timestamp: stamp, inDoubt: false }) - 1;
          ofTopic.set(partition, at);
        }
        const batch = this.batches[at];
        this.order.push({ batch: at, index: batch.messages.length });
        batch.messages.push(message);
      }
    }
    this.placed = true;
  }

  private placements(): Placement[] {
    return this.order.map((_, i) => this.placementOf(i) as Placement);
  }

  /** The i-th message's placement, once its batch is answered. */
  private placementOf(i: number): Placement | undefined {
    const { batch, index } = this.order[i];
    const b = this.batches[batch];
    if (b.baseOffset === undefined) return undefined;
    const base = BigInt(b.baseOffset);
    return { topic: b.topic, partition: b.partition, offset: base < 0n ? undefined : (base + BigInt(index)).toString() };
  }

  private incomplete(why: string, cause: unknown, refused?: { topic: string; partition: number }): ProduceIncompleteError {
    const written = this.batches.filter((b) => b.baseOffset !== undefined);
    const outcome = this.batches.some((b) => b.baseOffset === undefined && b.inDoubt) ? 'unknown' : written.length > 0 ? 'partly-written' : 'not-written';
    const missing = this.batches.filter((b) => b.baseOffset === undefined).map((b) => `${b.topic}[${b.partition}]`);
    const placements = this.order.map((_, i) => this.placementOf(i));
    return new ProduceIncompleteError(
      `send incomplete: ${why}; ${missing.length} of ${this.batches.length || '?'} partitions without an answer${missing.length ? ` (${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''})` : ''}${cause ? `: ${(cause as Error)?.message ?? cause}` : ''}`,
      { outcome, written: placements, cause, refused },
    );
  }
}

/** A step of a round (reaching the cluster) given up at the call's deadline; it may still complete later. */
class StepGivenUp extends Error {
  constructor() {
    super('the send deadline passed while reaching the cluster');
    this.name = 'StepGivenUp';
  }
}

/** The batches as Produce and AddPartitionsToTxn want them: per topic. */
function topicData(batches: Batch[]): Array<{ topic: string; partitions: Batch[] }> {
  const topics = new Map<string, Batch[]>();
  for (const batch of batches) topics.set(batch.topic, [...(topics.get(batch.topic) ?? []), batch]);
  return [...topics].map(([topic, partitions]) => ({ topic, partitions }));
}

/** KafkaJS's retry delays: initialRetryTime × multiplier^attempt, randomised by ±factor, capped at maxRetryTime. */
export function delay(retry: ProduceCallDeps['retry'], attempt: number, random = Math.random): number {
  const base = Math.min(retry.maxRetryTime, retry.initialRetryTime * retry.multiplier ** attempt);
  return Math.round(Math.min(retry.maxRetryTime, base * (1 - retry.factor + random() * 2 * retry.factor)));
}
