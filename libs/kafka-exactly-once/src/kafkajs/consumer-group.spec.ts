import { markBusy, registerDrain } from '../client/group-drains';
import { BUSY_FETCH_WAIT_MS, CorrectedConsumerGroup } from './consumer-group';

// KafkaJS's own ConsumerGroup and SubscriptionState, without a cluster: what the fix changes is whether and how
// long a fetch waits before it goes to the broker.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const ConsumerGroup = require('kafkajs/src/consumer/consumerGroup');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const SubscriptionState = require('kafkajs/src/consumer/subscriptionState');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const SeekOffsets = require('kafkajs/src/consumer/seekOffsets');

const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/** A ConsumerGroup of `groupId` assigned partitions 0 and 1 of `t`, both led by broker 1; its broker fetch records the wait it was given. */
function group(groupId: string, base: { prototype: object } = CorrectedConsumerGroup) {
  const g = Object.create(base.prototype);
  Object.assign(g, { groupId, maxWaitTime: 300, logger, subscriptionState: new SubscriptionState(), seekOffset: new SeekOffsets(), brokerWaits: [] as number[] });
  g.subscriptionState.assign([{ topic: 't', partitions: [0, 1] }]);
  g.filterPartitionsByNode = (_nodeId: number, tps: unknown) => tps;
  // The first thing KafkaJS's fetch does; stopping there shows the wait it would ask the broker for.
  g.cluster = {
    refreshMetadataIfNecessary: async () => {
      g.brokerWaits.push(g.maxWaitTime);
      throw new Error('no broker in this test');
    },
  };
  g.recoverFromFetch = async () => undefined;
  return g;
}

describe('CorrectedConsumerGroup', () => {
  it("leaves KafkaJS's ConsumerGroup as it is: its fetch with every partition paused goes to the broker", async () => {
    expect(Object.getPrototypeOf(CorrectedConsumerGroup.prototype)).toBe(ConsumerGroup.prototype);
    const g = group('stock', ConsumerGroup);
    g.pause([{ topic: 't', partitions: [0, 1] }]);
    await g.fetch(1);
    expect(g.brokerWaits).toEqual([300]);
  });

  it('goes to the broker with the long poll while some partition is active and none is busy', async () => {
    const g = group('idle');
    g.pause([{ topic: 't', partitions: [0] }]);
    await expect(g.fetch(1)).resolves.toEqual([]);
    expect(g.brokerWaits).toEqual([300]);
  });

  it(`asks the broker to hold a fetch at most ${BUSY_FETCH_WAIT_MS} ms while a partition of the group is busy, and the long poll again after`, async () => {
    const g = group('busy');
    g.pause([{ topic: 't', partitions: [0] }]);
    markBusy('busy', 't', 0, 1);
    await g.fetch(1);
    markBusy('busy', 't', 0, -1);
    await g.fetch(1);
    // A busy partition (resumed here, so that its broker's fetch goes out) that another broker leads leaves this
    // broker's long poll alone.
    g.resume([{ topic: 't', partitions: [0] }]);
    g.filterPartitionsByNode = (nodeId: number, tps: Array<{ topic: string; partitions: number[] }>) => tps.map(({ topic, partitions }) => ({ topic, partitions: partitions.filter((p) => p % 2 === nodeId % 2) }));
    markBusy('busy', 't', 0, 1);
    await g.fetch(1);
    await g.fetch(2);
    markBusy('busy', 't', 0, -1);
    expect(g.brokerWaits).toEqual([BUSY_FETCH_WAIT_MS, 300, 300, BUSY_FETCH_WAIT_MS]);
  });

  it('with every partition paused, waits until one is resumed (not the whole maxWaitTime), without asking the broker', async () => {
    const g = group('all-paused');
    g.pause([{ topic: 't', partitions: [0, 1] }]);
    const started = Date.now();
    const fetched = g.fetch(1);
    setTimeout(() => g.resume([{ topic: 't', partitions: [1] }]), 30);
    await expect(fetched).resolves.toEqual([]);
    expect(Date.now() - started).toBeLessThan(250);
    expect(g.brokerWaits).toEqual([]);
    // Partition 1 is active again: the next fetch goes to the broker.
    await g.fetch(1);
    expect(g.brokerWaits).toEqual([300]);
  });

  it("with every partition paused and a seek pending, runs KafkaJS's fetch, which carries the seek out (admin setOffsets relies on it)", async () => {
    const g = group('seeking');
    g.pause([{ topic: 't', partitions: [0, 1] }]);
    g.seek({ topic: 't', partition: 0, offset: '0' });
    await g.fetch(1);
    expect(g.brokerWaits).toEqual([300]);
  });

  it('with every partition paused and none resumed, returns nothing after maxWaitTime (the runner heartbeats then)', async () => {
    const g = group('paused-long');
    g.pause([{ topic: 't', partitions: [0, 1] }]);
    const started = Date.now();
    await expect(g.fetch(1)).resolves.toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(g.brokerWaits).toEqual([]);
  });

  it("waits for its group's drains before it joins or rejoins, not for other groups' ones, and not after the undo", async () => {
    const events: string[] = [];
    const g = group('draining');
    // What KafkaJS's joinAndSync does first: the join and sync, in its retrier.
    g.retrier = async () => events.push('joined');
    const undo = registerDrain('draining', async () => {
      events.push('drain started');
      await new Promise((r) => setTimeout(r, 50));
      events.push('drain done');
    });
    const undoOther = registerDrain('another-group', async () => {
      events.push('other group drained');
    });
    await g.joinAndSync();
    expect(events).toEqual(['drain started', 'drain done', 'joined']);
    undo();
    undoOther();
    events.length = 0;
    await g.joinAndSync();
    expect(events).toEqual(['joined']);
  });

  it('waits for its group\'s drains, told the leaving member, before it leaves; sends no LeaveGroup and waits for nothing without a member id', async () => {
    const events: string[] = [];
    const g = group('leaving');
    g.memberId = 'member-1';
    // What KafkaJS's leave does: the LeaveGroup, then the member id forgotten.
    g.coordinator = {
      leaveGroup: async ({ memberId }: { memberId: string }) => {
        events.push(`left as ${memberId}`);
      },
    };
    const undo = registerDrain('leaving', async (leaving) => {
      events.push(`drain started (leaving: ${leaving})`);
      await new Promise((r) => setTimeout(r, 50));
      events.push('drain done');
    });
    const undoOther = registerDrain('another-group', async () => {
      events.push('other group drained');
    });
    await g.leave();
    expect(events).toEqual(['drain started (leaving: member-1)', 'drain done', 'left as member-1']);
    events.length = 0;
    await g.leave();
    expect(events).toEqual([]);
    undo();
    undoOther();
  });
});
