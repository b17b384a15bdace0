/** A record as the budget measures it: its key, value and headers. */
export type SizedRecord = { key?: Buffer | null; value: Buffer | null; headers?: Record<string, Buffer | string | Array<Buffer | string> | undefined> };

/** Bytes of a record's key, value and headers (names and values), as the unit of work holds and records them. */
export function recordBytes(record: SizedRecord): number {
  let bytes = (record.key?.length ?? 0) + (record.value?.length ?? 0);
  const headers = record.headers;
  if (!headers) return bytes;
  // Once per fetched record: no array or entry pair made for it.
  for (const name of Object.keys(headers)) {
    bytes += name.length;
    const value = headers[name];
    if (Array.isArray(value)) for (const v of value) bytes += v?.length ?? 0;
    else bytes += value?.length ?? 0;
  }
  return bytes;
}

/** Bytes of a fetched batch's records (recordBytes of each). */
export function batchBytes(records: ReadonlyArray<SizedRecord>): number {
  let bytes = 0;
  for (const record of records) bytes += recordBytes(record);
  return bytes;
}

/**
 * The bound on the bytes a consumer holds across its partitions (`consumer.maxBytesInFlight`): the records of every
 * batch handed to the engine and not done yet (fetched and decoded, waiting for its partition's worker, or in its
 * units of work). The engine holds a batch's bytes when the driver hands it over and releases them when its worker
 * ends. A driver asks each fetch for at most `grant()` bytes (the fetch-wide limit of a Fetch request) and, when
 * nothing is left, waits for a release instead of fetching: partitions wait, no record is skipped.
 *
 * Kafka answers a fetch with at least one record batch whatever its limit (KIP-74), so what is held can pass the bound
 * by one record batch; never by more, one broker's fetch at a time. Fetches to several brokers at once each reserve
 * what they were granted until the same fetcher asks again (by then the driver has handed over what came back).
 */
export class FetchBudget {
  private heldBytes = 0;
  private peak = 0;
  private readonly reserved = new Map<unknown, number>();
  private readonly waiters = new Set<() => void>();

  constructor(readonly limit: number) {}

  /** Bytes of the batches held now. */
  get held(): number {
    return this.heldBytes;
  }

  /** The most bytes held at once since the budget was made. */
  get peakHeld(): number {
    return this.peak;
  }

  /** A batch of `bytes` handed over: held until release(bytes). */
  hold(bytes: number): void {
    this.heldBytes += bytes;
    if (this.heldBytes > this.peak) this.peak = this.heldBytes;
  }

  /** A batch held by hold(bytes) is done with: fetches waiting for room go on. */
  release(bytes: number): void {
    this.heldBytes = Math.max(0, this.heldBytes - bytes);
    for (const wake of [...this.waiters]) wake();
  }

  /**
   * The bytes the next fetch of `fetcher` (a broker's fetch loop) may ask for: the bound less what is held and what
   * the other fetchers' fetches may still bring. 0: wait (waitForRoom) rather than fetch.
   */
  grant(fetcher: unknown): number {
    this.reserved.delete(fetcher);
    let others = 0;
    for (const bytes of this.reserved.values()) others += bytes;
    const room = this.limit - this.heldBytes - others;
    if (room <= 0) return 0;
    this.reserved.set(fetcher, room);
    return room;
  }

  /** Forgets the reservations (a consumer started anew: none of its fetches is in flight). */
  clearReservations(): void {
    this.reserved.clear();
  }

  /** Resolves at the next release, or after `ms`. */
  waitForRoom(ms: number): Promise<void> {
    return wokenOrAfter(this.waiters, ms);
  }
}

/** Resolves when a function of `waiters` is called (each wakes all of them), or after `ms`. */
export function wokenOrAfter(waiters: Set<() => void>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      waiters.delete(done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    waiters.add(done);
  });
}
