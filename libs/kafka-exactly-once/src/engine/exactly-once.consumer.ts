import { Logger } from '@nestjs/common';
import type { Admin, Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import type { DataSource } from 'typeorm';
import { InboxRepository } from '../inbox/inbox.repository';
import type { HandlerDefinition } from '../kafka-exactly-once.explorer';
import type { ResolvedOptions } from '../options/resolved-options';
import type { SchemaRegistry } from '../serde/schema-registry';
import { PartitionProducer } from '../transaction/partition-producer';
import type { FaultInjector } from './fault-injector';
import { PartitionSession } from './partition-session';
import { isRebalanceError, pauseWithHeartbeats, sleep } from './sleep';
import { ChunkRecord, messageIdOf, UnitOfWork } from './unit-of-work';

export type ConsumerState = 'idle' | 'starting' | 'rebalancing' | 'running' | 'stopping' | 'stopped' | 'crashed';

export interface ConsumerStatus {
  state: ConsumerState;
  groupId: string;
  assignment: Record<string, number[]>;
  lastError?: string;
}

/**
 * One KafkaJS consumer for all the handlers of a group, running the units of work of each assigned partition
 * in order (DESIGN §2). Offsets are committed only inside Kafka transactions (autoCommit off), and the fetch
 * position advances (resolveOffset) only after a unit of work committed.
 */
export class ExactlyOnceConsumer {
  private readonly logger = new Logger(ExactlyOnceConsumer.name);
  private readonly inbox = new InboxRepository();
  private readonly sessions = new Map<string, PartitionSession>();
  private readonly handlers: Map<string, HandlerDefinition>;
  private consumer?: Consumer;
  private status: ConsumerStatus;

  constructor(
    private readonly kafka: Kafka,
    private readonly admin: Admin,
    private readonly dataSource: DataSource,
    private readonly registry: SchemaRegistry,
    private readonly options: ResolvedOptions,
    private readonly faults: FaultInjector,
    handlers: HandlerDefinition[],
  ) {
    this.handlers = new Map(handlers.map((h) => [h.topic, h]));
    this.status = { state: 'idle', groupId: options.groupId, assignment: {} };
  }

  getStatus(): ConsumerStatus {
    return { ...this.status, assignment: { ...this.status.assignment } };
  }

  async start(): Promise<void> {
    const { consumer: c, groupId } = this.options;
    this.status.state = 'starting';
    const consumer = this.kafka.consumer({
      groupId,
      sessionTimeout: c.sessionTimeout,
      heartbeatInterval: c.heartbeatInterval,
      rebalanceTimeout: c.rebalanceTimeout,
      maxBytesPerPartition: c.maxBytesPerPartition,
      maxWaitTimeInMs: c.maxWaitTimeInMs,
      readUncommitted: false,
      allowAutoTopicCreation: false,
    });
    this.consumer = consumer;
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => this.onAssignment(payload.memberAssignment));
    consumer.on(consumer.events.REBALANCING, () => {
      this.status.state = 'rebalancing';
    });
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      this.status.lastError = payload.error?.message;
      this.status.state = payload.restart ? 'rebalancing' : 'crashed';
      this.logger.error(`consumer of group ${groupId} crashed (${payload.restart ? 'restarting' : 'not restarting'}): ${payload.error?.message}`);
    });
    consumer.on(consumer.events.STOP, () => {
      if (this.status.state !== 'crashed') this.status.state = 'stopped';
    });
    await consumer.connect();
    // A group without committed offsets starts from the earliest record: nothing published before is skipped.
    await consumer.subscribe({ topics: [...this.handlers.keys()], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: c.partitionsConsumedConcurrently,
      eachBatch: (payload) => this.onBatch(payload),
    });
  }

  /** Stops fetching and waits for the units of work in flight to finish (each commits or rolls back). */
  async stop(): Promise<void> {
    if (!this.consumer) return;
    this.status.state = 'stopping';
    await this.consumer.stop();
    this.status.state = 'stopped';
  }

  async disconnect(): Promise<void> {
    await this.consumer?.disconnect().catch((err) => this.logger.warn(`consumer disconnect: ${err.message}`));
    this.consumer = undefined;
    await Promise.all([...this.sessions.values()].map((s) => s.producer.close()));
    this.sessions.clear();
  }

  private onAssignment(assignment: Record<string, number[]>): void {
    this.status.state = 'running';
    this.status.assignment = assignment;
    for (const [key, session] of this.sessions) {
      if (assignment[session.topic]?.includes(session.partition)) {
        session.reassigned();
      } else {
        this.sessions.delete(key);
        void session.producer.close();
      }
    }
    this.logger.log(
      `group ${this.options.groupId}: assigned ${Object.entries(assignment).map(([t, ps]) => `${t}[${ps.join(',')}]`).join(' ') || 'nothing'}`,
    );
  }

  private session(topic: string, partition: number): PartitionSession {
    const key = `${topic}\u0000${partition}`;
    let session = this.sessions.get(key);
    if (!session) {
      const id = `${this.options.transactionalIdPrefix}.${this.options.groupId}.${topic}.${partition}`;
      session = new PartitionSession(topic, partition, new PartitionProducer(this.kafka, id, this.options.transactionTimeoutMs));
      this.sessions.set(key, session);
    }
    return session;
  }

  private async committedOffset(topic: string, partition: number): Promise<bigint> {
    const [result] = await this.admin.fetchOffsets({ groupId: this.options.groupId, topics: [topic] });
    const offset = result?.partitions.find((p) => p.partition === partition)?.offset ?? '-1';
    return BigInt(offset);
  }

  private async onBatch(payload: EachBatchPayload): Promise<void> {
    const { batch, resolveOffset, heartbeat, isRunning, isStale } = payload;
    const { topic, partition } = batch;
    const handler = this.handlers.get(topic);
    if (!handler) return;
    const session = this.session(topic, partition);
    if (session.fenced) {
      // Until this member is assigned the partition again; no hot loop of fetches meanwhile.
      await sleep(this.options.consumer.maxWaitTimeInMs);
      return;
    }
    const generation = session.generation;
    try {
      if (!session.ready) await session.start(() => this.committedOffset(topic, partition));
    } catch (err) {
      this.logger.warn(`cannot start ${topic}[${partition}]: ${(err as Error).message}; retrying on the next fetch`);
      await sleep(1000);
      return;
    }

    let records = this.pending(batch.messages, session, resolveOffset);
    let failures = 0;
    let index = 0;
    while (index < records.length) {
      if (!isRunning() || isStale() || session.generation !== generation || session.fenced) return;
      const chunk: ChunkRecord[] = records.slice(index, index + this.options.chunk.maxRecords).map((message) => ({
        message,
        offset: message.offset,
        messageId: messageIdOf(topic, partition, message),
      }));
      const unit = new UnitOfWork(
        {
          dataSource: this.dataSource,
          inbox: this.inbox,
          producer: session.producer,
          handler,
          registry: this.registry,
          options: this.options,
          faults: this.faults,
          topic,
          partition,
          heartbeat,
        },
        chunk,
      );
      const outcome = await unit.run();
      if (outcome.kind === 'committed') {
        resolveOffset(outcome.lastOffset);
        index += outcome.count;
        failures = 0;
        const { handled, replayed, duplicates, deadLettered } = outcome.stats;
        const summary = `${topic}[${partition}] committed up to ${outcome.lastOffset}: ${handled} handled, ${replayed} replayed from the inbox, ${duplicates} duplicates skipped, ${deadLettered} dead-lettered`;
        if (replayed > 0 || duplicates > 0 || deadLettered > 0) this.logger.log(summary);
        else this.logger.debug(summary);
        await this.heartbeatBetweenChunks(heartbeat);
        continue;
      }
      const reason = (outcome.error as Error)?.message ?? String(outcome.error);
      if (outcome.kind === 'fenced') {
        // Another member owns the partition now. Re-initialising the producer would fence that owner.
        this.logger.warn(`${topic}[${partition}]: producer fenced, another member owns the partition; abandoning the chunk (${reason})`);
        session.fenced = true;
        await session.producer.close();
        return;
      }
      failures++;
      const delay = Math.min(30000, 100 * 2 ** Math.min(failures, 9));
      this.logger.warn(
        outcome.kind === 'outcome-unknown'
          ? `${topic}[${partition}]: Kafka outcome unknown (${reason}); recreating the producer and resuming from the committed offset`
          : `${topic}[${partition}]: unit of work rolled back (${reason}); retrying in ${delay} ms`,
      );
      // Heartbeats keep this member in the group while it waits; a rebalance ends the batch here.
      const stillMember = await pauseWithHeartbeats(delay, this.options.consumer.heartbeatInterval, heartbeat);
      if (!stillMember || !isRunning() || isStale() || session.generation !== generation) return;
      // Whatever failed, start over with a fresh producer: its InitProducerId settles the previous transaction
      // (completes a decided commit, aborts the rest), and a new epoch never reuses the sequence numbers of a
      // send whose outcome KafkaJS could not know. Then resume from the group's committed offset, not from the
      // chunk's start: a commit whose reply was lost may have succeeded, and replaying it would duplicate it.
      try {
        await session.start(() => this.committedOffset(topic, partition));
      } catch (err) {
        this.logger.warn(`${topic}[${partition}]: cannot recreate the producer yet: ${(err as Error).message}`);
        return; // nothing resolved: the next fetch redelivers from the last committed chunk
      }
      records = this.pending(records.slice(index), session, resolveOffset);
      index = 0;
    }
  }

  /** Drops the records below the session's committed floor (already done) and moves the fetch position past them. */
  private pending<T extends { offset: string }>(messages: T[], session: PartitionSession, resolveOffset: (offset: string) => void): T[] {
    const first = messages.findIndex((m) => BigInt(m.offset) >= session.floor);
    const skipped = first < 0 ? messages.length : first; // offsets ascend: the done records are a prefix
    if (skipped > 0) resolveOffset(messages[skipped - 1].offset);
    return messages.slice(skipped);
  }

  /** Between chunks a rebalance error must reach KafkaJS so it rejoins; nothing is in flight then. */
  private async heartbeatBetweenChunks(heartbeat: () => Promise<void>): Promise<void> {
    try {
      await heartbeat();
    } catch (err) {
      if (isRebalanceError(err)) throw err;
      this.logger.warn(`heartbeat failed: ${(err as Error).message}`);
    }
  }
}
