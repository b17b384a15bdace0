import { cacheCoordinators as cache, COORDINATOR_CACHE_MS, COORDINATOR_RETRIES_MS } from './coordinator-cache';
import type { KafkaJsBroker, KafkaJsCluster } from './kafkajs-internals';

/** A broker whose coordinator requests answer as told, and record what they were asked. */
function broker(name: string, answer: (request: string) => Promise<unknown> = async () => ({ ok: name })) {
  const asked: string[] = [];
  const b = {
    name,
    asked,
    addPartitionsToTxn: (args: unknown) => (asked.push(`addPartitionsToTxn ${JSON.stringify(args)}`), answer('addPartitionsToTxn')),
    endTxn: () => (asked.push('endTxn'), answer('endTxn')),
    initProducerId: () => (asked.push('initProducerId'), answer('initProducerId')),
    txnOffsetCommit: () => (asked.push('txnOffsetCommit'), answer('txnOffsetCommit')),
    metadata: () => (asked.push('metadata'), answer('metadata')),
  };
  return b;
}

function clusterFinding(...answers: Array<ReturnType<typeof broker>>) {
  const lookups: Array<{ groupId: string; coordinatorType?: number }> = [];
  const cluster = {
    findGroupCoordinator: async (args: { groupId: string; coordinatorType?: number }) => {
      lookups.push(args);
      return answers[Math.min(lookups.length - 1, answers.length - 1)] as unknown as KafkaJsBroker;
    },
  } as unknown as KafkaJsCluster;
  return { cluster, lookups };
}

/** No real pauses: the pauses asked for are recorded. */
const paused: number[] = [];
let stopped = false;
const cacheCoordinators = (cluster: KafkaJsCluster, now?: () => number) => cache(cluster, { now, sleep: async (ms) => void paused.push(ms), stopped: () => stopped });
beforeEach(() => {
  paused.splice(0);
  stopped = false;
});

const moved = () => Promise.reject(Object.assign(new Error('This is not the correct coordinator for this group'), { type: 'NOT_COORDINATOR_FOR_GROUP' }));

