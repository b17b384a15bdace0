import { chunkLength } from './exactly-once.consumer';

const rec = (bytes: number, key = 0) => ({ key: key ? Buffer.alloc(key) : null, value: bytes >= 0 ? Buffer.alloc(bytes) : null });

describe('chunkLength', () => {
  it('caps a chunk by records', () => {
    const records = Array.from({ length: 10 }, () => rec(10));
    expect(chunkLength(records, 0, { maxRecords: 4, maxBytes: 1e9 })).toBe(4);
    expect(chunkLength(records, 8, { maxRecords: 4, maxBytes: 1e9 })).toBe(2);
  });

  it('caps a chunk by the bytes of keys and values, counting a tombstone as its key only', () => {
    const records = [rec(40, 10), rec(-1, 10), rec(40), rec(40)];
    expect(chunkLength(records, 0, { maxRecords: 100, maxBytes: 100 })).toBe(3); // 50 + 10 + 40 = 100
    expect(chunkLength(records, 0, { maxRecords: 100, maxBytes: 99 })).toBe(2);
  });

  it('counts header names and values too (a message id can be large)', () => {
    const withHeaders = { key: null, value: Buffer.alloc(10), headers: { 'message-id': Buffer.alloc(80), multi: ['ab', Buffer.alloc(3)], none: undefined } };
    // 10 + 'message-id' (10) + 80 + 'multi' (5) + 2 + 3 + 'none' (4) = 114
    expect(chunkLength([withHeaders, withHeaders], 0, { maxRecords: 10, maxBytes: 227 })).toBe(1);
    expect(chunkLength([withHeaders, withHeaders], 0, { maxRecords: 10, maxBytes: 228 })).toBe(2);
  });

  it('makes a record larger than the cap a chunk of its own, never an empty chunk', () => {
    const records = [rec(500), rec(1), rec(1)];
    expect(chunkLength(records, 0, { maxRecords: 100, maxBytes: 100 })).toBe(1);
    expect(chunkLength(records, 1, { maxRecords: 100, maxBytes: 100 })).toBe(2);
    expect(chunkLength(records, 3, { maxRecords: 100, maxBytes: 100 })).toBe(0);
  });
});
