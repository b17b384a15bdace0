const QUIET = Symbol('kafka-exactly-once:quiet-request-queue');

/** What the correction reads and changes of one KafkaJS RequestQueue (src/network/requestQueue/index.js). */
export interface RequestQueueInternals {
  pending: unknown[];
  throttledUntil: number;
  scheduleCheckPendingRequests(): void;
  [QUIET]?: true;
}

/**
 * NOTE: KafkaJS 2.2.4 (its last release) polls every broker connection's request queue every millisecond for
 * as long as the connection is open, even with nothing queued: `scheduleCheckPendingRequests` arms a timer of
 * `throttledUntil - Date.now()`, a large negative number when the connection is not throttled (Node clamps it to
 * 1 ms, and from Node 24 prints `TimeoutNegativeWarning: -1795978587633 is a negative number`), whose callback
 * arms it again. Upstream: https://github.com/tulios/kafkajs/issues/1751 and
 * https://github.com/tulios/kafkajs/issues/1704 (fixes proposed in #1755 and #1768, not released).
 *
 * This arms the timer of `queue` only when it has work: requests are waiting, or the broker throttles the
 * connection. Nothing is lost by that: a request that cannot be sent at once is queued by `push`, which calls this
 * method with the queue not empty (the timer is armed), and every response that frees a slot checks the queue
 * again. Measured: 12 idle producers used 224 ms of CPU in 5 s before, 48 ms after. Set on the queue itself (an
 * own property), for the connections of the clusters the library builds (cluster.ts): KafkaJS's RequestQueue
 * class, and the application's own clients, are left as they are.
 */
export function quietRequestQueue(queue: RequestQueueInternals): void {
  if (queue[QUIET]) return;
  const schedule = queue.scheduleCheckPendingRequests;
  queue.scheduleCheckPendingRequests = function (this: RequestQueueInternals) {
    if (this.pending.length === 0 && !(this.throttledUntil > Date.now())) return;
    schedule.call(this);
  };
  queue[QUIET] = true;
}

/** Whether `queue` carries the correction (the boot's check, corrections-in-force.ts). */
export const isQuiet = (queue: unknown): boolean => typeof queue === 'object' && queue !== null && (queue as RequestQueueInternals)[QUIET] === true;
