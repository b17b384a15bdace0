import { PartitionProgress } from './partition-progress';

describe('partition progress', () => {
  it('is stalled only when fetched work waits longer than stallAfterMs without a commit', () => {
    const p = new PartitionProgress('payments', 3);
    p.startedAt(10n);
    p.fetched('15', undefined, 1000);
    expect(p.snapshot(5000, 4000)).toMatchObject({ stalled: false, waitingMs: 3000, lag: 5, committedOffset: '10', activity: 'working' });
    p.failed(new Error('lock timeout'), 'infrastructure', 4500);
    expect(p.snapshot(5000, 6001)).toMatchObject({ stalled: true, consecutiveFailures: 1, lastError: { message: 'lock timeout', kind: 'infrastructure' } });
    p.committedUpTo(12n, 7000); // progress restarts the clock
    expect(p.snapshot(5000, 8000)).toMatchObject({ stalled: false, waitingMs: 1000, lag: 3, consecutiveFailures: 0 });
    p.caughtUp();
    expect(p.snapshot(5000, 100000)).toMatchObject({ stalled: false, waitingMs: null, activity: 'idle' });
  });

  it('does not count a retry tier waiting on its delay as stalled, and keeps its due time until it caught up', () => {
    const p = new PartitionProgress('payments.retry.1', 0);
    p.startedAt(0n);
    p.fetched('4', undefined, 1000);
    p.headDue(60000);
    p.delayedUntil(60000);
    expect(p.snapshot(5000, 50000)).toMatchObject({ stalled: false, waitingMs: null, activity: 'delaying', nextDueAt: new Date(60000).toISOString() });
    p.fetched('4', undefined, 60001); // resumed: the due time stays (in the past) until the record is handled
    expect(p.snapshot(5000, 90000)).toMatchObject({ activity: 'working', nextDueAt: new Date(60000).toISOString(), stalled: true });
    p.caughtUp();
    expect(p.snapshot(5000, 90000)).toMatchObject({ nextDueAt: null, activity: 'idle' });
  });

  it('does not count a quiet partition as stalled', () => {
    const p = new PartitionProgress('payments', 0);
    expect(p.snapshot(1000, Date.now() + 1e6)).toMatchObject({ stalled: false, lag: null, committedOffset: null, lastCommitAt: null });
  });

  it('counts records still to handle: a caught-up partition ending in transaction markers has no lag', () => {
    const p = new PartitionProgress('payments', 0);
    p.startedAt(0n);
    // A transaction of records 0..4 and its commit marker at 5: high watermark 6.
    p.fetched('6', undefined, 1000);
    p.committedUpTo(5n, 1100);
    expect(p.snapshot(5000, 1200).lag).toBe(1); // the fetch is not done yet: the marker is not known to be passed
    p.caughtUp(6n);
    expect(p.snapshot(5000, 1200)).toMatchObject({ lag: 0, committedOffset: '5', highWatermark: '6' });
    // The next transaction's records arrive: they are lag again, its marker (fetched alone) is not.
    p.fetched('10', undefined, 2000);
    expect(p.snapshot(5000, 2000).lag).toBe(4);
    p.committedUpTo(9n, 2100);
    p.caughtUp(9n);
    expect(p.snapshot(5000, 2100).lag).toBe(1);
    p.passedThrough(10n, '10');
    expect(p.snapshot(5000, 2100).lag).toBe(0);
    // A restart (a rewind to the committed offset) forgets what was passed: until fetched again, the marker counts.
    p.startedAt(9n);
    expect(p.snapshot(5000, 2200).lag).toBe(1);
  });

  it('counts the lag of a partition the group never committed from the first record it fetched', () => {
    const p = new PartitionProgress('payments.retry.3', 0);
    p.startedAt(-1n);
    expect(p.snapshot(5000, 1000).lag).toBeNull();
    // Records 40..59 wait on a tier (their delay is not over): nothing is committed, all 20 are still to handle.
    p.fetched('60', '40', 1000);
    p.delayedUntil(20000);
    expect(p.snapshot(5000, 1000)).toMatchObject({ lag: 20, committedOffset: null, activity: 'delaying' });
    p.fetched('61', '40', 2000);
    expect(p.snapshot(5000, 2000).lag).toBe(21);
    p.committedUpTo(50n, 3000);
    expect(p.snapshot(5000, 3000).lag).toBe(11);
  });

  it('reports units and records per second and the average commit latency over the last minute', () => {
    const p = new PartitionProgress('payments', 0, 0);
    expect(p.snapshot(5000, 0)).toMatchObject({ unitsPerSecond: 0, recordsPerSecond: 0, commitLatencyMs: null });
    p.committedUpTo(100n, 1000, { records: 100, commitMs: 10 });
    p.committedUpTo(300n, 2000, { records: 200, commitMs: 30 });
    // Assigned 4 s ago: two units in 4 s.
    expect(p.snapshot(5000, 4000)).toMatchObject({ unitsPerSecond: 0.5, recordsPerSecond: 75, commitLatencyMs: 20 });
    // A minute later the first unit is out of the window, and the window is a full minute.
    p.committedUpTo(310n, 61500, { records: 10, commitMs: 4 });
    expect(p.snapshot(5000, 61500)).toMatchObject({ unitsPerSecond: 0.03, recordsPerSecond: 3.5, commitLatencyMs: 17 });
    // A commit without a unit (the floor read at a start) counts for neither.
    p.committedUpTo(310n, 200000);
    expect(p.snapshot(5000, 200000)).toMatchObject({ unitsPerSecond: 0, recordsPerSecond: 0, commitLatencyMs: null });
  });
});
