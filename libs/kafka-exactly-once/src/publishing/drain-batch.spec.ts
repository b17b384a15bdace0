import { drainBatchSize } from './drain-batch';

const records = (...sizes: Array<[string, number]>) => sizes.map(([topic, bytes]) => ({ topic, bytes }));

describe('drainBatchSize', () => {
  it('takes records up to the count cap', () => {
    expect(drainBatchSize(records(['t', 10], ['t', 10], ['t', 10]), { maxRecords: 2, maxBytes: 1000 })).toBe(2);
  });

  it('stops before the record that would pass the byte cap', () => {
    expect(drainBatchSize(records(['t', 400], ['u', 400], ['t', 400]), { maxRecords: 500, maxBytes: 1000 })).toBe(2);
  });

  it("keeps a topic's records under that topic's limit, other topics under the request cap", () => {
    const limits = { maxRecords: 500, maxBytes: 10000, topicLimit: (t: string) => (t === 'small' ? 250 : undefined) };
    expect(drainBatchSize(records(['small', 100], ['big', 3000], ['small', 100], ['small', 100]), limits)).toBe(3);
    expect(drainBatchSize(records(['big', 3000], ['big', 3000], ['big', 3000], ['big', 3000]), limits)).toBe(3);
  });

  it('always takes the oldest record, however large, so that it is tried (and refused) alone', () => {
    expect(drainBatchSize(records(['t', 5000], ['t', 10]), { maxRecords: 500, maxBytes: 1000, topicLimit: () => 2000 })).toBe(1);
  });

  it('takes nothing from nothing', () => {
    expect(drainBatchSize([], { maxRecords: 500, maxBytes: 1000 })).toBe(0);
  });
});
