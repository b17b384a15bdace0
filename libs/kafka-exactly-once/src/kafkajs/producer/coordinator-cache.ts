import type { KafkaJsBroker, KafkaJsCluster } from './kafkajs-internals';

/** How long a coordinator found is used without asking again, unless a request to it fails first. */
export const COORDINATOR_CACHE_MS = 30000;

/** The requests a transactional producer sends to its transaction coordinator or to a group's coordinator. */
const COORDINATOR_REQUESTS = new Set(['initProducerId', 'addPartitionsToTxn', 'addOffsetsToTxn', 'txnOffsetCommit', 'endTxn']);

/**
 * Answers that the broker asked is not (or not yet) the coordinator: it moved (asked afresh where it is now), or it
 * is loading the coordinator's partition (asked again after a pause). Each of the requests above may go again after
 * them, as the Java client sends them again: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
 * InitProducerId are idempotent, and an EndTxn the old coordinator had begun to write is completed by the new one,
 * which answers the same EndTxn with success or CONCURRENT_TRANSACTIONS (the caller's, as before: a commit in doubt).
 */
const MOVED = new Set(['NOT_COORDINATOR_FOR_GROUP', 'GROUP_COORDINATOR_NOT_AVAILABLE']);
const LOADING = new Set(['GROUP_LOAD_IN_PROGRESS']);
/** Pauses before each retry of a request whose coordinator moved or was loading: 20 ms doubling, about 0.6 s in all. */
export const COORDINATOR_RETRIES_MS = [20, 40, 80, 160, 320];
/** No retry starts this long after the request was first sent (the lookups between retries have retries of their own). */
export const COORDINATOR_RETRY_BUDGET_MS = 2000;

interface Entry {
  broker: KafkaJsBroker;
  view: KafkaJsBroker;
  at: number;
}

export interface CoordinatorCacheOptions {
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** True once the producer is disconnected: no retry or lookup after that (it would connect the cluster again). */
  stopped?: () => boolean;
}

/**
 * Keeps the coordinators a transactional producer's cluster finds. KafkaJS asks for the transaction coordinator
 * (FindCoordinator) before each of a transaction's requests, and for the group's coordinator before
 * TxnOffsetCommit: a transaction with `sendOffsets` took nine round trips for its five requests (a consumer-app
 * run of 50,000 payments: 427 FindCoordinator requests for 102 transactions). A coordinator found is used for
 * `COORDINATOR_CACHE_MS`, and forgotten when a request to it fails without an answer of the broker (a connection
 * or a timeout) or with an answer that it is not the coordinator; other answers (CONCURRENT_TRANSACTIONS, say)
 * come from the coordinator and keep it. A request whose coordinator moved (a leader election of
 * `__transaction_state` or `__consumer_offsets`) or was still loading goes again, to the coordinator found afresh,
 * up to five times within about 0.6 s of pauses (KafkaJS sent none of these again but InitProducerId: each failed
 * the transaction, and a failed commit is in doubt), never once the producer is disconnected. Every other
 * failure is the caller's, as before.
 */
export function cacheCoordinators(cluster: KafkaJsCluster, options: CoordinatorCacheOptions = {}): KafkaJsCluster {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const stopped = options.stopped ?? (() => false);
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
          const started = now();
          let coordinator = target;
          for (let retry = 0; ; retry++) {
            try {
              return await (Reflect.get(coordinator, property) as (...a: unknown[]) => Promise<unknown>).apply(coordinator, params);
            } catch (err) {
              const type = (err as { type?: string })?.type;
              const answered = typeof type === 'string' && !MOVED.has(type); // the broker answered as the coordinator
              if (!answered && entries.get(key)?.broker === coordinator) entries.delete(key);
              const again = type !== undefined && (MOVED.has(type) || LOADING.has(type));
              if (!again || retry >= COORDINATOR_RETRIES_MS.length || stopped() || now() - started >= COORDINATOR_RETRY_BUDGET_MS) throw err;
              await sleep(COORDINATOR_RETRIES_MS[retry]);
              if (stopped()) throw err;
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
