import { PartitionSamples } from './partition-samples';
import { Logger } from '@nestjs/common';
import type { DatabasePort } from '../database/database.port';
import { InboxRepository } from '../inbox/inbox.repository';
import { ParkingRepository } from '../parking/parking.repository';
import type { HandlerDefinition } from './handler-definition';
import type { ResolvedOptions } from '../options/resolved-options';
import { drainBatchSize } from '../publishing/drain-batch';
import type { SchemaRegistry } from '../formats/avro/schema-registry';
import { PartitionProducer } from '../transaction/partition-producer';
import { legacyTransactionalIds, partitionTransactionalId } from '../transaction/transactional-ids';
import { releaseClean } from './clean-release';
import type { KafkaExactlyOnceMetrics } from '../metrics/kafka-exactly-once.metrics';
import type { KafkaExactlyOnceTracing } from '../tracing/kafka-exactly-once.tracing';
import { isConnectionFault, isKafkaUnavailable, isRecordSuspectFault } from './error-classification';
import type { FaultInjector } from './fault-injector';
import type { PartitionHealth } from './partition-progress';
import { DeliveredOutputs } from './delivered-outputs';
import { HangingAbortPolicy } from './hanging-abort-policy';
import { PartitionSession } from './partition-session';
import { identify } from './record-identity';
import { HangingTransactionError } from '../errors/hanging-transaction.error';
import { RecordedOutputsRefusedError } from '../errors/recorded-outputs-refused.error';
import { describeRefusal, refusedForGood } from '../publishing/send-refusal';
import { retryDelay } from './retry-policy';
import { isRebalanceError, sleep } from './sleep';
import { ChunkRecord, DeadLetterReason, describeFailure, reasonOf, UnitOfWork, UnitOfWorkDeps, UnitOfWorkOutcome, unitSessionSettings } from './unit-of-work';
import type { AmbientTransactions } from '../transaction/ambient-transaction';
import { withDeadline } from './deadline';
import { dueAt, retryOrigin, Route, routesOf } from '../retry/retry-tiers';
import type { GroupConsumers } from '../client/drivers';
import type { FetchedBatch, GroupConsumer } from '../client/group-consumer';
import { batchBytes, FetchBudget, recordBytes, type SizedRecord } from '../client/fetch-budget';
import { markBusy, registerDrain } from '../client/group-drains';
import { StepLog, stepClock, type UnitSteps } from './step-log';
import { type ClusterAdmin, type KafkaClient, logRequestsOf, StableOffsets, UnstableOffsetsError } from '../kafkajs';
import { COMMITTED_LOOKBACK_MS, COMMITTED_READ_BYTES, type CommittedRecords, forgottenByCoordinator, HangingTransactions, type OpenTransaction } from '../client/hanging-transactions';

/** Backoff between new KafkaJS consumers after a crash KafkaJS does not restart from. */
const RECOVERY_BACKOFF = { initialDelayMs: 1000, multiplier: 2, maxDelayMs: 30000 };

export type ConsumerState = 'idle' | 'starting' | 'rebalancing' | 'running' | 'stopping' | 'stopped' | 'crashed';

export interface ConsumerStatus {
  state: ConsumerState;
  groupId: string;
  /** This member's id in the group (null until it joined). */
  memberId?: string | null;
  assignment: Record<string, number[]>;
  lastError?: string;
  /** Each assigned partition that has been fetched from, with its progress. */
  partitions: PartitionHealth[];
  /** Each retry tier of this member's partitions: records waiting on it, and when the next one is due. */
  retryTiers: RetryTierStatus[];
  /** Bytes of fetched records held across the partitions (`consumer.maxBytesInFlight`): now, the most so far, the bound. */
  bytesInFlight?: { held: number; peak: number; limit: number };
}

/** A retry tier as this member sees it (its assigned partitions of the tier's topic). */
export interface RetryTierStatus {
  topic: string;
  /** The topic whose records come back from it. */
  retriesOf: string;
  tier: number;
  delayMs: number;
  /** Records between the committed offset and the high watermark of its partitions (transaction markers count too). */
  waiting: number;
  /** When the next record not handled yet of its partitions is (or was) due (ISO 8601), the earliest; null when none waits. */
  nextDueAt: string | null;
}

const sessionKey = (topic: string, partition: number): string => `${topic}\u0000${partition}`;

type Payload = Pick<FetchedBatch, 'heartbeat' | 'isRunning' | 'isStale' | 'pause'>;

/** Heartbeat errors that mean this member's generation is over: another member may own its partitions. */
const OWNERSHIP_LOST = new Set(['UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION', 'REBALANCE_IN_PROGRESS', 'FENCED_INSTANCE_ID']);

/**
 * One KafkaJS consumer for all the handlers of a group, running the units of work of each assigned partition
 * in order (docs/protocol.md). Offsets are committed only inside Kafka transactions (autoCommit off), and the fetch
 * position advances (resolveOffset) only after a unit of work committed.
 *
 * Failures are handled per partition, so that no partition waits behind another: a partition that must wait
 * (infrastructure fault, a record failing alone) is paused and resumed by a timer while the others go on. A
 * chunk that fails for any reason but an infrastructure fault is re-run one record per unit of work, so that
 * the record that fails alone is found; after `isolation.maxFailures` such failures (counted in the inbox, so
 * the count survives restarts) it is dead-lettered.
 */
export class ExactlyOnceConsumer {
  private readonly logger = new Logger(ExactlyOnceConsumer.name);
  private readonly inbox = new InboxRepository();
  private readonly parking = new ParkingRepository();
  private readonly sessions = new Map<string, PartitionSession>();
  /** Partitions' workers running (see onBatch), and the batches waiting for one to end. */
  private workers = 0;
  private readonly workerSlots: Array<() => void> = [];
  /** Workers of partitions revoked while they ran (past the drain's wait): a later session of the partition waits for them. */
  private readonly orphans = new Map<string, Promise<void>>();
  /** From a drain before a (re)join or a leave until the join (or a crash, or a new consumer): no worker starts. */
  private draining = false;
  private undrain?: () => void;
  /** This member's id in the group, from its last join: a drain before a leave is for this member only when it is its own. */
  private memberId?: string;
  /** Counts per partition between two reports of the instance (the console's charts); none when reports are off. */
  readonly samples?: PartitionSamples;
  /** Each committed unit's step times, when operations.stepLog names a file (a diagnostic of the tail). */
  private readonly stepLog?: StepLog;
  private readonly routes: Map<string, Route>;
  private consumer?: GroupConsumer;
  private readonly stableOffsets: StableOffsets;
  private readonly hanging: HangingTransactions;
  /** When a hanging transaction of a partition's own producer is aborted after reads of what it committed. */
  private readonly hangingAborts = new HangingAbortPolicy();
  /** Set by stop(): no more recoveries after a crash. */
  private stopRequested = false;
  private recovery?: NodeJS.Timeout;
  private status: Omit<ConsumerStatus, 'partitions' | 'retryTiers' | 'bytesInFlight'>;
  /** The bytes of the batches handed over and not done yet, across partitions (consumer.maxBytesInFlight). */
  private readonly fetchBudget: FetchBudget;
  private markJoined!: () => void;
  /**
   * Resolves at the first assignment (the group joined). KafkaJS's `run()` resolves also when the join failed
   * (it crashes and restarts the consumer instead of throwing): only this says the consumer runs.
   */
  readonly joined = new Promise<void>((resolve) => (this.markJoined = resolve));

