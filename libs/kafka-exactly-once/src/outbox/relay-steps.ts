/**
 * When the relay did each step of one batch (ms since the epoch), told to an observer of the relay: what an event's
 * time from its writer's commit to a reader goes to (bench/variants/outbox.js prints it). A batch a crash left
 * given out (sent first by the next session, as it is) has no marking times.
 */
export interface RelayBatchTimes {
  batch: bigint;
  /** The message ids of its events. */
  messageIds: string[];
  /** The statement that gave it its number: sent (its snapshot), answered. */
  markedFrom?: number;
  markedAt?: number;
  /** Its Kafka transaction: begun (once the batch before it had committed), its records answered, its commit answered. */
  sendFrom: number;
  sentAt: number;
  committedAt: number;
}

/** Where one event's time went, in ms, from its writer's commit to a reader's arrival. */
export interface EventSteps {
  /** Commit to the start of the statement that gave the event its batch (the relay's wake-up, or its busy time). */
  pickUp: number;
  /** That statement. */
  mark: number;
  /** Given out, waiting for the batch before it to commit. */
  queue: number;
  /** Its transaction's records (AddPartitionsToTxn, Produce). */
  send: number;
  /** Its transaction's commit (EndTxn). */
  commit: number;
  /** The commit answered to the reader's arrival (the coordinator's markers, the reader's fetch). */
  visible: number;
  total: number;
}

export const EVENT_STEPS: Array<keyof EventSteps> = ['pickUp', 'mark', 'queue', 'send', 'commit', 'visible', 'total'];

/**
 * An event's steps from its batch's times, its writer's commit (`committedAt`, as the writer saw it answered) and
 * its arrival at a reader; undefined for a batch without marking times. An event can reach the relay before its
 * writer sees the answer to its COMMIT: the pick-up is 0 then, never negative.
 */
export function eventSteps(times: RelayBatchTimes, committedAt: number, arrivedAt: number): EventSteps | undefined {
  if (times.markedFrom === undefined || times.markedAt === undefined) return undefined;
  return {
    pickUp: Math.max(0, times.markedFrom - committedAt),
    mark: times.markedAt - times.markedFrom,
    queue: Math.max(0, times.sendFrom - times.markedAt),
    send: times.sentAt - times.sendFrom,
    commit: times.committedAt - times.sentAt,
    visible: arrivedAt - times.committedAt,
    total: arrivedAt - committedAt,
  };
}

/** The p50, p90 and p99 of each step over `events` (nearest rank). */
export function stepPercentiles(events: EventSteps[]): Record<keyof EventSteps, { p50: number; p90: number; p99: number }> | undefined {
  if (events.length === 0) return undefined;
  const at = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  return Object.fromEntries(
    EVENT_STEPS.map((step) => {
      const sorted = events.map((e) => e[step]).sort((a, b) => a - b);
      return [step, { p50: at(sorted, 50), p90: at(sorted, 90), p99: at(sorted, 99) }];
    }),
  ) as Record<keyof EventSteps, { p50: number; p90: number; p99: number }>;
}
