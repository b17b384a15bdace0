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

  it('does not count a quiet partition as stalled', () => {
    const p = new PartitionProgress('payments', 0);
    expect(p.snapshot(1000, Date.now() + 1e6)).toMatchObject({ stalled: false, lag: null, committedOffset: null, lastCommitAt: null });
  });
});
