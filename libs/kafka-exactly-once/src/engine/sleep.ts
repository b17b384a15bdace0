export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Waits `ms`, or less: `wake` (handed to `onWake` for the wait's duration, then undefined) ends it at once. */
export function wakeableSleep(ms: number, onWake: (wake: (() => void) | undefined) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      resolve();
    }
    onWake(done);
  }).finally(() => onWake(undefined));
}

const REBALANCE_ERRORS = new Set(['REBALANCE_IN_PROGRESS', 'UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION', 'NOT_COORDINATOR_FOR_GROUP', 'NOT_COORDINATOR', 'FENCED_INSTANCE_ID']);

/** A KafkaJS heartbeat error that means the group is rebalancing and this member must rejoin. */
export function isRebalanceError(err: unknown): boolean {
  return REBALANCE_ERRORS.has((err as { type?: string } | undefined)?.type ?? '');
}

/**
 * Waits `ms`, calling `heartbeat` every half heartbeat interval so the group does not think this member died.
 * Resolves false as soon as a heartbeat says the group is rebalancing (other heartbeat errors are ignored: the
 * caller finds out at its next step), true otherwise.
 */
export async function pauseWithHeartbeats(ms: number, heartbeatInterval: number, heartbeat: () => Promise<void>): Promise<boolean> {
  const step = Math.max(50, Math.floor(heartbeatInterval / 2));
  for (let waited = 0; waited < ms; waited += step) {
    await sleep(Math.min(step, ms - waited));
    try {
      await heartbeat();
    } catch (err) {
      if (isRebalanceError(err)) return false;
    }
  }
  return true;
}
