import { PartitionSamples, quantile } from './partition-samples';
import { sampleRows } from '../reporting/instance-reporter';

describe('PartitionSamples', () => {
  it('counts per partition between takes, and starts again after a take', () => {
    let now = 1_700_000_003_000;
    const samples = new PartitionSamples(() => now);
    for (let i = 1; i <= 100; i++) samples.unit('payments', 0, 2, i);
    samples.unit('payments', 1, 5, 7);
    samples.deadLetter('payments', 0, false);
    samples.deadLetter('payments', 0, true);
    samples.retryMoved('payments.retry.1', 0);
    const taken = samples.take();
    expect(taken.find((t) => t.topic === 'payments' && t.partition === 0)).toEqual({ topic: 'payments', partition: 0, at: 1_700_000_000_000, records: 200, units: 100, deadLetters: 2, parks: 1, retryMoves: 0, unitP50Ms: 50, unitP99Ms: 99 });
    expect(taken.find((t) => t.partition === 1)).toMatchObject({ records: 5, units: 1, unitP50Ms: 7, unitP99Ms: 7 });
    expect(taken.find((t) => t.topic === 'payments.retry.1')).toMatchObject({ retryMoves: 1, units: 0, unitP50Ms: null, unitP99Ms: null });
    expect(samples.take()).toEqual([]);
    // Counted in the bucket they happened in, whenever taken.
    samples.deadLetter('payments', 0, false);
    now += 10_000;
    samples.deadLetter('payments', 0, false);
    expect(samples.take().map((t) => [t.at, t.deadLetters])).toEqual([[1_700_000_000_000, 1], [1_700_000_010_000, 1]]);
  });

  it('keeps a bounded sample of durations at any rate', () => {
    const samples = new PartitionSamples();
    for (let i = 0; i < 100000; i++) samples.unit('t', 0, 1, i % 1000);
    const [t] = samples.take();
    expect(t.units).toBe(100000);
    // A uniform sample of 2,048 of them: the median of 0..999 repeated is near 500, the p99 near 990.
    expect(t.unitP50Ms!).toBeGreaterThan(400);
    expect(t.unitP50Ms!).toBeLessThan(600);
    expect(t.unitP99Ms!).toBeGreaterThan(950);
  });

  it('quantile by nearest rank', () => {
    expect(quantile([], 0.5)).toBeNull();
    expect(quantile([3], 0.99)).toBe(3);
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(quantile([1, 2, 3, 4], 1)).toBe(4);
  });
});

describe('sampleRows', () => {
  const health = (topic: string, partition: number, lag: number | null) => ({ topic, partition, lag }) as never;
  it('one row per assigned partition (its lag even without work), one per tally of a partition revoked since, and the outbox apart', () => {
    const tally = { deadLetters: 0, parks: 0, retryMoves: 0, unitP50Ms: 1, unitP99Ms: 1 };
    const rows = sampleRows(
      [health('t', 0, 5), health('t', 1, null)],
      [{ ...tally, topic: 't', partition: 0, at: 20_000, records: 3, units: 1 }, { ...tally, topic: 't', partition: 0, at: 10_000, records: 2, units: 1 }, { ...tally, topic: 't', partition: 7, at: 20_000, records: 1, units: 1 }],
      { waiting: 4, oldestAgeMs: 1500 },
      25_000,
    );
    expect(rows.map((r) => [r.topic, r.partition, r.at, r.lag, r.tally?.records ?? 0, r.outbox?.waiting ?? null])).toEqual([
      ['t', 0, 20_000, 5, 3, null],
      ['t', 1, 20_000, null, 0, null],
      ['t', 0, 10_000, null, 2, null],
      ['t', 7, 20_000, null, 1, null],
      ['', -1, 20_000, null, 0, 4],
    ]);
  });
});
