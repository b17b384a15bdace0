import { type CommittedRecords, recordDigest } from '../kafkajs';
import type { OutputRecord } from './output-record';

/**
 * The records a partition's own producer is found to have committed in Kafka after the library aborted a hanging
 * transaction of that producer (ExactlyOnceConsumer.committedOffset). The abort takes the group's offsets back,
 * and the records come again: a record whose inbox row holds outputs is replayed, and an output Kafka already
 * holds committed is not sent again (a broker crash can leave the commit markers written on the output
 * partitions and only the offsets' partition open). An output is left out only when a committed record of that
 * producer carries the very same bytes (topic, key, value, headers), and as many times as such records were found:
 * any other is sent, so that nothing is lost.
 */
export class DeliveredOutputs {
  private skippedCount = 0;
  private readonly left: Map<string, number>;
  /** By the offset of the record replayed: the digests it took (its outputs left out). */
  private readonly taken = new Map<string, string[]>();
  readonly found: number;

  /**
   * @param committed the digests of the committed records, counted
   * @param until the input partition's high watermark at the abort: no record at or past it can have outputs
   *   already, so once the partition has committed up to it the set is of no further use
   */
  constructor(
    committed: CommittedRecords,
    readonly until: bigint,
  ) {
    this.left = new Map(committed);
    let found = 0;
    for (const n of committed.values()) found += n;
    this.found = found;
  }

  /** Outputs left out so far. */
  get skipped(): number {
    return this.skippedCount;
  }

  /**
   * A replayed record's outputs less those already committed. A record takes its committed records once, at its
   * first replay: a unit of work that fails and runs again (its Kafka transaction aborted) leaves out the same ones.
   */
  undelivered(offset: string, outputs: OutputRecord[]): OutputRecord[] {
    let taken = this.taken.get(offset);
    if (!taken) {
      taken = [];
      for (const o of outputs) {
        const digest = recordDigest(o.topic, o.key, o.value, o.headers);
        const n = this.left.get(digest) ?? 0;
        if (n === 0) continue;
        if (n === 1) this.left.delete(digest);
        else this.left.set(digest, n - 1);
        taken.push(digest);
      }
      this.taken.set(offset, taken);
      this.skippedCount += taken.length;
    }
    if (taken.length === 0) return outputs;
    const pending = [...taken];
    return outputs.filter((o) => {
      const at = pending.indexOf(recordDigest(o.topic, o.key, o.value, o.headers));
      if (at < 0) return true;
      pending.splice(at, 1);
      return false;
    });
  }
}
