export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Waits `ms`, calling `heartbeat` every half heartbeat interval so the group does not think this member died.
 * Heartbeat errors are ignored here: the caller finds out at its next step.
 */
export async function pauseWithHeartbeats(ms: number, heartbeatInterval: number, heartbeat: () => Promise<void>): Promise<void> {
  const step = Math.max(50, Math.floor(heartbeatInterval / 2));
  for (let waited = 0; waited < ms; waited += step) {
    await sleep(Math.min(step, ms - waited));
    await heartbeat().catch(() => undefined);
  }
}
