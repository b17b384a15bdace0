/**
 * How many reads in a row of what a hanging transaction's producer already committed may fail or stop short before
 * the library aborts that transaction anyway.
 */
export const COMMITTED_READS_BEFORE_ABORT = 3;

/** What the library does with a hanging transaction of its own producer after a read of what that producer committed. */
export type AfterCommittedRead =
  /** The read was whole: the transaction is aborted now. */
  | { action: 'abort' }
  /** The read was not whole: the transaction is left open (it holds the partition, or the relay) and read again later. */
  | { action: 'read-again'; reads: number; of: number }
  /** The last of COMMITTED_READS_BEFORE_ABORT reads in a row that were not whole: aborted anyway, what was not read sent again. */
  | { action: 'abort-anyway'; reads: number };

/**
 * When the library aborts a hanging transaction of its own producer (a partition's, or the outbox relay's): after a
 * whole read of what that producer committed (kept first where the next replay or batch finds it), or after
 * COMMITTED_READS_BEFORE_ABORT reads in a row that were not whole. An abort after a read that was not whole sends
 * again the outputs the read did not find (duplicates with the same message ids, never a loss); waiting holds the
 * partition (or the relay) back meanwhile, hence the bound. Reads are counted per place (a partition, the relay)
 * and transaction, in this process.
 */
export class HangingAbortPolicy {
  private readonly reads = new Map<string, { transaction: string; reads: number; at: number }>();

  constructor(private readonly readsBeforeAbort = COMMITTED_READS_BEFORE_ABORT) {}

  /** Whether `transaction` may be read again at `place`: no read of it that was not whole ended less than `spacingMs` ago. */
  mayRead(place: string, transaction: string, spacingMs: number, now = Date.now()): boolean {
    const last = this.reads.get(place);
    return !last || last.transaction !== transaction || now - last.at >= spacingMs;
  }

  /** After a read of `transaction` at `place`, `whole` or not: what to do with the transaction. */
  afterRead(place: string, transaction: string, whole: boolean, now = Date.now()): AfterCommittedRead {
    if (whole) {
      this.reads.delete(place);
      return { action: 'abort' };
    }
    const last = this.reads.get(place);
    const reads = last?.transaction === transaction ? last.reads + 1 : 1;
    // Kept at the bound too: when the abort itself fails, the next read aborts anyway again.
    this.reads.set(place, { transaction, reads, at: now });
    return reads >= this.readsBeforeAbort ? { action: 'abort-anyway', reads } : { action: 'read-again', reads, of: this.readsBeforeAbort };
  }

  /** The transaction at `place` is ended: a later one starts its count again. */
  ended(place: string): void {
    this.reads.delete(place);
  }
}
