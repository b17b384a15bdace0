/** One partition's tally since the last take: what the console's charts are drawn from. */
export interface PartitionTally {
  topic: string;
  partition: number;
  /** The start of the SAMPLE_BUCKET_MS bucket its events happened in (ms since the epoch, this process's clock). */
  at: number;
  /** Records covered by the units of work committed. */
  records: number;
  /** Units of work committed (each is one PostgreSQL and one Kafka commit). */
  units: number;
  deadLetters: number;
  /** Keys parked (@OrderedEvent): a dead letter that parked its key counts here too. */
  parks: number;
  retryMoves: number;
  /** The units' durations (claim to Kafka commit), p50 and p99 in ms; null without units. */
  unitP50Ms: number | null;
  unitP99Ms: number | null;
}

/** The buckets events are counted in: a chart's step holds what happened in it, whenever it was reported. */
export const SAMPLE_BUCKET_MS = 10000;

/** Durations kept per partition between two takes: past it, a uniform sample of them (reservoir). */
const KEPT_DURATIONS = 2048;

interface Tally {
  records: number;
  units: number;
  deadLetters: number;
  parks: number;
  retryMoves: number;
  durations: number[];
  seen: number;
}

/** The value at quantile `q` (0..1) of sorted `values`, by nearest rank. */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank];
}

/**
 * The consumer's counts per partition between two reports of the instance (InstanceReporter): units, records,
 * dead letters, parks, retry moves and the units' durations. Counting is a few additions per unit of work; the
 * durations kept are bounded (KEPT_DURATIONS per partition, a uniform sample past it), so memory does not grow
 * with the rate. A take returns the tallies and starts new ones.
 */
export class PartitionSamples {
  private tallies = new Map<string, Tally & { topic: string; partition: number; at: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  unit(topic: string, partition: number, records: number, unitMs: number): void {
    const t = this.tallyOf(topic, partition);
    t.records += records;
    t.units++;
    t.seen++;
    if (t.durations.length < KEPT_DURATIONS) t.durations.push(unitMs);
    else {
      const slot = Math.floor(Math.random() * t.seen);
      if (slot < KEPT_DURATIONS) t.durations[slot] = unitMs;
    }
  }

  deadLetter(topic: string, partition: number, parked: boolean): void {
    const t = this.tallyOf(topic, partition);
    t.deadLetters++;
    if (parked) t.parks++;
  }

  retryMoved(topic: string, partition: number): void {
    this.tallyOf(topic, partition).retryMoves++;
  }

  /** The tallies since the last take, and new ones from now. */
  take(): PartitionTally[] {
    const taken = this.tallies;
    this.tallies = new Map();
    return [...taken.values()].map((t) => {
      const sorted = t.durations.sort((a, b) => a - b);
      const round = (x: number | null) => (x === null ? null : Math.round(x * 10) / 10);
      return {
        topic: t.topic,
        partition: t.partition,
        at: t.at,
        records: t.records,
        units: t.units,
        deadLetters: t.deadLetters,
        parks: t.parks,
        retryMoves: t.retryMoves,
        unitP50Ms: round(quantile(sorted, 0.5)),
        unitP99Ms: round(quantile(sorted, 0.99)),
      };
    });
  }

  private tallyOf(topic: string, partition: number): Tally & { topic: string; partition: number; at: number } {
    const at = Math.floor(this.now() / SAMPLE_BUCKET_MS) * SAMPLE_BUCKET_MS;
    const key = `${topic}\u0000${partition}\u0000${at}`;
    let t = this.tallies.get(key);
    if (!t) this.tallies.set(key, (t = { topic, partition, at, records: 0, units: 0, deadLetters: 0, parks: 0, retryMoves: 0, durations: [], seen: 0 }));
    return t;
  }
}
