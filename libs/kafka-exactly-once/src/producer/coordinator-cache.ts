import type { KafkaJsBroker, KafkaJsCluster } from './kafkajs-internals';

/** How long a coordinator found is used without asking again, unless a request to it fails first. */
export const COORDINATOR_CACHE_MS = 30000;

/** The requests a transactional producer sends to its transaction coordinator or to a group's coordinator. */
const COORDINATOR_REQUESTS = new Set(['addPartitionsToTxn', 'addOffsetsToTxn', 'txnOffsetCommit', 'endTxn']);

/**
 * Answers of a coordinator that did not act on the request (Kafka checks that it is the coordinator, and that it
 * has loaded the coordinator's partition, before anything else), so the request may go again: it moved (asked
 * afresh where it is now), or it is loading or not available yet (asked again after a pause).
 */
const MOVED = new Set(['NOT_COORDINATOR_FOR_GROUP', 'GROUP_COORDINATOR_NOT_AVAILABLE']);
const LOADING = new Set(['GROUP_LOAD_IN_PROGRESS']);
/** Pauses before each retry of a request whose coordinator moved or was loading: 20 ms doubling, about 0.6 s in all. */
export const COORDINATOR_RETRIES_MS = [20, 40, 80, 160, 320];

interface Entry {
  broker: KafkaJsBroker;
  view: KafkaJsBroker;
  at: number;
}

/**
 * Keeps the coordinators a transactional producer's cluster finds. KafkaJS asks for the transaction coordinator
 * (FindCoordinator) before each of a transaction's requests, and for the group's coordinator before
 * TxnOffsetCommit: a transaction with `sendOffsets` took nine round trips for its five requests (a consumer-app
 * run of 50,000 payments: 427 FindCoordinator requests for 102 transactions). A coordinator found is used for
 * `COORDINATOR_CACHE_MS` and forgotten as soon as a request to it fails. A request whose coordinator moved (a
 * leader election of `__transaction_state` or `__consumer_offsets`) or was still loading goes again, to the
 * coordinator found afresh, up to five times within about 0.6 s (KafkaJS sent none of these again: each failed
 * the transaction, and a failed commit is in doubt). Every other failure is the caller's, as before.
 */
export function cacheCoordinators(cluster: KafkaJsCluster, now: () => number = Date.now, sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms))): KafkaJsCluster {
  const find = cluster.findGroupCoordinator.bind(cluster);
  const entries = new Map<string, Entry>();

  const lookUp = async (args: { groupId: string; coordinatorType?: number }, key: string): Promise<Entry> => {
    const broker = await find(args);
    const entry: Entry = { broker, view: broker, at: now() };
    entry.view = new Proxy(broker, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof property !== 'string' || !COORDINATOR_REQUESTS.has(property) || typeof value !== 'function') return value;
        return async (...params: unknown[]) => {
          let coordinator = target;
          for (let retry = 0; ; retry++) {
            try {
              return await (coordinator === target ? value.apply(target, params) : (coordinator as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[property](...params));
            } catch (err) {
              const type = (err as { type?: string })?.type ?? '';
              if (!LOADING.has(type) && entries.get(key)?.broker === coordinator) entries.delete(key);
              if ((!MOVED.has(type) && !LOADING.has(type)) || retry >= COORDINATOR_RETRIES_MS.length) throw err;
              await sleep(COORDINATOR_RETRIES_MS[retry]);
              if (MOVED.has(type)) {
                const fresh = await lookUp(args, key);
                entries.set(key, fresh);
                coordinator = fresh.broker;
              }
            }
          }
        };
      },
    });
    return entry;
  };

  cluster.findGroupCoordinator = async (args) => {
    const key = `${args.coordinatorType ?? 0}\u0000${args.groupId}`;
    const cached = entries.get(key);
    if (cached && now() - cached.at < COORDINATOR_CACHE_MS) return cached.view;
    const entry = await lookUp(args, key);
    entries.set(key, entry);
    return entry.view;
  };
  return cluster;
}
