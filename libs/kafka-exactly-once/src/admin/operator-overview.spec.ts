import { PartitionProgress } from '../engine/partition-progress';
import { activityOf } from './operator-overview';

const partition = (set: (p: PartitionProgress) => void, now = 100000) => {
  const p = new PartitionProgress('payments', 0, 0);
  p.startedAt(0n);
  set(p);
  return activityOf(p.snapshot(60000, now));
};

describe('operator overview', () => {
  it('reads each partition state in an operator\'s words, with the way out of a stall', () => {
    expect(partition(() => undefined)).toEqual({ state: 'idle', reason: null, wayOut: null });
    expect(partition((p) => p.fetched('10', undefined, 99000)).state).toBe('consuming');
    const infrastructure = partition((p) => {
      p.fetched('10', undefined, 1000);
      p.failed(new Error('connect ECONNREFUSED 127.0.0.1:5432'), 'infrastructure', 2000);
    });
    expect(infrastructure).toMatchObject({ state: 'stalled', reason: expect.stringContaining('ECONNREFUSED'), wayOut: expect.stringContaining('tried again without end') });
    const refused = partition((p) => {
      p.fetched('10', undefined, 1000);
      p.failed(new Error('refused'), 'outputs-refused', 2000);
    });
    expect(refused.wayOut).toContain('kafka-eo outputs divert');
    const slow = partition((p) => p.fetched('10', undefined, 1000));
    expect(slow).toMatchObject({ state: 'stalled', reason: 'records have waited 99 s without a commit', wayOut: expect.stringContaining('stallAfterMs') });
    expect(partition((p) => p.delayedUntil(200000))).toEqual({ state: 'waiting on a retry tier', reason: `its next record is due at ${new Date(200000).toISOString()}`, wayOut: null });
    expect(partition((p) => (p.activity = 'fenced')).state).toBe('fenced');
  });
});
