import { connectionsNeeded } from './exactly-once.consumer';

describe('the connections the library may hold at once', () => {
  it('counts every partition handled at once, the retry tiers\' too, its two jobs and the outbox relay when it runs here', () => {
    // A topic of 6 partitions with 3 retry tiers: 24 partitions assigned to a single member.
    expect(connectionsNeeded({ assignedPartitions: 6 * 4, partitionsConsumedConcurrently: 64, outboxRelay: false })).toEqual({ atOnce: 24, needed: 26 });
    expect(connectionsNeeded({ assignedPartitions: 6 * 4, partitionsConsumedConcurrently: 64, outboxRelay: true })).toEqual({ atOnce: 24, needed: 27 });
    // Never more partitions at once than partitionsConsumedConcurrently.
    expect(connectionsNeeded({ assignedPartitions: 100, partitionsConsumedConcurrently: 10, outboxRelay: true })).toEqual({ atOnce: 10, needed: 13 });
    expect(connectionsNeeded({ assignedPartitions: 0, partitionsConsumedConcurrently: 64, outboxRelay: false })).toEqual({ atOnce: 0, needed: 2 });
  });
});
