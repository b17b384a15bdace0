import { transactionalRetry } from './partition-producer';

describe('transactionalRetry', () => {
  it('starts retries at 20 ms and grows them fourfold, leaving the number of retries to KafkaJS', () => {
    expect(transactionalRetry()).toEqual({ initialRetryTime: 20, multiplier: 4 });
    expect(transactionalRetry()).not.toHaveProperty('retries');
  });

  it("keeps the application's own settings", () => {
    expect(transactionalRetry({ retries: 3, maxRetryTime: 5000 })).toEqual({ retries: 3, maxRetryTime: 5000, initialRetryTime: 20, multiplier: 4 });
    expect(transactionalRetry({ multiplier: 2 })).toEqual({ initialRetryTime: 20, multiplier: 2 });
    expect(transactionalRetry({ initialRetryTime: 500 })).toEqual({ initialRetryTime: 500 });
  });
});
