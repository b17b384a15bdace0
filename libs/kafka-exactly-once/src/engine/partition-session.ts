import type { DeliveredOutputs } from './delivered-outputs';
import { PartitionProducer } from '../transaction/partition-producer';
import { PartitionProgress, type CommittedUnit } from './partition-progress';

/**
 * What this member knows about one assigned input partition: its transactional producer, the group's
 * committed offset as read right after that producer fenced any previous owner, how far records must run one
 * per unit of work (isolation), and its progress for health checks.
 */
export class PartitionSession {
  /**
   * Records below this offset are already committed: read after InitProducerId (so it is current), then moved
   * up by every unit of work this member commits. A record below it that is fetched again is never handled or
   * replayed: KafkaJS can deliver records a second time within one assignment (see `committed`).
   */
  floor = -1n;
  /**
   * Set when the library aborted a hanging transaction of this partition's own producer while reading the
   * committed offset: the next start takes the offset read as the floor even below the current one (what this
   * member committed past it may have been in the aborted transaction), and the fetch position goes back to it.
   */
  rewind = false;
  /** Set by a start that rewound, until the fetch position has been moved back. */
  rewound = false;
  /**
   * After such an abort (by this member or another): the outputs Kafka already holds committed, kept in PostgreSQL
   * and left out of replays until the partition is past them.
   */
  delivered?: DeliveredOutputs;
  ready = false;
  /** Another member owns the partition now: do nothing (and never re-init the producer) until reassigned. */
  fenced = false;
  /** After a fenced commit whose cause could not be told: check ownership before creating a new producer. */
  verifyOwnership = false;
  /** Bumped at every assignment, so a batch running across a rebalance notices and stops. */
  generation = 0;
  /** Records up to this offset run one per unit of work: a chunk that contained them failed. */
  isolateThrough = -1n;
  /**
   * Until then (ms since the epoch), units of work run with a savepoint around each handler call from the start:
   * a handler call failed a short while ago, and failures come in spells (a downstream away, a bad deploy). See
   * ExactlyOnceConsumer.runUnit.
   */
  carefulUntil = 0;
  /** Failed units of work in a row that were not blamed on one record (infrastructure), for the backoff. */
  infrastructureFailures = 0;
  /** How often its producer was initialised (more than once: recreated after a fault or a new assignment). */
  starts = 0;
  /** A retry tier's first record not handled yet, and when this member first saw it (its due time is capped by it). */
  private head?: { offset: string; seenAt: number };
  /** The partition's worker running a fetched batch (ExactlyOnceConsumer.onBatch), until it ends. */
  worker?: Promise<void>;
  /** Resumes the partition paused while its worker runs (one per worker: it also names the worker). */
  busyResume?: () => void;
  /** The busyResume of the worker whose backoff the pending resume timer ends. */
  backoffBy?: () => void;
  /** The timer that resumes the partition after a backoff, and what it calls. */
  resumeTimer?: NodeJS.Timeout;
  resume?: () => void;
  readonly progress: PartitionProgress;

  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly producer: PartitionProducer,
  ) {
    this.progress = new PartitionProgress(topic, partition);
  }

  /** Fences a previous owner (InitProducerId), then reads where the group really stands. */
  async start(readCommitted: () => Promise<bigint>): Promise<void> {
    this.ready = false;
    await this.producer.start();
    this.starts++;
    // Never below what this member committed itself: the group's offset moves back only by a plain commit
    // outside the protocol (KafkaJS resets a partition's offset that way after OffsetOutOfRange).
    const read = await readCommitted();
    if (this.rewind) {
      this.rewind = false;
      this.rewound = this.floor > read;
      this.floor = read;
    } else if (read > this.floor) this.floor = read;
    this.progress.startedAt(this.floor);
    this.ready = true;
  }

  /**
   * A unit of work committed up to `nextOffset`. KafkaJS fetches each partition from its leader's broker, one
   * fetcher per broker: when the leader moves, the new leader's fetcher may have asked for the partition from the
   * position read before the last commit, and gets the committed records again once the old fetcher's batch is
   * done. Their inbox rows hold the same offsets, and without this floor their outputs would be sent again.
   */
  committed(nextOffset: bigint, unit?: CommittedUnit): void {
    if (nextOffset > this.floor) this.floor = nextOffset;
    this.progress.committedUpTo(this.floor, Date.now(), unit);
  }

  /** When this member first saw the record at `offset` at the head of the partition (now, for a new head). */
  headSeenAt(offset: string, now: number): number {
    if (this.head?.offset !== offset) this.head = { offset, seenAt: now };
    return this.head.seenAt;
  }

  reassigned(): void {
    this.generation++;
    this.ready = false;
    this.fenced = false;
    this.verifyOwnership = false;
    this.isolateThrough = -1n;
    // Whatever was fetched before the rebalance is fetched again if it is still pending.
    this.progress.caughtUp();
  }

  /** No longer assigned to this member: a worker still running stops before its next unit of work. */
  revoked(): void {
    this.generation++;
    this.ready = false;
  }

  /** Drops a pending resume; with `resumeNow`, resumes the partition at once instead. */
  cancelResume(resumeNow = false): void {
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    this.resumeTimer = undefined;
    const resume = this.resume;
    this.resume = undefined;
    if (resumeNow) resume?.();
  }
}
