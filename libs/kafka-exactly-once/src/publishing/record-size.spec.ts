import { estimateRecordBytes, RECORD_BATCH_OVERHEAD, varintBytes } from './record-size';

// KafkaJS's own encoder of a record batch (format v2), to check the estimate against the bytes it sends.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Record = require('kafkajs/src/protocol/recordBatch/record/v0');

async function encodedBatchBytes(key: Buffer | null, value: Buffer, headers: Record<string, string>): Promise<number> {
  const record = Record({ key, value, headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Buffer.from(v)])), timestampDelta: 0, offsetDelta: 0 });
  const batch = await RecordBatch({ records: [record] });
  // Base offset, length and the batch: what the broker measures against max.message.bytes.
  return batch.buffer.length;
}

const b64 = (buf: Buffer | null) => (buf === null ? null : buf.toString('base64'));

describe('varintBytes', () => {
  it('counts zig-zag varint bytes', () => {
    expect([0, -1, 63, 64, -64, -65, 8191, 8192, 1048576].map(varintBytes)).toEqual([1, 1, 1, 2, 1, 2, 2, 3, 4]);
  });
});

describe('estimateRecordBytes', () => {
  it.each([
    ['a small event', Buffer.from('acc-1'), Buffer.alloc(120, 1), { 'message-id': '0193-abc', 'event-type': 'com.example.PaymentRequested' }],
    ['no key, no headers', null, Buffer.alloc(10), {}],
    ['a 1 MiB value and a long header', Buffer.from('k'), Buffer.alloc(1 << 20, 7), { 'message-id': 'x'.repeat(5000) }],
  ])('is never below what KafkaJS sends, and close to it (%s)', async (_label, key, value, headers) => {
    const actual = await encodedBatchBytes(key, value, headers);
    const estimate = estimateRecordBytes({ key: b64(key), value: b64(value) as string, headers });
    expect(estimate).toBeGreaterThanOrEqual(actual);
    expect(estimate - actual).toBeLessThanOrEqual(20);
  });

  it('counts the batch overhead once', () => {
    expect(estimateRecordBytes({ key: null, value: '', headers: {} })).toBeGreaterThan(RECORD_BATCH_OVERHEAD);
    expect(estimateRecordBytes({ key: null, value: '', headers: {} })).toBeLessThan(RECORD_BATCH_OVERHEAD + 25);
  });
});