describe('cacheCoordinators', () => {
  it('asks for a coordinator once per id and type, and sends every request of a transaction to the broker found', async () => {
    const one = broker('one');
    const { cluster, lookups } = clusterFinding(one);
    cacheCoordinators(cluster);
    for (let i = 0; i < 3; i++) {
      const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
      await coordinator.addPartitionsToTxn({ i });
      await coordinator.endTxn();
    }
    await cluster.findGroupCoordinator({ groupId: 'group-a' }); // a group's coordinator: another key
    await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 0 }); // the same name as a group: another key
    expect(lookups).toEqual([{ groupId: 'txn-a', coordinatorType: 1 }, { groupId: 'group-a' }, { groupId: 'txn-a', coordinatorType: 0 }]);
    expect(one.asked).toEqual(['addPartitionsToTxn {"i":0}', 'endTxn', 'addPartitionsToTxn {"i":1}', 'endTxn', 'addPartitionsToTxn {"i":2}', 'endTxn']);
  });

  it('asks again after COORDINATOR_CACHE_MS', async () => {
    let clock = 1000;
    const { cluster, lookups } = clusterFinding(broker('one'));
    cacheCoordinators(cluster, () => clock);
    await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 });
    clock += COORDINATOR_CACHE_MS - 1;
    await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 });
    expect(lookups).toHaveLength(1);
    clock += 1;
    await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 });
    expect(lookups).toHaveLength(2);
  });

  it('follows a coordinator that moved: the request goes once to the coordinator found afresh, which is kept', async () => {
    const old = broker('old', moved);
    const now = broker('new');
    const { cluster, lookups } = clusterFinding(old, now);
    cacheCoordinators(cluster);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(coordinator.endTxn()).resolves.toEqual({ ok: 'new' });
    expect(old.asked).toEqual(['endTxn']);
    expect(now.asked).toEqual(['endTxn']);
    const again = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await again.txnOffsetCommit();
    expect(now.asked).toEqual(['endTxn', 'txnOffsetCommit']);
    expect(lookups).toHaveLength(2);
    expect(paused).toEqual([20]);
  });

  it('forgets a coordinator whose request failed otherwise, and hands the failure to the caller without sending it again', async () => {
    const failure = Object.assign(new Error('Connection closed'), { name: 'KafkaJSConnectionClosedError' });
    const flaky = broker('flaky', () => Promise.reject(failure));
    const other = broker('other');
    const { cluster, lookups } = clusterFinding(flaky, other);
    cacheCoordinators(cluster);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(coordinator.endTxn()).rejects.toBe(failure);
    expect(flaky.asked).toEqual(['endTxn']);
    expect(other.asked).toEqual([]);
    expect(lookups).toHaveLength(1);
    expect(paused).toEqual([]);
    expect(((await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as { name: string }).name).toBe('other'); // asked again
    expect(lookups).toHaveLength(2);
  });

  it('asks the same coordinator again after a pause while it loads, and keeps it', async () => {
    let calls = 0;
    const loading = broker('loading', async () => {
      if (++calls < 3) throw Object.assign(new Error('The coordinator is loading'), { type: 'GROUP_LOAD_IN_PROGRESS' });
      return { ok: 'loading' };
    });
    const { cluster, lookups } = clusterFinding(loading);
    cacheCoordinators(cluster);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(coordinator.endTxn()).resolves.toEqual({ ok: 'loading' });
    expect(loading.asked).toEqual(['endTxn', 'endTxn', 'endTxn']);
    expect(paused).toEqual([20, 40]);
    await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 });
    expect(lookups).toHaveLength(1);
  });

  it('gives up after five retries, hands the last failure to the caller and keeps no coordinator', async () => {
    const stuck = broker('stuck', moved);
    const { cluster, lookups } = clusterFinding(stuck);
    cacheCoordinators(cluster);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(coordinator.endTxn()).rejects.toMatchObject({ type: 'NOT_COORDINATOR_FOR_GROUP' });
    expect(stuck.asked).toHaveLength(1 + COORDINATOR_RETRIES_MS.length);
    expect(paused).toEqual(COORDINATOR_RETRIES_MS);
    expect(lookups).toHaveLength(1 + COORDINATOR_RETRIES_MS.length);
    await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 });
    expect(lookups).toHaveLength(2 + COORDINATOR_RETRIES_MS.length);
  });

  it('keeps a coordinator that answered as the coordinator (CONCURRENT_TRANSACTIONS), and sends InitProducerId again after a move', async () => {
    const busy = broker('busy', () => Promise.reject(Object.assign(new Error('concurrent'), { type: 'CONCURRENT_TRANSACTIONS' })));
    const { cluster, lookups } = clusterFinding(busy);
    cacheCoordinators(cluster);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(coordinator.addPartitionsToTxn({})).rejects.toMatchObject({ type: 'CONCURRENT_TRANSACTIONS' });
    expect(busy.asked).toHaveLength(1); // not this cache's to retry
    await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 });
    expect(lookups).toHaveLength(1);

    const old = broker('old', moved);
    const now = broker('new');
    const init = clusterFinding(old, now);
    cacheCoordinators(init.cluster);
    const c = (await init.cluster.findGroupCoordinator({ groupId: 'txn-b', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(c.initProducerId()).resolves.toEqual({ ok: 'new' });
    expect([old.asked, now.asked]).toEqual([['initProducerId'], ['initProducerId']]);
  });

  it('sends nothing again once the producer is disconnected', async () => {
    const old = broker('old', async () => {
      stopped = true; // disconnected while the request was out
      return moved();
    });
    const now = broker('new');
    const { cluster, lookups } = clusterFinding(old, now);
    cacheCoordinators(cluster);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(coordinator.endTxn()).rejects.toMatchObject({ type: 'NOT_COORDINATOR_FOR_GROUP' });
    expect(now.asked).toEqual([]);
    expect(lookups).toHaveLength(1);
  });

  it('starts no retry past COORDINATOR_RETRY_BUDGET_MS after the first send', async () => {
    let clock = 0;
    const slow = broker('slow', async () => {
      clock += 1500; // each answer takes 1.5 s
      return moved();
    });
    const { cluster } = clusterFinding(slow);
    cacheCoordinators(cluster, () => clock);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'txn-a', coordinatorType: 1 })) as unknown as ReturnType<typeof broker>;
    await expect(coordinator.endTxn()).rejects.toMatchObject({ type: 'NOT_COORDINATOR_FOR_GROUP' });
    expect(slow.asked).toHaveLength(2); // the first, and one retry started 1.5 s in
  });

  it('passes other requests and properties through untouched', async () => {
    const failing = broker('b', () => Promise.reject(Object.assign(new Error('moved'), { type: 'NOT_COORDINATOR_FOR_GROUP' })));
    const { cluster, lookups } = clusterFinding(failing);
    cacheCoordinators(cluster);
    const coordinator = (await cluster.findGroupCoordinator({ groupId: 'g' })) as unknown as ReturnType<typeof broker>;
    expect(coordinator.name).toBe('b');
    await expect(coordinator.metadata()).rejects.toThrow('moved'); // not a coordinator request: no lookup, no retry
    expect(lookups).toHaveLength(1);
    await cluster.findGroupCoordinator({ groupId: 'g' });
    expect(lookups).toHaveLength(1); // still kept
  });
});
