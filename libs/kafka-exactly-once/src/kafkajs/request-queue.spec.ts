import { isQuiet, quietRequestQueue } from './request-queue';

// KafkaJS's own RequestQueue, without a socket: what the fix changes is when it arms its timer.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const RequestQueue = require('kafkajs/src/network/requestQueue');

const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

const queues: Array<{ destroy(): void }> = [];

function newQueue({ quiet = true } = {}) {
  const queue = new RequestQueue({ maxInFlightRequests: 1, requestTimeout: 30000, enforceRequestTimeout: false, clientId: 'spec', broker: 'spec:9092', logger });
  if (quiet) {
    quietRequestQueue(queue);
    quietRequestQueue(queue); // applying twice wraps once
  }
  queues.push(queue);
  return queue;
}

function queuedRequest(correlationId: number) {
  return { correlationId, expectResponse: false, pendingDuration: 0, send: jest.fn(), completed: jest.fn() };
}

describe('quietRequestQueue', () => {
  afterEach(() => queues.splice(0).forEach((queue) => queue.destroy()));

  it('arms no timer when nothing is queued and the connection is not throttled (stock KafkaJS polls every millisecond)', () => {
    const queue = newQueue();
    queue.checkPendingRequests();
    expect(queue.throttleCheckTimeoutId).toBeNull();
  });

  it('still sends a queued request once the broker throttle ends', async () => {
    const queue = newQueue();
    queue.throttledUntil = Date.now() + 40;
    const request = queuedRequest(1);
    queue.pending.push(request);
    queue.scheduleCheckPendingRequests();
    expect(queue.throttleCheckTimeoutId).not.toBeNull();
    expect(request.send).not.toHaveBeenCalled();
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(request.send).toHaveBeenCalledTimes(1);
    expect(queue.pending).toHaveLength(0);
    expect(queue.throttleCheckTimeoutId).toBeNull(); // and stops polling once the queue is empty
  });

  it('keeps a timer while throttled even with nothing queued, so a request queued meanwhile is checked', () => {
    const queue = newQueue();
    queue.throttledUntil = Date.now() + 1000;
    queue.scheduleCheckPendingRequests();
    expect(queue.throttleCheckTimeoutId).not.toBeNull();
  });

  it("changes the queue it is given and no other: KafkaJS's RequestQueue class stays stock", () => {
    const stock = RequestQueue.prototype.scheduleCheckPendingRequests;
    const quiet = newQueue();
    const other = newQueue({ quiet: false });
    expect(isQuiet(quiet)).toBe(true);
    expect(isQuiet(other)).toBe(false);
    expect(RequestQueue.prototype.scheduleCheckPendingRequests).toBe(stock);
    other.checkPendingRequests();
    expect(other.throttleCheckTimeoutId).not.toBeNull(); // KafkaJS's own: it polls with nothing queued
  });
});
