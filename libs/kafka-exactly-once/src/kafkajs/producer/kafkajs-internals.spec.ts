import { logLevel } from 'kafkajs';
import { createKafkaClient } from '../client';
import { CheckedProducer } from './checked-producer';
import { KafkaJsBroker, ProtocolRequest, sendProduce } from './kafkajs-internals';

/* eslint-disable @typescript-eslint/no-require-imports */
const { lookup } = require('kafkajs/src/protocol/requests');
const Encoder = require('kafkajs/src/protocol/encoder');
/* eslint-enable @typescript-eslint/no-require-imports */

describe('KafkaJS internals the producer drives (kafkajs is pinned; these fail if they move)', () => {
  it("builds a producer on the library's client: its cluster and eosManager", () => {
    const kafka = createKafkaClient({ brokers: ['127.0.0.1:1'], logLevel: logLevel.NOTHING });
    expect(() => new CheckedProducer(kafka)).not.toThrow();
    expect(() => new CheckedProducer(kafka, { transactionalId: 'x' })).not.toThrow();
  });

  it('sends Produce in the best version both speak (v7), and reads every partition answer, errors included, without throwing', async () => {
    // The answer a broker gives: partition 0 written at 41, partition 1 NOT_LEADER_OR_FOLLOWER.
    const partition = (id: number, errorCode: number, baseOffset: string) =>
      new Encoder().writeInt32(id).writeInt16(errorCode).writeInt64(baseOffset).writeInt64('-1').writeInt64('0');
    const payload = new Encoder()
      .writeArray([new Encoder().writeString('t').writeArray([partition(0, 0, '41'), partition(1, 6, '-1')])])
      .writeInt32(0).buffer;
    let sent: ProtocolRequest | undefined;
    const broker = {
      nodeId: 1,
      lookupRequest: lookup({ 0: { minVersion: 3, maxVersion: 11 } }),
      [Symbol('private:Broker:sendRequest')]: async (request: ProtocolRequest) => {
        sent = request;
        return request.response.parse(await request.response.decode(payload));
      },
    } as unknown as KafkaJsBroker;
    const answer = await sendProduce(broker, {
      acks: -1,
      timeout: 30000,
      producerId: 7,
      producerEpoch: 0,
      topicData: [{ topic: 't', partitions: [{ partition: 0, firstSequence: 0, messages: [{ key: 'k', value: 'v', timestamp: '1' }] }] }],
    });
    expect(sent?.request).toMatchObject({ apiKey: 0, apiVersion: 7 });
    expect(answer.topics[0].partitions.map((p) => [p.partition, p.errorCode, p.baseOffset])).toEqual([
      [0, 0, '41'],
      [1, 6, '-1'],
    ]);
  });
});
