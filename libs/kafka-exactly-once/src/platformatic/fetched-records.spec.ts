import { decodeFetchedPartition, loggedRecords } from './fetched-records';

type Batch = Parameters<typeof decodeFetchedPartition>[0]['records'] extends (infer B)[] | null | undefined ? B : never;

const marker = (type: 0 | 1) => {
  const key = Buffer.alloc(4);
  key.writeInt16BE(0, 0);
  key.writeInt16BE(type, 2);
  return key;
};

/** A record batch of `producerId` at `firstOffset` with `count` records (values `v<offset>`), or a commit/abort marker. */
function batch(firstOffset: bigint, producerId: bigint, count: number, kind: 'data' | 'abort' | 'commit' = 'data', attributes = 0x10): Batch {
  const control = kind !== 'data';
  return {
    firstOffset,
    length: 0,
    partitionLeaderEpoch: 0,
    magic: 2,
    crc: 0,
    attributes: attributes | (control ? 0x20 : 0),
    lastOffsetDelta: count - 1,
    firstTimestamp: 1000n,
    maxTimestamp: 1000n + BigInt(count - 1),
    producerId,
    producerEpoch: 0,
    firstSequence: 0,
    records: Array.from({ length: count }, (_, i) => ({
      length: 0,
      attributes: 0,
      timestampDelta: BigInt(i),
      offsetDelta: i,
      key: control ? marker(kind === 'abort' ? 0 : 1) : Buffer.from(`k${firstOffset + BigInt(i)}`),
      value: control ? Buffer.alloc(6) : Buffer.from(`v${firstOffset + BigInt(i)}`),
      headers: [],
    })),
  };
}

const offsets = (r: ReturnType<typeof decodeFetchedPartition>) => r.messages.map((m) => m.offset);

describe('decodeFetchedPartition', () => {
  it('hands over committed records from the position on, and reports the last offset of the whole range', () => {
    const records = [batch(0n, 7n, 3), batch(3n, 7n, 1, 'commit'), batch(4n, -1n, 2, 'data', 0)];
    const read = decodeFetchedPartition({ records, abortedTransactions: [], highWatermark: 6n }, 1n);
    expect(offsets(read)).toEqual(['1', '2', '4', '5']);
    expect(read.lastOffset).toBe(5n);
    expect(read.messages[0]).toMatchObject({ key: Buffer.from('k1'), value: Buffer.from('v1'), timestamp: '1001', batchContext: { producerId: '7', inTransaction: true } });
  });

  it('leaves out two aborted transactions of the same producer in one answer (the client keeps one per producer)', () => {
    const records = [batch(0n, 5n, 2), batch(2n, 5n, 1, 'abort'), batch(3n, 5n, 2), batch(5n, 5n, 1, 'abort'), batch(6n, 5n, 1), batch(7n, 5n, 1, 'commit')];
    const read = decodeFetchedPartition({ records, abortedTransactions: [{ producerId: 5n, firstOffset: 3n }, { producerId: 5n, firstOffset: 0n }], highWatermark: 8n }, 0n);
    expect(offsets(read)).toEqual(['6']);
    expect(read.lastOffset).toBe(7n);
  });

  it('orders aborted transactions by first offset: overlapping producers, the first to begin aborting last', () => {
    // A begins (0), B begins (1), B aborts (2), A aborts (3): both aborted, listed in marker order (B first).
    const records = [batch(0n, 1n, 1), batch(1n, 2n, 1), batch(2n, 2n, 1, 'abort'), batch(3n, 1n, 1, 'abort'), batch(4n, 1n, 1), batch(5n, 1n, 1, 'commit')];
    const read = decodeFetchedPartition({ records, abortedTransactions: [{ producerId: 2n, firstOffset: 1n }, { producerId: 1n, firstOffset: 0n }], highWatermark: 6n }, 0n);
    expect(offsets(read)).toEqual(['4']);
  });

  it("leaves out an aborted transaction's records whose abort marker the answer does not reach", () => {
    const records = [batch(0n, 9n, 2), batch(2n, 9n, 2)];
    const read = decodeFetchedPartition({ records, abortedTransactions: [{ producerId: 9n, firstOffset: 0n }], highWatermark: 10n }, 0n);
    expect(offsets(read)).toEqual([]);
    expect(read.lastOffset).toBe(3n);
  });

  it('reads a log-append-time batch at its max timestamp, and no records as the position less one', () => {
    const read = decodeFetchedPartition({ records: [batch(0n, -1n, 2, 'data', 0x08)], abortedTransactions: null, highWatermark: 2n }, 0n);
    expect(read.messages.map((m) => m.timestamp)).toEqual(['1001', '1001']);
    expect(decodeFetchedPartition({ records: null, abortedTransactions: null, highWatermark: 9n }, 4n).lastOffset).toBe(3n);
  });

  it('decodes headers as KafkaJS does: repeated keys as arrays, a null key as "null", __proto__ an own key', () => {
    const b = batch(0n, -1n, 1, 'data', 0);
    b.records[0].headers = [
      [Buffer.from('a'), Buffer.from('1')],
      [Buffer.from('a'), null],
      [Buffer.from('a'), Buffer.from('3')],
      [null, Buffer.from('n')],
      [Buffer.from('__proto__'), Buffer.from('p')],
      [Buffer.from([0xff, 0xfe]), Buffer.from('bad')],
    ];
    const [message] = decodeFetchedPartition({ records: [b], abortedTransactions: null, highWatermark: 1n }, 0n).messages;
    expect(message.headers.a).toEqual([Buffer.from('1'), null, Buffer.from('3')]);
    expect(message.headers.null).toEqual(Buffer.from('n'));
    expect(Object.getPrototypeOf(message.headers)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(message.headers, '__proto__')?.value).toEqual(Buffer.from('p'));
    expect(message.headers['\ufffd\ufffd']).toEqual(Buffer.from('bad'));
  });
});

