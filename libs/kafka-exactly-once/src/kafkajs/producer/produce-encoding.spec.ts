import type { Message } from 'kafkajs';
import type { ProduceArgs } from './kafkajs-internals';
import { encodeProduceBody, varIntSize } from './produce-encoding';

/* eslint-disable @typescript-eslint/no-require-imports */
const produceV3 = require('kafkajs/src/protocol/requests/produce/v3/request');
const crc32c = require('kafkajs/src/protocol/recordBatch/crc32C') as (bytes: Buffer) => number;
const Decoder = require('kafkajs/src/protocol/decoder');
const RecordBatchDecoder = require('kafkajs/src/protocol/recordBatch/v0/decoder');
/* eslint-enable @typescript-eslint/no-require-imports */

const NOW = 1764680000123;

async function kafkaJsBytes(args: ProduceArgs): Promise<Buffer> {
  const spy = jest.spyOn(Date, 'now').mockReturnValue(NOW);
  try {
    return (await produceV3(args).encode()).buffer;
  } finally {
    spy.mockRestore();
  }
}

const args = (messages: Message[], more: Partial<ProduceArgs> = {}): ProduceArgs => ({
  acks: -1,
  timeout: 30000,
  producerId: 4711,
  producerEpoch: 3,
  topicData: [{ topic: 'payments', partitions: [{ partition: 2, firstSequence: 17, messages }] }],
  ...more,
});

