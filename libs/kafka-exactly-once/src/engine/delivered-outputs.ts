import type { SessionSource } from '../database/database.port';
import { CommittedOutputsRepository, type GroupPartition } from '../inbox/committed-outputs.repository';
import { recordDigest, takeCommitted } from '../kafkajs';
import type { OutputRecord } from './output-record';

/** `outputs` less one output of each digest in `taken` (as many of a digest as it is taken). */
export function leaveOut(outputs: OutputRecord[], taken: readonly string[]): OutputRecord[] {
  if (taken.length === 0) return outputs;
  const pending = [...taken];
  return outputs.filter((o) => {
    const at = pending.indexOf(recordDigest(o.topic, o.key, o.value, o.headers));
    if (at < 0) return true;
    pending.splice(at, 1);
    return false;
  });
}

/**
 * The records a partition's own producer is found to have committed in Kafka when the library aborts a hanging
 * transaction of that producer (ExactlyOnceConsumer.committedOffset), as the replay of the partition sees them. The
 * abort takes the group's offsets back, and the records come again: a record whose inbox row holds outputs is
 * replayed, and an output Kafka already holds committed is not sent again (a broker crash can leave the commit
 * markers written on the output partitions and only the offsets' partition open). An output is left out only when a
 * committed record of that producer carries the very same bytes (topic, key, value, headers), and as many times as
 * such records were found: any other is sent, so that nothing is lost.
 *
 * What the abort found is kept in PostgreSQL (CommittedOutputsRepository), recorded before the abort, so that
 * whichever member replays the records finds it: this one, or another after a rebalance or a crash. A record takes
 * its share in its unit of work's transaction, once: the record run again (its Kafka transaction aborted, or its
 * unit of work run again after PostgreSQL committed) leaves out the same outputs, and a unit of work rolled back
 * takes nothing.
 */
export class DeliveredOutputs {
  private readonly repository = new CommittedOutputsRepository();
  readonly where: GroupPartition;
  /** The partition's recorded read, as last asked since the partition started here (null: none; undefined: not asked). */
  private known?: { until: bigint } | null;
  /** Outputs left out by this member, by the offset of the record replayed. */
  private readonly leftOut = new Map<string, number>();

  constructor(
    private readonly source: SessionSource,
    group: string,
    topic: string,
    partition: number,
  ) {
    this.where = { group, topic, partition };
  }

  /**
   * The partition (re)starts on this member: a member that owned it meanwhile, or this one's abort about to be,
   * may have recorded a read since it was last asked.
   */
  restart(): void {
    this.known = undefined;
  }

  /** Below this offset, replayed records may find outputs already committed (known once a replay asked). */
  get until(): bigint | undefined {
    return this.known?.until;
  }

  /** Outputs this member left out of replays since the read was recorded. */
  get skipped(): number {
    let n = 0;
    for (const count of this.leftOut.values()) n += count;
    return n;
  }

  /**
   * A replayed record's outputs less those already committed, in the unit of work's transaction (`db`). A record
   * takes its committed records once, at its first replay: run again, it leaves out the same ones.
   */
  async undelivered(db: { query(sql: string, params?: unknown[]): Promise<any> }, offset: string, outputs: OutputRecord[]): Promise<OutputRecord[]> {
    if (outputs.length === 0) return outputs;
    if (this.known === undefined) {
      const until = await this.repository.until(db, this.where);
      this.known = until === undefined ? null : { until };
    }
    if (this.known === null || BigInt(offset) >= this.known.until) return outputs;
    const digests = outputs.map((o) => recordDigest(o.topic, o.key, o.value, o.headers));
    const found = await this.repository.lookUp(db, this.where, offset, digests);
    let taken = found.taken;
    if (!taken) {
      taken = takeCommitted(found.left, digests);
      if (taken.length > 0) await this.repository.take(db, this.where, offset, taken);
    }
    this.leftOut.set(offset, taken.length);
    return leaveOut(outputs, taken);
  }

  /**
   * The partition has committed up to `committed`: reads no record at or past it can use are deleted (inbox
   * retention deletes what is left when this fails).
   */
  async forget(committed: bigint): Promise<void> {
    await this.repository.forget(this.source, this.where, committed);
    this.known = undefined;
    this.leftOut.clear();
  }

  /** Records a read (before the abort it is for), merged into what earlier ones left: see CommittedOutputsRepository.record. */
  async record(until: bigint, committed: ReadonlyMap<string, number>): Promise<void> {
    await this.repository.record(this.source, this.where, until, committed);
    this.known = undefined;
    this.leftOut.clear();
  }
}
