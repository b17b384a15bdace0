import { transactionalRetry } from './partition-producer';

describe('transactionalRetry', () => {
  it('starts retries at 20 ms by default, with more of them so that the total wait stays in seconds', () => {
    expect(transactionalRetry()).toEqual({ retries: 8, initialRetryTime: 20 });
  });

  it("keeps the application's own settings", () => {
    expect(transactionalRetry({ retries: 3, maxRetryTime: 5000 })).toEqual({ retries: 3, maxRetryTime: 5000, initialRetryTime: 20 });
    expect(transactionalRetry({ initialRetryTime: 500 })).toEqual({ retries: 8, initialRetryTime: 500 });
  });
});
