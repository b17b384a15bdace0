import { recordDigest } from './record-digest';
import { committedIn, txnMarkersV1, describeProducersV0, forgottenByCoordinator, offsetsPartitionOf, type LogRecord } from './hanging-transactions';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');

async function encoded(request: { request: { encode(): Promise<unknown> } }): Promise<Buffer> {
  return ((await request.request.encode()) as { buffer: Buffer }).buffer;
}

describe('hanging transactions: which the library may abort, and the requests it sends', () => {
  it('calls a transaction forgotten only when a coordinator names it in a state that writes no more markers', () => {
    const open = { producerId: '7', producerEpoch: 3, startOffset: '10' };
    for (const state of ['Empty', 'CompleteCommit', 'CompleteAbort', 'Dead']) expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state })).toBe(true);
    for (const state of ['Ongoing', 'PrepareCommit', 'PrepareAbort', 'PrepareEpochFence']) expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state })).toBe(false);
    // Unnamed (no coordinator knows the producer id): nobody can tell whose it is.
    expect(forgottenByCoordinator(open)).toBe(false);
    expect(forgottenByCoordinator({ ...open, state: 'Empty' })).toBe(false);
    // Named differently by two brokers while its coordination moves, or a state this code does not know.
    expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state: 'Empty or PrepareCommit' })).toBe(false);
    expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state: 'SomethingNew' })).toBe(false);
  });

  it("places a group on __consumer_offsets as Kafka does (Java's String.hashCode)", () => {
    expect(offsetsPartitionOf('consumer-app', 50)).toBe(Math.abs(javaHashOf('consumer-app')) % 50);
    expect(offsetsPartitionOf('', 50)).toBe(0);
  });

  it('encodes WriteTxnMarkers v1 as one abort marker for the producer, its epoch as int16, the coordinator epoch after the topics', async () => {
    const bytes = await encoded(txnMarkersV1('4096', 5, 2, false, [{ topic: 'out', partitions: [1, 3] }]));
    const expected = new Encoder()
      .writeUVarInt(0) // request header v2's tagged fields
      .writeUVarInt(2) // one marker
      .writeInt64('4096')
      .writeInt16(5)
      .writeBoolean(false) // abort
      .writeUVarInt(2)
      .writeUVarIntString('out')
      .writeUVarInt(3)
      .writeInt32(1)
      .writeInt32(3)
      .writeUVarInt(0)
      .writeInt32(2)
      .writeUVarInt(0)
      .writeUVarInt(0).buffer;
    expect(bytes.equals(expected)).toBe(true);
    // A commit marker differs in its result only.
    const commit = await encoded(txnMarkersV1('4096', 5, 2, true, [{ topic: 'out', partitions: [1, 3] }]));
    expect(commit.length).toBe(expected.length);
    expect([...commit].filter((b, i) => b !== expected[i])).toEqual([1]);
  });

  it("decodes WriteTxnMarkers v1's answer partition by partition, errors included", async () => {
    const answer = new Encoder()
      .writeUVarInt(0) // response header v1
      .writeUVarInt(2) // one marker
      .writeInt64('4096')
      .writeUVarInt(3) // two topics
      .writeUVarIntString('out')
      .writeUVarInt(2)
      .writeInt32(1)
      .writeInt16(0)
      .writeUVarInt(0)
      .writeUVarInt(0)
      .writeUVarIntString('__consumer_offsets')
      .writeUVarInt(2)
      .writeInt32(9)
      .writeInt16(31) // CLUSTER_AUTHORIZATION_FAILED
      .writeUVarInt(0)
      .writeUVarInt(0)
      .writeUVarInt(0)
      .writeUVarInt(0).buffer;
    expect(await txnMarkersV1('4096', 5, 2, false, []).response.decode(answer)).toEqual([
      { topic: 'out', partition: 1, errorCode: 0 },
      { topic: '__consumer_offsets', partition: 9, errorCode: 31 },
    ]);
  });

  it("decodes DescribeProducers v0's answer: open transactions only, with their coordinator epoch", async () => {
    const producer = (e: any, id: string, start: string) => e.writeInt64(id).writeInt32(1).writeInt32(4).writeInt64('0').writeInt32(-1).writeInt64(start).writeUVarInt(0);
    const answer = new Encoder().writeUVarInt(0).writeInt32(0).writeUVarInt(2).writeUVarIntString('out').writeUVarInt(2).writeInt32(0).writeInt16(0).writeUVarIntString(null).writeUVarInt(3);
    producer(answer, '11', '42');
    producer(answer, '12', '-1'); // no open transaction
    answer.writeUVarInt(0).writeUVarInt(0).writeUVarInt(0);
    expect(await describeProducersV0([{ topic: 'out', partitions: [0] }]).response.decode(answer.buffer)).toEqual([
      { topic: 'out', partition: 0, errorCode: 0, producers: [{ producerId: '11', producerEpoch: 1, startOffset: '42', coordinatorEpoch: -1 }] },
    ]);
  });
  it("counts a producer's records committed once its commit marker follows them, across reads; an abort or another producer's marker does not", () => {
    let offset = 0;
    const data = (producerId: string, value: string, inTransaction = true): LogRecord => ({
      offset: String(offset++),
      timestamp: '0',
      key: null,
      value: Buffer.from(value),
      headers: { 'message-id': Buffer.from(value) },
      isControlRecord: false,
      batchContext: { producerId, inTransaction },
    });
    const marker = (producerId: string, type: 0 | 1): LogRecord => {
      const key = Buffer.alloc(4);
      key.writeInt16BE(type, 2);
      return { offset: String(offset++), timestamp: '0', key, isControlRecord: true, batchContext: { producerId, inTransaction: true } };
    };
    const digest = (value: string) => recordDigest('out', null, Buffer.from(value), [['message-id', Buffer.from(value)]]);
    const open = new Map<string, string[]>();
    const committed = new Map<string, number>();
    const mine = new Set(['7']);
    // a aborted; b committed by a marker in the next read; c's "commit" is another producer's marker; d never ended.
    committedIn('out', [data('7', 'a'), marker('7', 0), data('7', 'b'), data('8', 'x')], mine, open, committed);
    expect([...committed]).toEqual([]);
    committedIn('out', [marker('8', 1), marker('7', 1), data('7', 'c'), marker('8', 1), data('7', 'not-transactional', false), data('7', 'd')], mine, open, committed);
    expect([...committed]).toEqual([[digest('b'), 1]]);
    expect(open.get('7')).toEqual([digest('c'), digest('d')]);
    // The same bytes committed twice count twice.
    committedIn('out', [marker('7', 1), data('7', 'b'), marker('7', 1)], mine, open, committed);
    expect(committed).toEqual(new Map([[digest('b'), 2], [digest('c'), 1], [digest('d'), 1]]));
  });
});

function javaHashOf(text: string): number {
  let h = 0;
  for (const c of text) h = (Math.imul(31, h) + c.charCodeAt(0)) | 0;
  return h;
}
