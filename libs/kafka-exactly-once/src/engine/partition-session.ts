import { PartitionProducer } from '../transaction/partition-producer';

/**
 * What this member knows about one assigned input partition: its transactional producer and the group's
 * committed offset as read right after that producer fenced any previous owner.
 */
export class PartitionSession {
  /** Records below this offset are already committed (read after InitProducerId, so it is current). */
  floor = -1n;
  ready = false;
  /** Another member owns the partition now: do nothing (and never re-init the producer) until reassigned. */
  fenced = false;
  /** Bumped at every assignment, so a batch running across a rebalance notices and stops. */
  generation = 0;

  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly producer: PartitionProducer,
  ) {}

  /** Fences a previous owner (InitProducerId), then reads where the group really stands. */
  async start(readCommitted: () => Promise<bigint>): Promise<void> {
    this.ready = false;
    await this.producer.start();
    this.floor = await readCommitted();
    this.ready = true;
  }

  reassigned(): void {
    this.generation++;
    this.ready = false;
    this.fenced = false;
  }
}