describe('encodeProduceBody: the Produce request body KafkaJS would write, in one Buffer', () => {
  const cases: Array<[string, ProduceArgs]> = [
    ['one record, idempotent', args([{ key: 'k', value: 'v', timestamp: String(NOW - 5) }])],
    ['transactional, several records and timestamps out of order', args([
      { key: Buffer.from('a'), value: Buffer.from([0, 1, 2]), timestamp: String(NOW) },
      { key: Buffer.from('b'), value: Buffer.alloc(0), timestamp: String(NOW - 1000) },
      { key: Buffer.from('c'), value: Buffer.from('x'), timestamp: String(NOW + 70000) },
    ], { transactionalId: 'orders-tx-0' })],
    ['null key, null value, no timestamps', args([{ key: null, value: null }, { key: null, value: 'v' }])],
    ['headers: text, bytes, repeated, unicode names, odd names', args([
      {
        key: 'k',
        value: 'v',
        timestamp: String(NOW),
        headers: { 'message-id': 'm-1', bytes: Buffer.from([0x00, 0xff, 0xc3, 0x28]), repeated: [Buffer.from('a'), 'b', Buffer.alloc(0)], 'ключ-✓': 'значение', constructor: 'c' },
      },
    ])],
    ['large values (varints of several bytes) and many records', args(
      Array.from({ length: 300 }, (_, i) => ({ key: `key-${i}`, value: Buffer.alloc(i * 700, i % 251), timestamp: String(NOW + i * 3), headers: { n: String(i) } })),
    )],
    ['several topics and partitions, a transactional id with multi-byte characters', {
      acks: -1,
      timeout: 5000,
      transactionalId: 'tx-é-1',
      producerId: '9007199254740993' as unknown as number,
      producerEpoch: 32767,
      topicData: [
        { topic: 'a', partitions: [{ partition: 0, firstSequence: 0, messages: [{ key: '1', value: '1', timestamp: String(NOW) }] }, { partition: 5, firstSequence: 2147483000, messages: [{ key: '2', value: '2', timestamp: String(NOW) }] }] },
        { topic: 'b.c_d-e', partitions: [{ partition: 11, firstSequence: 9, messages: [{ key: '3', value: '3', timestamp: String(NOW) }] }] },
      ],
    }],
    ['timestamp deltas beyond 32 bits (years apart)', args([
      { key: 'old', value: 'v', timestamp: String(NOW - 3 * 365 * 86400000) },
      { key: 'mid', value: 'v', timestamp: String(NOW - 2 ** 30) },
      { key: 'new', value: 'v', timestamp: String(NOW) },
    ])],
    ['acks 1 and a value of 1 MiB', args([{ key: 'big', value: Buffer.alloc(1 << 20, 7), timestamp: String(NOW) }], { acks: 1 })],
  ];

  it.each(cases)('%s: byte for byte', async (_, a) => {
    expect(encodeProduceBody(a, crc32c, NOW).equals(await kafkaJsBytes(a))).toBe(true);
  });

  it("gives a record without a timestamp its partition's (the bytes KafkaJS writes for records stamped so)", async () => {
    const stamp = String(NOW - 42);
    const messages: Message[] = [{ key: 'a', value: '1' }, { key: 'b', value: '2', timestamp: String(NOW - 50) }, { key: 'c', value: '3' }];
    const mine = args(messages);
    mine.topicData[0].partitions[0].timestamp = stamp;
    const stamped = args(messages.map((m) => ({ ...m, timestamp: m.timestamp ?? stamp })));
    expect(encodeProduceBody(mine, crc32c, NOW + 99999).equals(await kafkaJsBytes(stamped))).toBe(true);
  });

  it('writes a null header value as Kafka does (length -1), which KafkaJS cannot encode, and its decoder reads back as null', async () => {
    const a = args([{ key: 'k', value: 'v', timestamp: String(NOW), headers: { gone: null as unknown as Buffer, list: [Buffer.from('x'), null as unknown as Buffer] } }]);
    await expect(kafkaJsBytes(a)).rejects.toThrow();
    const body = encodeProduceBody(a, crc32c, NOW);
    // Skip the body's fields up to the partition's record batch: txn id (2), acks 2, timeout 4, topics 4, topic name
    // (2 + 8), partitions 4, partition 4, record set size 4.
    const batch = body.subarray(2 + 2 + 4 + 4 + 2 + 'payments'.length + 4 + 4 + 4);
    const decoded = await RecordBatchDecoder(new Decoder(batch));
    expect(decoded.records).toHaveLength(1);
    expect(decoded.records[0].headers).toEqual({ gone: null, list: [Buffer.from('x'), null] });
    expect(decoded.records[0].key).toEqual(Buffer.from('k'));
    expect(decoded.inTransaction).toBe(false);
    // The CRC covers the attributes to the end: the broker checks it (CORRUPT_MESSAGE otherwise).
    expect(batch.readUInt32BE(17)).toBe(crc32c(batch.subarray(21)) >>> 0);
  });

  it('refuses a key, value or header that is neither bytes, text nor null, rather than write it as text', () => {
    const bad: Array<Partial<Message>> = [{ value: 42 as never }, { key: { id: 1 } as never }, { headers: { h: (() => 'x') as never } }, { headers: { h: [Buffer.from('a'), 7 as never] } }];
    for (const m of bad) expect(() => encodeProduceBody(args([{ key: 'k', value: 'v', ...m }]), crc32c, NOW)).toThrow(TypeError);
  });

  it('takes a Uint8Array as its bytes, and leaves an undefined header value out (as the spool, being JSON, does)', async () => {
    const view = new Uint8Array([9, 8, 7, 6]).subarray(1, 3);
    const mine = args([{ key: 'k', value: view as never, timestamp: String(NOW), headers: { gone: undefined as never, list: [Buffer.from('a'), undefined as never], kept: 'x' } }]);
    const same = args([{ key: 'k', value: Buffer.from([8, 7]), timestamp: String(NOW), headers: { list: [Buffer.from('a')], kept: 'x' } }]);
    expect(encodeProduceBody(mine, crc32c, NOW).equals(await kafkaJsBytes(same))).toBe(true);
  });

  it('varint sizes agree with the zigzag encoding at the boundaries', () => {
    expect([0, -1, 63, 64, -64, -65, 8191, 8192, 2 ** 31 - 1, -(2 ** 31)].map(varIntSize)).toEqual([1, 1, 1, 2, 1, 2, 2, 3, 5, 5]);
  });
});
