import { createTestDatabase } from './test-database';
import { startTestKafka } from './test-kafka';
import { uniqueTopicName } from './test-topics';

/** The helpers' refusals and their KAFKA_BROKERS path: nothing here starts a broker or connects to a database. */
describe('kafka-exactly-once/testing helpers', () => {
  const saved = process.env.KAFKA_BROKERS;
  afterEach(() => {
    if (saved === undefined) delete process.env.KAFKA_BROKERS;
    else process.env.KAFKA_BROKERS = saved;
  });

  it('uses the brokers of KAFKA_BROKERS without starting one, and stop() leaves them alone', async () => {
    process.env.KAFKA_BROKERS = ' 10.0.0.1:9092 , 10.0.0.2:9092,';
    const kafka = await startTestKafka();
    expect(kafka).toMatchObject({ brokers: ['10.0.0.1:9092', '10.0.0.2:9092'], started: false });
    await expect(kafka.stop()).resolves.toBeUndefined();
  });

  it('refuses a port that leaves no room for the five ports after it', async () => {
    await expect(startTestKafka({ port: 65531 })).rejects.toThrow(/port must be an integer from 1024 to 65530/);
    await expect(startTestKafka({ port: 80 })).rejects.toThrow(RangeError);
    await expect(startTestKafka({ port: 9092.5 })).rejects.toThrow(RangeError);
  });

  it('names topics of its own per call, and refuses a prefix Kafka would refuse', () => {
    const a = uniqueTopicName('orders');
    expect(a).toMatch(/^orders\.[0-9a-f]{8}$/);
    expect(uniqueTopicName('orders')).not.toBe(a);
    expect(() => uniqueTopicName('orders/placed')).toThrow(RangeError);
    expect(() => uniqueTopicName('')).toThrow(RangeError);
  });

  it('refuses a database name that is not a plain lower-case identifier, before connecting', async () => {
    for (const name of ['Orders', 'a"; DROP DATABASE postgres; --', '1abc', 'x'.repeat(64)]) {
      await expect(createTestDatabase({ serverUrl: 'postgres://nobody@127.0.0.1:1/none', name })).rejects.toThrow(RangeError);
    }
  });
});
