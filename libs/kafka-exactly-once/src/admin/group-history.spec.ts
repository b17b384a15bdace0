import { OperatorRequestError } from '../errors/operator-request.error';
import { HISTORY_RANGES, historyQuery, longestSpanRead, type HistoryRange } from './group-history';

describe('group history', () => {
  it.each(Object.keys(HISTORY_RANGES) as HistoryRange[])('range %s reads no bucket longer than its step, and at most 360 steps', (range) => {
    const { seconds, stepS } = HISTORY_RANGES[range];
    expect(longestSpanRead(range)).toBeLessThanOrEqual(stepS);
    expect(stepS % longestSpanRead(range)).toBe(0);
    expect(seconds / stepS).toBeLessThanOrEqual(360);
  });

  it('reads its query, refusing what it does not know', () => {
    expect(historyQuery({})).toEqual({ range: '1h', topic: undefined, partition: undefined });
    expect(historyQuery({ range: '24h', topic: 'payments', partition: '3' })).toEqual({ range: '24h', topic: 'payments', partition: 3 });
    expect(() => historyQuery({ range: '2h' })).toThrow(OperatorRequestError);
    expect(() => historyQuery({ range: 'constructor' })).toThrow(/range must be one of/);
    expect(() => historyQuery({ partition: '1' })).toThrow(/partition needs its topic/);
    expect(() => historyQuery({ topic: 't', partition: '-1' })).toThrow(/partition must be/);
    expect(() => historyQuery({ topic: 'x'.repeat(250) })).toThrow(/topic must be/);
    expect(() => historyQuery({ topic: '' })).toThrow(/topic must be/);
  });
});