  constructor(
    private readonly kafka: KafkaClient,
    private readonly groupConsumers: GroupConsumers,
    private readonly admin: ClusterAdmin,
    private readonly dataSource: DatabasePort,
    private readonly registry: SchemaRegistry,
    private readonly options: ResolvedOptions,
    private readonly faults: FaultInjector,
    handlers: HandlerDefinition[],
    private readonly topicLimits: ReadonlyMap<string, number> = new Map(),
    private readonly metrics?: KafkaExactlyOnceMetrics,
    private readonly tracing?: KafkaExactlyOnceTracing,
    private readonly ambient?: AmbientTransactions,
  ) {
    this.samples = options.operations.reportIntervalMs > 0 ? new PartitionSamples() : undefined;
    this.stepLog = options.operations.stepLog ? new StepLog(options.operations.stepLog) : undefined;
    this.routes = routesOf(handlers);
    this.stableOffsets = new StableOffsets(kafka);
    this.hanging = new HangingTransactions(logRequestsOf(kafka));
    this.status = { state: 'idle', groupId: options.groupId, assignment: {} };
    this.fetchBudget = new FetchBudget(options.consumer.maxBytesInFlight);
  }

  getStatus(stallAfterMs = this.options.consumer.stallAfterMs): ConsumerStatus {
    const now = Date.now();
    const partitions = [...this.sessions.values()].map((s) => s.progress.snapshot(stallAfterMs, now));
    const bytesInFlight = { held: this.fetchBudget.held, peak: this.fetchBudget.peakHeld, limit: this.fetchBudget.limit };
    return { ...this.status, memberId: this.memberId ?? null, assignment: { ...this.status.assignment }, partitions, retryTiers: this.retryTiers(partitions), bytesInFlight };
  }

  private retryTiers(partitions: PartitionHealth[]): RetryTierStatus[] {
    const tiers: RetryTierStatus[] = [];
    for (const [topic, { handler, stage }] of this.routes) {
      if (stage === 0) continue;
      const own = partitions.filter((p) => p.topic === topic);
      const due = own.map((p) => p.nextDueAt).filter((d): d is string => d !== null).sort()[0] ?? null;
      tiers.push({ topic, retriesOf: handler.topic, tier: stage, delayMs: handler.retryTopics!.delaysMs[stage - 1], waiting: own.reduce((n, p) => n + (p.lag ?? 0), 0), nextDueAt: due });
    }
    return tiers;
  }

  async start(): Promise<void> {
    this.stopRequested = false;
    await this.launch();
  }