describe("loggedRecords: a partition read as the library's own reads take it", () => {
  it('keeps every offset: markers, and the records of aborted transactions, as control records with their producer', () => {
    // A (1) begins at 0, B (2) at 1; B aborts at 2, A commits at 3; A writes again at 4, not ended in the answer.
    const records = [batch(0n, 1n, 1), batch(1n, 2n, 1), batch(2n, 2n, 1, 'abort'), batch(3n, 1n, 1, 'commit'), batch(4n, 1n, 2), batch(6n, -1n, 1, 'data', 0)];
    const read = loggedRecords({ records, abortedTransactions: [{ producerId: 2n, firstOffset: 1n }] });
    expect(read.map((r) => [r.offset, r.producerId, r.isControlRecord, r.inTransaction])).toEqual([
      ['0', '1', false, true],
      ['1', '2', true, true],
      ['2', '2', true, true],
      ['3', '1', true, true],
      ['4', '1', false, true],
      ['5', '1', false, true],
      ['6', '-1', false, false],
    ]);
    // A marker's key says which (version, then type: 1 commit).
    expect(read[3].key?.readInt16BE(2)).toBe(1);
    expect(read[0]).toMatchObject({ timestamp: '1000', key: Buffer.from('k0'), value: Buffer.from('v0') });
  });

  it('gives headers as pairs in their order (a repeated name kept, a null name as "null")', () => {
    const b = batch(0n, -1n, 1, 'data', 0);
    b.records[0].headers = [
      [Buffer.from('b'), Buffer.from('1')],
      [Buffer.from('a'), null],
      [Buffer.from('b'), Buffer.from('3')],
      [null, Buffer.from('n')],
    ];
    expect(loggedRecords({ records: [b], abortedTransactions: null })[0].headers).toEqual([
      ['b', Buffer.from('1')],
      ['a', null],
      ['b', Buffer.from('3')],
      ['null', Buffer.from('n')],
    ]);
    expect(loggedRecords({ records: null, abortedTransactions: null })).toEqual([]);
  });
});
