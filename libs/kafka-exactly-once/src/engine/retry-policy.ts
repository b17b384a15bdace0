/** Exponential backoff: the delay before attempt `attempt + 1`, capped at maxDelayMs. */
export function retryDelay(policy: { initialDelayMs: number; maxDelayMs: number; multiplier: number }, attempt: number): number {
  return Math.min(policy.maxDelayMs, Math.round(policy.initialDelayMs * policy.multiplier ** Math.max(0, attempt - 1)));
}

/** The time a record may spend waiting between its attempts, in all. */
export function totalRetryDelay(policy: { attempts: number; initialDelayMs: number; maxDelayMs: number; multiplier: number }): number {
  let total = 0;
  for (let attempt = 1; attempt < policy.attempts; attempt++) total += retryDelay(policy, attempt);
  return total;
}
