import { isCompactOnly } from './outbox-checkpoints';

describe('the checkpoint topic\'s cleanup.policy', () => {
  it('is taken only when it keeps every key\'s last record for good: compact, and nothing else', () => {
    expect(isCompactOnly('compact')).toBe(true);
    expect(isCompactOnly(' Compact ')).toBe(true);
    expect(isCompactOnly('compact,delete')).toBe(false);
    expect(isCompactOnly('delete,compact')).toBe(false);
    expect(isCompactOnly('delete')).toBe(false);
    expect(isCompactOnly('')).toBe(false);
    expect(isCompactOnly(undefined)).toBe(false);
  });
});
