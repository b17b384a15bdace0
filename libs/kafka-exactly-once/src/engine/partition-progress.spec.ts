import { PartitionProgress } from './partition-progress';

describe('partition progress', () => {
  it('is stalled only when fetched work waits longer than stallAfterMs without a commit', () => {
    const p = new PartitionProgress('payments', 3);
    p.startedAt(10n);
    p.fetched('15', 1000);
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
    p.fetched('4', 1000);
    p.headDue(60000);
    p.delayedUntil(60000);
    expect(p.snapshot(5000, 50000)).toMatchObject({ stalled: false, waitingMs: null, activity: 'delaying', nextDueAt: new Date(60000).toISOString() });
    p.fetched('4', 60001); // resumed: the due time stays (in the past) until the record is handled
    expect(p.snapshot(5000, 90000)).toMatchObject({ activity: 'working', nextDueAt: new Date(60000).toISOString(), stalled: true });
    p.caughtUp();
    expect(p.snapshot(5000, 90000)).toMatchObject({ nextDueAt: null, activity: 'idle' });
  });

  it('does not count a quiet partition as stalled', () => {
    const p = new PartitionProgress('payments', 0);
    expect(p.snapshot(1000, Date.now() + 1e6)).toMatchObject({ stalled: false, lag: null, committedOffset: null, lastCommitAt: null });
  });
});
