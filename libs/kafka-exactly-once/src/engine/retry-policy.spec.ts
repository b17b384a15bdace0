import { retryDelay, totalRetryDelay } from './retry-policy';

describe('retry policy', () => {
  const policy = { attempts: 5, initialDelayMs: 100, maxDelayMs: 1000, multiplier: 3 };

  it('backs off exponentially and caps the delay', () => {
    expect([1, 2, 3, 4].map((attempt) => retryDelay(policy, attempt))).toEqual([100, 300, 900, 1000]);
  });

  it('adds up the waits between all attempts', () => {
    expect(totalRetryDelay(policy)).toBe(2300);
    expect(totalRetryDelay({ ...policy, attempts: 1 })).toBe(0);
  });
});
