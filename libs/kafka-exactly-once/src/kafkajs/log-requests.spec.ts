import { describeProducersV0, describeTransactionsV0, txnMarkersV1 } from './log-requests';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');

async function encoded(request: { request: { encode(): Promise<unknown> } }): Promise<Buffer> {
  return ((await request.request.encode()) as { buffer: Buffer }).buffer;
}

describe("the hanging transactions' requests on KafkaJS (codecs for what KafkaJS lacks)", () => {

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

  it("decodes DescribeProducers v0's answer: open transactions only, with their coordinator epoch and last write", async () => {
    const producer = (e: any, id: string, start: string) => e.writeInt64(id).writeInt32(1).writeInt32(4).writeInt64('1700000000000').writeInt32(-1).writeInt64(start).writeUVarInt(0);
    const answer = new Encoder().writeUVarInt(0).writeInt32(0).writeUVarInt(2).writeUVarIntString('out').writeUVarInt(2).writeInt32(0).writeInt16(0).writeUVarIntString(null).writeUVarInt(3);
    producer(answer, '11', '42');
    producer(answer, '12', '-1'); // no open transaction
    answer.writeUVarInt(0).writeUVarInt(0).writeUVarInt(0);
    expect(await describeProducersV0([{ topic: 'out', partitions: [0] }]).response.decode(answer.buffer)).toEqual([
      { topic: 'out', partition: 0, errorCode: 0, producers: [{ producerId: '11', producerEpoch: 1, startOffset: '42', coordinatorEpoch: -1, lastTimestamp: '1700000000000' }] },
    ]);
  });

  it("encodes DescribeTransactions v0 by transactional ids, and decodes its answer: state, timeout and start time", async () => {
    expect(await encoded(describeTransactionsV0(['billing-1']))).toEqual(new Encoder().writeUVarInt(0).writeUVarInt(2).writeUVarIntString('billing-1').writeUVarInt(0).buffer);
    const answer = new Encoder().writeUVarInt(0).writeInt32(0).writeUVarInt(2);
    answer.writeInt16(0).writeUVarIntString('billing-1').writeUVarIntString('Ongoing').writeInt32(60000).writeInt64('1700000000000').writeInt64('4096').writeInt16(3);
    answer.writeUVarInt(2).writeUVarIntString('out').writeUVarInt(3).writeInt32(0).writeInt32(1).writeUVarInt(0); // its partitions
    answer.writeUVarInt(0).writeUVarInt(0);
    expect(await describeTransactionsV0(['billing-1']).response.decode(answer.buffer)).toEqual([
      { transactionalId: 'billing-1', errorCode: 0, state: 'Ongoing', timeoutMs: 60000, startTimeMs: '1700000000000', producerId: '4096', producerEpoch: 3 },
    ]);
  });

});
