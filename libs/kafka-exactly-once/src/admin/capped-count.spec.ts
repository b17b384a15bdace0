import { cappedCount, cappedCounts, cappedValue, COUNT_CAP } from './capped-count';

describe('capped counts', () => {
  it('count one row past the cap, so that more than 10,000 is told from exactly 10,000', () => {
    expect(cappedCount(`kafka_eo_inbox WHERE consumer_group = $1`)).toBe(`(SELECT count(*)::int FROM (SELECT 1 FROM kafka_eo_inbox WHERE consumer_group = $1 LIMIT 10001) AS capped)`);
    expect(cappedValue(0)).toEqual({ value: 0, atLeast: false });
    expect(cappedValue(COUNT_CAP)).toEqual({ value: 10000, atLeast: false });
    expect(cappedValue(COUNT_CAP + 1)).toEqual({ value: 10000, atLeast: true });
    // Two capped counts added (the outbox's waiting rows in two states) are capped again.
    expect(cappedValue(2 * (COUNT_CAP + 1))).toEqual({ value: 10000, atLeast: true });
  });

  it('name in atLeast only the counts that reached the cap, keeping every number in its place', () => {
    expect(cappedCounts({ deadLetters: 10001, retrying: 3, parkedKeys: 10000 })).toEqual({ values: { deadLetters: 10000, retrying: 3, parkedKeys: 10000 }, atLeast: { deadLetters: true } });
    expect(cappedCounts({ waiting: 0 })).toEqual({ values: { waiting: 0 }, atLeast: {} });
  });
});
