import type { OutputRecord } from './output-record';

/**
 * The outputs of a partition's own producer found committed in Kafka after the library aborted a hanging
 * transaction of that producer (ExactlyOnceConsumer.committedOffset). The abort takes the group's offsets back,
 * and the records come again: a record whose inbox row holds outputs is replayed, and those of its outputs whose
 * message ids are here are not sent again, for Kafka already holds them committed (a broker crash can leave the
 * commit markers written on the output partitions and the offsets' partition open). Only outputs with this very
 * topic and message id, written by that producer, are left out: any other is sent, so that nothing is lost.
 */
export class DeliveredOutputs {
  private skippedCount = 0;

  /**
   * @param ids per topic, the message ids found committed
   * @param until the input partition's high watermark at the abort: no record at or past it can have outputs
   *   already, so once the partition has committed up to it the set is of no further use
   */
  constructor(
    private readonly ids: ReadonlyMap<string, ReadonlySet<string>>,
    readonly until: bigint,
  ) {}

  /** How many message ids were found committed, all topics together. */
  get size(): number {
    let n = 0;
    for (const set of this.ids.values()) n += set.size;
    return n;
  }

  /** Outputs left out so far. */
  get skipped(): number {
    return this.skippedCount;
  }

  /** A replayed record's outputs less those already committed. */
  undelivered(outputs: OutputRecord[]): OutputRecord[] {
    const left = outputs.filter((o) => {
      const id = o.headers.find(([name]) => name === 'message-id')?.[1];
      return !(id && this.ids.get(o.topic)?.has(id.toString('utf8')));
    });
    this.skippedCount += outputs.length - left.length;
    return left;
  }
}
