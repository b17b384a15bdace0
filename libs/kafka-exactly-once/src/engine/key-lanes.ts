/**
 * Runs tasks in lanes: the tasks of one lane strictly one after the other, in the order they were added; tasks
 * of different lanes at the same time, at most `limit` at once (a freed slot goes to the task that has waited
 * for one longest). A task waits for its lane's previous task to settle, whether that one succeeded or failed.
 *
 * Used by a unit of work with `@OrderedEvent({ lanes })`: a lane per ordering key, so that records of different
 * keys of one partition are handled concurrently while each key keeps its partition order.
 */
export class KeyLanes {
  private readonly tails = new Map<string, Promise<unknown>>();
  private readonly waiting: Array<() => void> = [];
  private running = 0;

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`key lanes need a limit of at least 1, got ${limit}`);
  }

  run<T>(lane: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(lane) ?? Promise.resolve();
    const result = previous.then(
      () => this.withSlot(task),
      () => this.withSlot(task),
    );
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(lane, tail);
    // Forget a lane once its last task has settled (the map stays as small as the lanes in flight).
    void tail.then(() => {
      if (this.tails.get(lane) === tail) this.tails.delete(lane);
    });
    return result;
  }

  private async withSlot<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await task();
    } finally {
      // Hand the slot straight to the next waiting task, or give it back.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