  /** A new consumer of the group (the module's driver): connect, subscribe, run. */
  private async launch(): Promise<void> {
    const { consumer: c, groupId } = this.options;
    this.status.state = 'starting';
    this.logger.log(`group ${groupId}: joining, its consumer on ${this.options.driver === 'platformatic' ? '@platformatic/kafka' : 'KafkaJS'} (driver ${this.options.driver})`);
    const consumer = this.groupConsumers({
      groupId,
      groupProtocol: c.groupProtocol,
      sessionTimeout: c.sessionTimeout,
      heartbeatInterval: c.heartbeatInterval,
      rebalanceTimeout: c.rebalanceTimeout,
      maxBytesPerPartition: c.maxBytesPerPartition,
      fetchBudget: this.fetchBudget,
      maxWaitTimeInMs: c.maxWaitTimeInMs,
      readUncommitted: false,
      allowAutoTopicCreation: false,
    });
    this.consumer = consumer;
    // No fetch of an earlier consumer is in flight any more; its batches still held stay counted until done.
    this.fetchBudget.clearReservations();
    this.draining = false;
    this.undrain?.();
    this.memberId = undefined;
    // Before KafkaJS's consumer joins, rejoins or leaves the group (the leave: by stop(), a crash, a disconnect), the
    // workers end their units of work. Another member of the group in this process leaving is not this one's drain.
    this.undrain = registerDrain(groupId, (leaving) => (leaving === undefined || leaving === this.memberId ? this.drainWorkers() : Promise.resolve()));
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      this.memberId = payload.memberId;
      this.onAssignment(payload.memberAssignment, payload.incremental === true);
    });
    // A fetch of transaction markers or aborted records only: KafkaJS moves past it without calling onBatch. Its
    // offsets hold nothing to handle, so that a caught-up partition of a transactional topic shows no lag.
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      if (payload.batchSize !== 0) return;
      this.sessions.get(sessionKey(payload.topic, payload.partition))?.progress.passedThrough(BigInt(payload.lastOffset) + 1n, payload.highWatermark);
    });
    consumer.on(consumer.events.REBALANCING, () => {
      this.status.state = 'rebalancing';
    });
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      this.draining = false;
      this.status.lastError = payload.error?.message;
      this.status.state = payload.restart ? 'rebalancing' : 'crashed';
      // Restarted by KafkaJS after an error the broker means to be retried (a coordinator loading after a broker
      // restart): routine, a warning; anything else needs a look.
      const routine = payload.restart && isKafkaUnavailable(payload.error);
      this.logger[routine ? 'warn' : 'error'](`consumer of group ${groupId} crashed (${payload.restart ? 'KafkaJS restarts it' : 'KafkaJS does not restart it; starting a new one'}): ${payload.error?.message}`);
      // KafkaJS gives up on errors it deems not retriable (say "Failed to find group coordinator" after a broker
      // restart) and leaves the consumer stopped for good: the line would stop. Start a new one with backoff.
      if (!payload.restart && consumer === this.consumer) this.recoverLater(1);
    });
    consumer.on(consumer.events.STOP, () => {
      if (this.status.state !== 'crashed') this.status.state = 'stopped';
    });
    await consumer.connect();
    // A group without committed offsets starts from the earliest record: nothing published before is skipped.
    await consumer.subscribe({ topics: [...this.routes.keys()], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: c.partitionsConsumedConcurrently,
      eachBatch: (payload) => this.onBatch(payload),
    });
  }

  /** Starts a new KafkaJS consumer after a crash it does not restart from, with capped backoff, until one runs. */
  private recoverLater(attempt: number): void {
    if (this.stopRequested || this.recovery) return;
    const delay = retryDelay(RECOVERY_BACKOFF, attempt);
    this.recovery = setTimeout(() => {
      this.recovery = undefined;
      if (this.stopRequested) return;
      const crashed = this.consumer;
      void (async () => {
        await crashed?.disconnect().catch(() => undefined);
        if (this.stopRequested) return;
        try {
          await this.launch();
          this.logger.log(`consumer of group ${this.options.groupId} started again after a crash`);
        } catch (err) {
          this.status.state = 'crashed';
          this.status.lastError = (err as Error)?.message;
          this.logger.error(`consumer of group ${this.options.groupId} did not start again (${(err as Error)?.message}); next try in ${retryDelay(RECOVERY_BACKOFF, attempt + 1)} ms`);
          await this.consumer?.disconnect().catch(() => undefined);
          this.recoverLater(attempt + 1);
        }
      })();
    }, delay);
    this.recovery.unref?.();
  }

  /** No more recoveries after a crash: the application is stopping the consumer. */
  private cancelRecovery(): void {
    this.stopRequested = true;
    if (this.recovery) clearTimeout(this.recovery);
    this.recovery = undefined;
  }

  /** Stops fetching and waits for the units of work in flight to finish (each commits or rolls back). */
  async stop(): Promise<void> {
    this.cancelRecovery();
    if (!this.consumer) return;
    this.status.state = 'stopping';
    for (const session of this.sessions.values()) session.cancelResume();
    // Each partition's worker ends after its unit of work in flight, before the member leaves the group; nothing
    // is fetched meanwhile.
    this.pauseAll();
    await this.workersEnded();
    await this.consumer.stop();
    this.status.state = 'stopped';
  }

  async disconnect(): Promise<void> {
    this.cancelRecovery();
    this.pauseAll();
    await this.workersEnded();
    await this.consumer?.disconnect().catch((err) => this.logger.warn(`consumer disconnect: ${err.message}`));
    this.consumer = undefined;
    this.undrain?.();
    this.undrain = undefined;
    for (const session of this.sessions.values()) session.cancelResume();
    await Promise.all([...this.sessions.values()].map((s) => s.producer.close()));
    this.sessions.clear();
    await this.stableOffsets.disconnect();
    await this.hanging.disconnect();
    this.stepLog?.close();
  }

  /** Whether `session` is the member's session of its partition (not one revoked since). */
  private isCurrent(session: PartitionSession): boolean {
    return this.sessions.get(sessionKey(session.topic, session.partition)) === session;
  }

  private pauseAll(): void {
    try {
      this.consumer?.pause([...this.routes.keys()].map((topic) => ({ topic })));
    } catch {
      // Not running (never joined, or crashed): nothing is fetched anyway.
    }
  }

  private async workersEnded(): Promise<void> {
    await Promise.all([...[...this.sessions.values()].map((s) => s.worker), ...this.orphans.values()]);
  }

  /**
   * Before this member (re)joins or leaves the group: each partition's worker ends after its unit of work in flight
   * (its generation moves on, so it starts no other), so that no unit of a partition runs on once it may be
   * another member's. Waits at most the rebalance timeout, past which the group would go on without this member
   * anyway. A leave follows a stop() that ended the workers already, or KafkaJS stopping its consumer by itself (a
   * crash): its stop no longer waits for them, the batches having returned at once (see onBatch).
   */
  private async drainWorkers(): Promise<void> {
    this.draining = true;
    const running = [...this.sessions.values()].filter((s) => s.worker);
    if (running.length === 0 && this.orphans.size === 0) return;
    for (const session of running) session.generation++;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.workersEnded(), new Promise<void>((resolve) => (timer = setTimeout(resolve, this.options.consumer.rebalanceTimeout)))]);
    clearTimeout(timer);
  }

  /** Partitions handled at once each hold a connection during a unit of work: fewer connections make them queue. */
  private warnIfPoolTooSmall(assignment: Record<string, number[]>): void {
    const assigned = Object.values(assignment).reduce((n, ps) => n + ps.length, 0);
    const { atOnce, needed } = connectionsNeeded({ assignedPartitions: assigned, partitionsConsumedConcurrently: this.options.consumer.partitionsConsumedConcurrently, outboxRelay: this.options.outbox?.relay === true });
    const poolMax = this.dataSource.pgPool()?.options?.max;
    if (poolMax !== undefined && poolMax < needed) {
      this.logger.warn(
        `group ${this.options.groupId}: ${atOnce} partitions are handled at once (retry tiers' partitions included), each needing a PostgreSQL connection during a unit of work, and the pool has ${poolMax} (it needs ${needed} with the library's replay and retention jobs${this.options.outbox?.relay ? ' and the outbox relay' : ''}, before the application's own): partitions wait for a connection. Raise the pool's max (TypeORM: the DataSource's extra.max), or lower consumer.partitionsConsumedConcurrently.`,
      );
    }
  }

  /** `incremental`: the partitions kept were this member's throughout (KIP-848): their sessions go on as they are. */
  private onAssignment(assignment: Record<string, number[]>, incremental = false): void {
    this.draining = false;
    this.markJoined();
    this.status.state = 'running';
    this.status.assignment = assignment;
    for (const [key, session] of this.sessions) {
      if (assignment[session.topic]?.includes(session.partition)) {
        if (!incremental) session.reassigned();
      } else {
        // KafkaJS keeps a partition paused across rebalances: resume it now, or it would stay paused for good
        // when it comes back to this member later.
        session.cancelResume(true);
        // Paused while a worker still runs (past the drain's wait): it would stay paused if it came back.
        session.busyResume?.();
        session.revoked();
        this.sessions.delete(key);
        // A unit of work still running ends first (it commits, or the new owner's producer fenced it), and a later
        // session of the partition on this member waits for it.
        if (session.worker) {
          const orphan: Promise<void> = session.worker.then(() => {
            if (this.orphans.get(key) === orphan) this.orphans.delete(key);
          });
          this.orphans.set(key, orphan);
        }
        void (session.worker ?? Promise.resolve()).then(() => session.producer.close());
      }
    }
    this.warnIfPoolTooSmall(assignment);
    this.logger.log(
      `group ${this.options.groupId}: assigned ${Object.entries(assignment).map(([t, ps]) => `${t}[${ps.join(',')}]`).join(' ') || 'nothing'}`,
    );
  }

  private session(topic: string, partition: number): PartitionSession {
    const key = sessionKey(topic, partition);
    let session = this.sessions.get(key);
    if (!session) {
      const { transactionalIdPrefix: prefix, groupId } = this.options;
      const producer = new PartitionProducer(
        this.kafka,
        partitionTransactionalId(prefix, groupId, topic, partition),
        this.options.transactionTimeoutMs,
        this.options.kafka.retry,
        legacyTransactionalIds.partition(prefix, groupId, topic, partition),
      );
      session = new PartitionSession(topic, partition, producer);
      session.delivered = new DeliveredOutputs(this.dataSource, groupId, topic, partition);
      this.sessions.set(key, session);
    }
    return session;
  }

  /**
   * The group's committed offset of a partition, read after InitProducerId and only once stable: offsets of a
   * transaction that committed a moment ago may not be applied by the group coordinator yet (see StableOffsets).
   */
  private async committedOffset(topic: string, partition: number, heartbeat: () => Promise<void>, session?: PartitionSession): Promise<bigint> {
    const { groupId, transactionTimeoutMs, consumer } = this.options;
    // Pending offsets outlive a transaction only when its coordinator no longer settles it: past the timeout (and
    // a little), it is a hanging transaction. The member heartbeats meanwhile, or the wait would cost it the group.
    const waitMs = transactionTimeoutMs + 5000;
    const read = () => this.stableOffsets.committed(groupId, topic, partition, waitMs, { heartbeat, everyMs: consumer.heartbeatInterval });
    // Another member may have owned the partition since this one last did, and aborted a hanging transaction.
    session?.delivered?.restart();
    try {
      return await read();
    } catch (err) {
      if (!(err instanceof UnstableOffsetsError)) throw err;
      const found = await this.hanging.holdingOffsetsOf(groupId).catch(() => ({ offsetsPartition: -1, open: [] as OpenTransaction[] }));
      const own = this.ownForgotten(topic, partition, found.open);
      let failure = '';
      if (own.length > 0 && found.offsetsPartition >= 0 && session?.delivered) {
        // What its producer already committed is read and kept in PostgreSQL BEFORE the abort: until the abort,
        // nothing can replay the records (their offsets are held), and a member that dies in between leaves the
        // transaction for the next owner to find, read again and abort.
        failure = await this.recordDelivered(session.delivered, own, found.offsetsPartition, heartbeat);
        if (!failure) {
          this.faults.reach('before-hanging-abort');
          failure = await this.abortOwnHanging(topic, partition, own, found.offsetsPartition);
        }
        if (!failure) {
          this.hangingAborts.ended(sessionKey(topic, partition));
          this.faults.reach('after-hanging-abort');
          // What this member committed past the offset read now may have been in the aborted transaction: the
          // partition goes back to that offset (the session's floor and the fetch position), and the records come
          // again, their outputs replayed from the inbox, less those Kafka already holds committed.
          session.rewind = true;
          return read();
        }
      }
      const hanging = new HangingTransactionError(groupId, topic, partition, found.offsetsPartition, found.open, waitMs, brokerList(this.options.kafka.brokers), failure);
      this.logger.error(
        `hanging transaction ${JSON.stringify({ group: groupId, topic, partition, offsetsPartition: found.offsetsPartition, holders: found.open })}: ${hanging.message}`,
      );
      throw hanging;
    }
  }

  /**
   * Aborts hanging transactions of this partition's own producer on every partition where they are open. Always an
   * abort: the offsets they hold cannot be told apart from those of a later transaction of the same producer id
   * and epoch whose end was never answered (KafkaJS's producer keeps one epoch for all its transactions), and a
   * commit of those would skip records whose outputs were aborted. After an abort the records come again from the
   * offset committed before, and the inbox replays their outputs. Returns '' when done, or why not.
   */
  private async abortOwnHanging(topic: string, partition: number, own: OpenTransaction[], offsetsPartition: number): Promise<string> {
    const { groupId } = this.options;
    for (const holder of own) {
      let aborted: string[];
      try {
        aborted = await this.hanging.endEverywhere(holder, false, this.writableTopics(topic), { topic: '__consumer_offsets', partition: offsetsPartition });
      } catch (err) {
        return ` The library's abort of its own transaction failed (${(err as Error).message}).`;
      }
      this.metrics?.hangingTransactionEnded(topic, 'aborted');
      this.logger.warn(
        `hanging transaction aborted ${JSON.stringify({ group: groupId, topic, partition, transactionalId: holder.transactionalId, producerId: holder.producerId, producerEpoch: holder.producerEpoch, coordinatorState: holder.state, aborted })}: ` +
          `this partition's own producer left it open and its coordinator no longer ends it; its records come again and the inbox replays their outputs`,
      );
    }
    return '';
  }

  /**
   * Before an abort of this partition's own hanging transaction: reads the outputs its producer committed from a
   * while before that transaction began (its first record on the offsets' partition, less the transaction timeout
   * and COMMITTED_LOOKBACK_MS), and records them in PostgreSQL (DeliveredOutputs.record, merged into what earlier
   * reads recorded), so that whichever member replays the records after the abort does not send them again. A
   * broker crash can leave the commit markers written on the output partitions and only the offsets' partition
   * open: without this, the abort would send those outputs twice. Reading before the abort finds what reading after
   * it would: a record of the transaction still open on a partition counts neither before (no marker follows it)
   * nor after (aborted), and no other producer writes under that producer id meanwhile (this member's InitProducerId
   * fenced the rest). A read cut short by a rebalance throws it (nothing is recorded or aborted: the next owner does
   * both). A read that fails or is not whole is recorded for what it found, and the abort waits: the partition
   * tries again (HangingAbortPolicy), and aborts anyway after COMMITTED_READS_BEFORE_ABORT such reads in a row,
   * sending again what no read found (a second time, with the same message ids), never fewer. Returns '' when the
   * abort may go ahead, or why not (nothing is aborted then, and the partition tries again).
   */
  private async recordDelivered(delivered: DeliveredOutputs, own: OpenTransaction[], offsetsPartition: number, heartbeat: () => Promise<void>): Promise<string> {
    const { topic, partition } = delivered.where;
    let lost: unknown;
    const beat = () =>
      heartbeat().catch((err) => {
        lost = err;
        throw err;
      });
    let until = -1n;
    let committed: CommittedRecords = new Map();
    // Why the read is not whole ('' when it is).
    let short = '';
    try {
      this.faults.reach('hanging-read');
      const started: number[] = [];
      for (const holder of own) {
        const at = await this.hanging.startedAt('__consumer_offsets', offsetsPartition, holder.producerId, holder.startOffset);
        if (at === undefined) throw new Error(`the first record of producer id ${holder.producerId} at __consumer_offsets[${offsetsPartition}] offset ${holder.startOffset} was not found`);
        started.push(at);
      }
      const since = Math.min(...started) - this.options.transactionTimeoutMs - COMMITTED_LOOKBACK_MS;
      until = await this.hanging.latestOffset(topic, partition);
      const read = await this.hanging.committedRecords(new Set(own.map((h) => h.producerId)), this.writableTopics(topic), since, beat);
      if (isRebalanceError(lost)) throw lost;
      committed = read.committed;
      let found = 0;
      for (const n of committed.values()) found += n;
      this.logger.log(
        `${topic}[${partition}]: ${found} records of its own producer found committed since ${new Date(since).toISOString()}; records below offset ${until} replayed from the inbox send none of them again (kept in PostgreSQL for whichever member replays them)`,
      );
      if (!read.complete) {
        short = `not all read (${read.unread.slice(0, 10).join(', ')}${read.unread.length > 10 ? ` and ${read.unread.length - 10} more` : ''}: no leader, a failed fetch or the ${COMMITTED_READ_BYTES / 1024 / 1024} MiB read used up)`;
      }
    } catch (err) {
      if (isRebalanceError(err)) throw err;
      short = `not read (${(err as Error).message})`;
    }
    try {
      await delivered.record(until, committed);
    } catch (err) {
      return ` The library did not abort it yet: what its producer already committed could not be kept in PostgreSQL first (${(err as Error).message}); it tries again.`;
    }
    const holders = own.map((h) => `${h.producerId}:${h.producerEpoch}:${h.startOffset}`).join(',');
    const next = this.hangingAborts.afterRead(sessionKey(topic, partition), holders, !short);
    if (next.action === 'read-again') {
      const why = `the outputs its own producer already committed were ${short}`;
      this.logger.warn(`${topic}[${partition}]: ${why}; its hanging transaction is not aborted yet: the partition waits and reads them again (read ${next.reads} of ${next.of}; the last one aborts anyway)`);
      return ` The library did not abort it yet: ${why}; it reads them again (read ${next.reads} of ${next.of}), and after the last aborts anyway, sending a second time what no read found.`;
    }
    if (next.action === 'abort-anyway') {
      this.logger.error(
        `${topic}[${partition}]: the outputs its own producer already committed were ${short}, ${next.reads} reads in a row: its hanging transaction is aborted anyway, so that the partition moves. The records replayed after it send again, a second time with the same message ids, their outputs that Kafka holds committed and no read found (on the partitions named; readers that do not deduplicate by message id see them twice); nothing is lost`,
      );
    }
    return '';
  }

  /**
   * After this member aborted a hanging transaction of its own: the fetch position goes back to the offset read
   * (the session's floor, set to it), and the batch ends, so that KafkaJS fetches from there. True when it did.
   */
  private rewound(session: PartitionSession, resolveOffset: (offset: string) => void): boolean {
    if (!session.rewound) return false;
    session.rewound = false;
    const from = session.floor < 0n ? 0n : session.floor;
    resolveOffset(String(from - 1n));
    this.logger.log(`${session.topic}[${session.partition}]: fetching again from offset ${from}, where the group's committed offset stands after the abort`);
    return true;
  }

  /** The partition committed past the records a recorded read is for: it is deleted (inbox retention does it else). */
  private async pastDelivered(session: PartitionSession, until: bigint): Promise<void> {
    const delivered = session.delivered!;
    this.logger.log(`${session.topic}[${session.partition}]: committed past offset ${until}: ${delivered.skipped} outputs already committed were not sent again`);
    await delivered.forget(session.floor).catch((err) => this.logger.debug(`${session.topic}[${session.partition}]: the outputs found committed before offset ${until} stay in PostgreSQL until inbox retention deletes them (${(err as Error).message})`));
  }

  /** The topics a partition's producer may write: the declared outputs, the handler's dead-letter and retry topics. */
  private writableTopics(topic: string): string[] {
    const { options } = this;
    const handler = this.routes.get(topic)?.handler;
    const outputs = Object.keys(options.topics).map((t) => `${options.topicPrefix}${t}`);
    return [...new Set([...outputs, ...(handler ? [`${handler.topic}${options.deadLetter.topicSuffix}`, ...(handler.retryTopics?.topics ?? [])] : [])])];
  }

  /**
   * The holders the library may end itself (`abortHangingTransactions`): this partition's own
   * producer (its transactional id, or the one of versions before 0.3), in a state its coordinator no longer ends.
   */
  private ownForgotten(topic: string, partition: number, holders: OpenTransaction[]): OpenTransaction[] {
    if (!this.options.abortHangingTransactions) return [];
    const { transactionalIdPrefix: prefix, groupId } = this.options;
    const own = new Set([partitionTransactionalId(prefix, groupId, topic, partition), legacyTransactionalIds.partition(prefix, groupId, topic, partition)]);
    return holders.filter((h) => own.has(h.transactionalId ?? '') && forgottenByCoordinator(h));
  }

  /**
   * KafkaJS fetches again only once every batch of its last fetch is done: a partition whose unit of work is slow
   * would hold every other partition's next records. So a batch is handed to its partition's worker and the
   * partition paused while the worker runs (KafkaJS fetches the others meanwhile), then resumed, and fetched again
   * from its resolved position. A partition runs one worker at a time: a batch for a partition whose worker of an
   * earlier generation still runs (kept across a rebalance) waits for it, as do batches beyond
   * `partitionsConsumedConcurrently` workers.
   *
   * A batch's bytes count against `consumer.maxBytesInFlight` from the moment it is handed over (waiting included)
   * until its worker ends, or at once when it is not handled: the drivers fetch no more than the bound leaves.
   */
  private async onBatch(payload: FetchedBatch): Promise<void> {
    const bytes = batchBytes(payload.batch.messages);
    this.fetchBudget.hold(bytes);
    let started: { worker: Promise<void> } | undefined;
    try {
      started = await this.startWorker(payload);
    } finally {
      if (started) void started.worker.finally(() => this.fetchBudget.release(bytes));
      else this.fetchBudget.release(bytes);
    }
  }

  /** Hands a fetched batch to its partition's worker (see onBatch); the worker, or undefined when none was started. */
  private async startWorker(payload: FetchedBatch): Promise<{ worker: Promise<void> } | undefined> {
    const { topic, partition } = payload.batch;
    if (!this.routes.has(topic)) return;
    const fetchedAt = this.stepLog ? stepClock() : 0;
    const key = sessionKey(topic, partition);
    const session = this.session(topic, partition);
    await this.orphans.get(key);
    if (session.worker) await session.worker;
    while (this.workers >= this.options.consumer.partitionsConsumedConcurrently) await new Promise<void>((resolve) => this.workerSlots.push(resolve));
    if (this.stopRequested) {
      // Fetched again at once otherwise, over and over, until the consumer stops.
      payload.pause();
      return;
    }
    if (this.draining || !payload.isRunning() || payload.isStale() || !this.isCurrent(session)) return;
    const resume = payload.pause();
    session.busyResume = resume;
    markBusy(this.options.groupId, topic, partition, 1);
    this.workers++;
    const worker = this.handleBatch(payload, session, fetchedAt)
      .catch((err) => {
        if (isRebalanceError(err)) this.logger.debug(`${topic}[${partition}]: the group is rebalancing (${(err as Error).message})`);
        else this.logger.error(`${topic}[${partition}]: ${(err as Error)?.stack ?? err}`);
      })
      .finally(() => {
        markBusy(this.options.groupId, topic, partition, -1);
        this.workers--;
        this.workerSlots.shift()?.();
        session.worker = undefined;
        session.busyResume = undefined;
        // Paused by this worker for a backoff or a retry tier's due time: its timer resumes it (a timer of an
        // earlier worker may be for KafkaJS's consumer group before a restart: it cannot resume this one).
        // Revoked: onAssignment resumed it. Stopping: it stays paused.
        const backingOff = session.resumeTimer !== undefined && session.backoffBy === resume;
        if (!backingOff && !this.stopRequested && this.isCurrent(session)) resume();
      });
    session.worker = worker;
    return { worker };
  }

  /** The work of one fetched batch of a partition, by its worker (see onBatch). */
  private async handleBatch(payload: FetchedBatch, session: PartitionSession, fetchedAt: number): Promise<void> {
    const { batch, heartbeat, isStale } = payload;
    // stop() ends the workers before the member leaves the group, while KafkaJS still runs.
    const isRunning = () => payload.isRunning() && !this.stopRequested;
    const { topic, partition } = batch;
    const { handler, stage } = this.routes.get(topic)!;
    if (session.fenced) {
      // Until this member is assigned the partition again; no hot loop of fetches meanwhile.
      session.progress.activity = 'fenced';
      await sleep(this.options.consumer.maxWaitTimeInMs);
      return;
    }
    session.progress.fetched(batch.highWatermark, batch.firstOffset() ?? undefined);
    const generation = session.generation;
    // The fetch position is this assignment's only: once the member rejoined (or is about to), KafkaJS keeps new
    // positions, read from the group's committed offsets, and has none for a partition revoked (resolving one there
    // throws). A unit that commits past the rejoin's wait leaves the position to the next assignment.
    const resolveOffset = (offset: string): void => {
      if (session.generation === generation && this.isCurrent(session)) payload.resolveOffset(offset);
    };
    if (session.verifyOwnership) {
      const owner = await this.ownership(payload, session, generation);
      if (owner === 'lost') return this.abandon(session, new Error('another member owns the partition'), 'another member owns the partition; waiting to be assigned it again');
      if (owner === 'unknown') return this.backOff(session, payload, new Error('cannot tell whether this member still owns the partition'), 'ownership unknown');
      session.verifyOwnership = false;
    }
    try {
      if (!session.ready) {
        await session.start(() => this.committedOffset(topic, partition, heartbeat, session));
        if (session.starts > 1) this.producerRecreated(session);
        if (this.rewound(session, resolveOffset)) return;
      }
    } catch (err) {
      // The group is rebalancing (a heartbeat during the wait said so): KafkaJS must rejoin.
      if (isRebalanceError(err)) throw err;
      if (err instanceof HangingTransactionError) this.backOff(session, payload, err, 'a hanging transaction holds the committed offset', 'hanging-transaction');
      else this.backOff(session, payload, err, `cannot start the partition's transactional producer`);
      return;
    }

    let records = this.pending(batch.messages, session, resolveOffset);
    let index = 0;
    while (index < records.length) {
      if (!isRunning() || isStale() || session.generation !== generation || session.fenced) return;
      const isolating = BigInt(records[index].offset) <= session.isolateThrough;
      session.progress.activity = isolating ? 'isolating' : 'working';
      let length = isolating ? 1 : chunkLength(records, index, this.options.chunk);
      // A unit run with savepoints from the start stays below PostgreSQL's cache of a transaction's
      // subtransactions (64 per backend; past it every snapshot of the server gets slower).
      if (this.runsCarefully(handler, session)) length = Math.min(length, CAREFUL_UNIT_MAX_RECORDS);
      // At most a bounded number of Schema Registry ids to look up per unit: a flood of unknown ids cannot hold it.
      const remote = this.registry.remote;
      if (remote) length = remote.affordable(records.slice(index, index + length).map((r) => r.value));
      if (stage > 0) {
        // A retry tier: only records already due, and none is handled before its time. The partition waits
        // (paused, other partitions and tiers go on) until the first one not due yet is.
        const delayMs = handler.retryTopics!.delaysMs[stage - 1];
        const now = Date.now();
        // Never longer than the delay after this member first saw it: a producer's clock ahead (or a forged
        // timestamp) cannot hold the partition for good.
        const due = Math.min(dueAt(records[index], delayMs, now), session.headSeenAt(records[index].offset, now) + delayMs);
        session.progress.headDue(due);
        if (due > now) return this.waitUntilDue(session, payload, due, now);
        let ready = 1;
        while (ready < length && dueAt(records[index + ready], delayMs, now) <= now) ready++;
        length = ready;
      }
      const base = stage > 0 ? handler.topic : undefined;
      const chunk: ChunkRecord[] = records.slice(index, index + length).map((message) => ({
        message,
        offset: message.offset,
        id: identify(topic, partition, message, this.options.inbox.deduplicationScope, base === undefined ? undefined : { base, origin: retryOrigin(message.headers, base) }),
      }));
      const unitStarted = performance.now();
      const steps: UnitSteps | undefined = this.stepLog ? { fetched: fetchedAt, started: stepClock() } : undefined;
      const outcome = await this.runUnit(
        session,
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
          topicLimits: this.topicLimits,
          heartbeat,
          stage,
          onDeadLetter: (record, reason, error, parked) => this.logDeadLetter(topic, partition, record, reason, error.message, parked),
          onRetry: (record, tier, error) => this.logRetry(topic, partition, record, handler, tier, error.message),
          parking: this.parking,
          metrics: this.metrics,
          tracing: this.tracing,
          ambient: this.ambient,
          delivered: session.delivered,
          steps,
        },
        chunk,
      );
      if (outcome.kind === 'committed') {
        resolveOffset(outcome.lastOffset);
        index += outcome.count;
        session.infrastructureFailures = 0;
        session.committed(BigInt(outcome.lastOffset) + 1n, { records: outcome.count, commitMs: outcome.timings.postgresCommitMs + outcome.timings.kafkaCommitMs });
        const until = session.delivered?.until;
        if (until !== undefined && session.floor >= until) await this.pastDelivered(session, until);
        const unitMs = performance.now() - unitStarted;
        if (steps) this.stepLog!.unit(topic, partition, chunk[0].offset, outcome.lastOffset, outcome.count, steps);
        this.samples?.unit(topic, partition, outcome.count, unitMs);
        this.metrics?.unitCommitted(topic, outcome.stats, { unitMs, ...outcome.timings });
        const { handled, replayed, duplicates, deadLettered, retried } = outcome.stats;
        const summary = `${topic}[${partition}] committed up to ${outcome.lastOffset}: ${handled} handled, ${replayed} replayed from the inbox, ${duplicates} duplicates skipped, ${deadLettered} dead-lettered${retried > 0 ? `, ${retried} moved to a retry topic` : ''}`;
        if (replayed > 0 || duplicates > 0 || deadLettered > 0 || retried > 0) this.logger.log(summary);
        else this.logger.debug(summary);
        await this.heartbeatBetweenChunks(heartbeat);
        continue;
      }

      const error = outcome.error;
      const reason = (error as Error)?.message ?? String(error);
      if (outcome.kind === 'fenced') {
        this.metrics?.fencedCommit(topic);
        const owner = await this.ownership(payload, session, generation);
        if (owner === 'lost') {
          // A rebalance since this batch was fetched (the drain before this member's rejoin): the unit is abandoned
          // all the same, and the new assignment starts over with a producer start of its own.
          if (session.generation !== generation || !this.isCurrent(session)) {
            this.logger.warn(`${topic}[${partition}]: producer fenced, another member owns the partition; abandoning the chunk (${reason}); this member has rejoined the group since`);
            return;
          }
          // Another member owns the partition now. Re-initialising the producer would fence that owner.
          this.abandon(session, error, `producer fenced, another member owns the partition; abandoning the chunk (${reason})`);
          return;
        }
        // Still the owner of the current generation: the broker aborted the transaction itself (transaction
        // timeout) and bumped the epoch; recover like an unknown outcome (new producer, committed offset). When
        // the heartbeat could not tell, decide on the next batch, before any new producer is created.
        session.verifyOwnership = owner === 'unknown';
        this.backOff(session, payload, error, 'the broker aborted the Kafka transaction (transaction timeout?); recreating the producer and resuming from the committed offset', 'transaction-aborted');
        return;
      }
      // A fault of the infrastructure is retried without end; one a handler's own call raised that its record may
      // cause (PostgreSQL out of resources, a crashed backend, the handler's own Kafka client) is isolated and
      // counted like a record's failure, so that a record that keeps bringing it on is dead-lettered in the end.
      if (outcome.kind === 'outcome-unknown' || (isConnectionFault(error) && !isRecordSuspectFault(error))) {
        this.backOff(
          session,
          payload,
          error,
          outcome.kind === 'outcome-unknown' ? 'Kafka outcome unknown; recreating the producer and resuming from the committed offset' : 'infrastructure fault; unit of work rolled back',
        );
        return;
      }

      // Anything else may have been caused by a record: find out which one by running them one by one.
      session.progress.failed(error, 'record');
      if (chunk.length > 1) {
        session.isolateThrough = BigInt(chunk[chunk.length - 1].offset);
        this.logger.warn(
          `${topic}[${partition}]: unit of work of offsets ${chunk[0].offset}..${chunk[chunk.length - 1].offset} failed (${reason}); re-running them one per unit of work to find the record that fails`,
        );
      } else {
        const [record] = chunk;
        let failures: number;
        try {
          failures = await this.recordFailure(topic, partition, record, error);
        } catch (err) {
          this.backOff(session, payload, err, 'cannot record the failure of a record in the inbox');
          return;
        }
        if (failures === 0) {
          // The record was handled before (a replay of its recorded outputs failed): not the record's fault. Refused
          // for good, they wait for an operator (shown in health with the command); else they are retried.
          const refusal = refusedForGood(error);
          if (refusal) {
            const outputTopic = (error as { refused?: { topic: string } }).refused?.topic;
            const refused = new RecordedOutputsRefusedError(this.options.groupId, topic, partition, record.offset, record.id.displayId, outputTopic, describeRefusal(refusal, error));
            this.backOff(session, payload, refused, 'recorded outputs refused for good', 'outputs-refused');
            return;
          }
          this.backOff(session, payload, error, 'replaying recorded outputs failed');
          return;
        }
        const max = this.options.isolation.maxFailures;
        this.logger.warn(
          `${topic}[${partition}]@${record.offset} (message ${record.id.displayId}) failed alone (${failures}/${max}): ${reason}${failures >= max ? '; dead-lettering it' : ''}`,
        );
        // Wait before the next unit of this record (the one that dead-letters it, once failures reach the
        // maximum): a failure that keeps coming back must never turn into a tight loop.
        this.pauseFor(session, payload, retryDelay({ initialDelayMs: this.options.isolation.retryDelayMs, multiplier: 2, maxDelayMs: this.options.consumer.maxRetryDelayMs }, failures));
        session.ready = false;
        return;
      }
      // A failed unit may have left the producer's sequence numbers unsure: start over with a fresh producer
      // and from the committed offset, at once (the records now run one by one), if this member still owns
      // the partition.
      if (!isRunning() || isStale() || session.generation !== generation) return;
      try {
        await session.start(() => this.committedOffset(topic, partition, heartbeat, session));
        if (session.starts > 1) this.producerRecreated(session);
      } catch (err) {
        this.backOff(session, payload, err, 'cannot recreate the producer');
        return;
      }
      if (this.rewound(session, resolveOffset)) return;
      records = this.pending(records.slice(index), session, resolveOffset);
      index = 0;
    }
    if (isRunning() && !isStale() && session.generation === generation) session.progress.caughtUp(BigInt(batch.lastOffset()) + 1n);
  }

  /**
   * An infrastructure fault (or an unknown Kafka outcome): pause this partition with capped exponential backoff,
   * and on resume start over with a fresh producer (its InitProducerId settles the previous transaction) from
   * the group's committed offset, not from the chunk's start (a commit whose reply was lost may have succeeded).
   */
  private backOff(session: PartitionSession, payload: Payload, error: unknown, what: string, kind = 'infrastructure'): void {
    session.infrastructureFailures++;
    session.progress.failed(error, kind);
    session.ready = false;
    const delay = retryDelay({ initialDelayMs: 200, multiplier: 2, maxDelayMs: this.options.consumer.maxRetryDelayMs }, session.infrastructureFailures);
    this.logger.warn(`${session.topic}[${session.partition}]: ${what} (${(error as Error)?.message ?? error}); partition paused for ${delay} ms, other partitions go on (failure ${session.infrastructureFailures} in a row)`);
    this.pauseFor(session, payload, delay);
  }

  /** Pauses this partition's fetches for `ms` while the other partitions go on; the batch must return now. */
  private pauseFor(session: PartitionSession, payload: Payload, ms: number): void {
    // Revoked while its worker ran: not this member's to pause (KafkaJS would keep it paused if it came back).
    if (!this.isCurrent(session)) return;
    session.cancelResume(true);
    session.resume = payload.pause();
    session.backoffBy = session.busyResume;
    session.progress.activity = 'backing-off';
    session.resumeTimer = setTimeout(() => session.cancelResume(true), ms);
    session.resumeTimer.unref?.();
  }

  /**
   * A retry tier's next record is not due: the partition is paused until it is (never a wait inside a unit of
   * work), then fetched again from its committed position. Waiting on a delay is not a stall.
   */
  private waitUntilDue(session: PartitionSession, payload: Payload, due: number, now: number): void {
    this.pauseFor(session, payload, Math.min(due - now, 2 ** 31 - 1));
    session.progress.delayedUntil(due);
  }

  /** A record moved to a retry tier: one debug line (the unit's summary counts them), and the metric. */
  private logRetry(topic: string, partition: number, record: ChunkRecord, handler: HandlerDefinition, tier: number, error: string): void {
    this.metrics?.retryMoved(handler.topic, tier);
    this.samples?.retryMoved(topic, partition);
    this.logger.debug(`retry ${JSON.stringify({ topic, partition, offset: record.offset, messageId: record.id.displayId, tier, to: handler.retryTopics!.topics[tier - 1], error: error.slice(0, 300) })}`);
  }

  /**
   * After a fenced commit: whether this member still owns the partition in the current generation. A
   * heartbeat refused for a rebalance (unknown member, illegal generation, rebalance in progress) means another
   * member may own it: `lost`. Accepted, and no assignment since the batch was fetched (every join bumps the
   * session's generation, and waits for the workers first: see drainWorkers): nobody else can have fenced it, `owned`.
   * Any other error (coordinator moving, timeout) says nothing: `unknown`.
   */
  private async ownership(payload: Payload, session: PartitionSession, generation: number): Promise<'owned' | 'lost' | 'unknown'> {
    try {
      await payload.heartbeat();
    } catch (err) {
      return OWNERSHIP_LOST.has((err as { type?: string })?.type ?? '') ? 'lost' : 'unknown';
    }
    return payload.isRunning() && !payload.isStale() && session.generation === generation ? 'owned' : 'lost';
  }

  private abandon(session: PartitionSession, error: unknown, what: string): void {
    this.logger.warn(`${session.topic}[${session.partition}]: ${what}`);
    session.progress.failed(error, 'fenced');
    session.progress.activity = 'fenced';
    session.fenced = true;
    void session.producer.close();
  }

  /** Counts a failure of a record run alone, in a short transaction of its own. */
  private async recordFailure(topic: string, partition: number, record: ChunkRecord, error: unknown): Promise<number> {
    const runner = this.dataSource.createQueryRunner();
    try {
      // Given up a second after the statement timeout, for a server that no longer answers (releaseClean then
      // closes the connection, whose statement never got its answer).
      return await withDeadline(
        (async () => {
          await runner.connect();
          await runner.startTransaction();
          await runner.query(unitSessionSettings(this.options));
          const failures = await this.inbox.recordFailure(
            runner,
            this.options.groupId,
            { ...record.id, offset: record.offset, topic, partition },
            describeFailure(error, reasonOf(error)),
          );
          await runner.commitTransaction();
          return failures;
        })(),
        this.options.inbox.statementTimeoutMs + 1000,
        'PostgreSQL',
      );
    } finally {
      await releaseClean(runner);
    }
  }

  /**
   * Runs a chunk as one unit of work: first without savepoints (two round trips per record fewer). A handler call
   * that fails there without having sent a statement on the unit's connection leaves the transaction untouched:
   * the unit goes on, that record's further attempts behind savepoints (UnitOfWork.invoke). One that fails after
   * its statements may have left anything in the transaction: the unit runs once more from scratch with a
   * savepoint around each handler attempt. The failing record's failed call counts as its first attempt in that
   * second run when it can (not a database error), so that it is not called once more than its retry policy
   * says; the records before it are called again (their work was rolled back).
   *
   * Such failures come in spells, and each would make its unit's records before it run twice: after one, the
   * partition's units run with savepoints from the start (`runsCarefully`) until CAREFUL_SPELL_MS pass without a
   * failed call, so that a failing record costs no other record a second call.
   */
  private async runUnit(session: PartitionSession, deps: UnitOfWorkDeps, chunk: ChunkRecord[]): Promise<Exclude<UnitOfWorkOutcome, { kind: 'run-carefully' }>> {
    let outcome: UnitOfWorkOutcome;
    if (this.runsCarefully(deps.handler, session)) {
      outcome = await new UnitOfWork({ ...deps, careful: true }, chunk).run();
      if (outcome.kind === 'committed' && outcome.stats.failedCalls > 0) session.carefulUntil = Date.now() + CAREFUL_SPELL_MS;
    } else {
      const first = await new UnitOfWork({ ...deps, careful: false }, chunk).run();
      if (first.kind !== 'run-carefully') return first;
      this.logger.debug(`${deps.topic}[${deps.partition}]: offsets ${chunk[0].offset}..${chunk[chunk.length - 1].offset} run again with savepoints: ${(first.error as Error)?.message}`);
      session.carefulUntil = Date.now() + CAREFUL_SPELL_MS;
      // Run again up to the failing record at least, and no further than a careful unit goes (when that is past
      // it): the records after it are the next unit's, run carefully too.
      const failedAt = first.carried ? chunk.findIndex((r) => r.offset === first.carried!.offset) : -1;
      const again = this.runsCarefully(deps.handler, session) ? chunk.slice(0, Math.max(failedAt + 1, CAREFUL_UNIT_MAX_RECORDS)) : chunk;
      outcome = await new UnitOfWork({ ...deps, careful: true, carried: first.carried }, again).run();
    }
    // A careful unit never asks for another run; were it to, its error is treated as the unit's failure.
    return outcome.kind === 'run-carefully' ? { kind: 'aborted', error: outcome.error } : outcome;
  }

  /**
   * Whether the partition's units run with savepoints from the start: during a spell of failures, and only for a
   * handler called record by record (a batch handler's one call per unit and key lanes' concurrency are worth
   * more than the second calls they cost when a record fails: those run optimistically always).
   */
  private runsCarefully(handler: HandlerDefinition, session: PartitionSession): boolean {
    if (handler.invokeBatch || (handler.ordering?.lanes ?? 1) > 1) return false;
    return session.carefulUntil > Date.now();
  }

  /** A partition's transactional producer initialised again (the first time is not logged): one structured line. */
  private producerRecreated(session: PartitionSession): void {
    this.metrics?.producerRecreated(session.topic);
    this.logger.log(`producer recreated ${JSON.stringify({ group: this.options.groupId, topic: session.topic, partition: session.partition, starts: session.starts, lastFailure: session.progress.snapshot(0).lastError?.kind ?? null })}`);
  }

  /** One structured warn line per dead letter, and an error line when a key gets parked (an operator must act). */
  private logDeadLetter(topic: string, partition: number, record: ChunkRecord, reason: DeadLetterReason, error: string, parked?: { key: string; parkedNow: boolean }): void {
    this.metrics?.deadLetter(topic, reason, parked?.parkedNow === true);
    this.samples?.deadLetter(topic, partition, parked?.parkedNow === true);
    const line = { topic, partition, offset: record.offset, messageId: record.id.displayId, reason, error: error.slice(0, 300) };
    this.logger.warn(`dead letter ${JSON.stringify(parked ? { ...line, parkedKey: parked.key } : line)}`);
    if (parked?.parkedNow) {
      this.logger.error(
        `key parked ${JSON.stringify({ group: this.options.groupId, topic, key: parked.key, partition, offset: record.offset, reason })}: later records of the key wait until an operator releases it (kafka-eo parked show ${topic} ${/^[\w.:@/-]+$/.test(parked.key) ? parked.key : JSON.stringify(parked.key)}; docs/operations.md)`,
      );
    }
  }

  /**
   * Drops the records below the session's committed floor (already done: their outputs must not be sent again)
   * and moves the fetch position to the floor (back by at most a transaction marker KafkaJS had passed).
   */
  private pending<T extends { offset: string }>(messages: T[], session: PartitionSession, resolveOffset: (offset: string) => void): T[] {
    const { skipped, resolveTo } = belowFloor(messages, session.floor);
    if (skipped === 0) return messages;
    resolveOffset(resolveTo!);
    this.logger.log(
      `${session.topic}[${session.partition}]: ${skipped} record(s) at offsets ${messages[0].offset}..${messages[skipped - 1].offset} fetched again below the committed offset ${session.floor}; skipped`,
    );
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

/**
 * How many of a batch's records (offsets ascend) lie below `floor`, and the offset to resolve so that the fetch
 * position is the floor: the offset before it, not the last record skipped, which may be lower (a batch fetched
 * from an old position, shorter than what was committed since).
 */
export function belowFloor(messages: ReadonlyArray<{ offset: string }>, floor: bigint): { skipped: number; resolveTo?: string } {
  const first = messages.findIndex((m) => BigInt(m.offset) >= floor);
  const skipped = first < 0 ? messages.length : first;
  return skipped === 0 ? { skipped } : { skipped, resolveTo: (floor - 1n).toString() };
}

type ChunkSizedRecord = SizedRecord;

/** How many records from `start` make the next chunk: at most `maxRecords`, and `maxBytes` of keys, values and headers (at least one record). */
export function chunkLength(records: ReadonlyArray<ChunkSizedRecord>, start: number, limits: { maxRecords: number; maxBytes: number }): number {
  // The spool drainer's caps, on one partition's records (so no per-topic limit).
  return drainBatchSize(records.slice(start, start + limits.maxRecords).map((r) => ({ topic: '', bytes: recordBytes(r) })), limits);
}

/** The application's brokers, for the commands an operator is told to run. */
function brokerList(brokers: unknown): string {
  return Array.isArray(brokers) ? brokers.join(',') : '<bootstrap-servers>';
}

/**
 * The connections of the module's pool the library may hold at once: one per partition handled at once (a
 * unit of work's transaction; every assigned partition counts, those of the retry tiers too, up to
 * `partitionsConsumedConcurrently`), two for its jobs (the replay worker's lock and step, the inbox retention),
 * and one for the outbox relay while it is the active one in this application (it holds its connection). The
 * application's own transactions (its HTTP requests, `Outbox.add`'s) come on top.
 */
export function connectionsNeeded(at: { assignedPartitions: number; partitionsConsumedConcurrently: number; outboxRelay: boolean }): { atOnce: number; needed: number } {
  const atOnce = Math.min(at.assignedPartitions, at.partitionsConsumedConcurrently);
  return { atOnce, needed: atOnce + 2 + (at.outboxRelay ? 1 : 0) };
}

/** How long a partition's units run with savepoints after its last failed handler call (see runUnit). */
export const CAREFUL_SPELL_MS = 10000;

/** Records of a unit run with savepoints from the start, at most: one subtransaction each (see onBatch). */
export const CAREFUL_UNIT_MAX_RECORDS = 64;
