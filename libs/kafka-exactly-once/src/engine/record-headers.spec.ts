import { headerPairs, outputSize, textHeaderPairs, toKafkaHeaders, toKafkaMessage, toProduceRequests } from './record-headers';
import type { RecordedOutput } from '../inbox/inbox.repository';

describe('record headers and produce requests', () => {
  it('keeps every header byte for byte through JSON (NUL, invalid UTF-8, repeated names, null values)', () => {
    const original = {
      'message-id': Buffer.from('a\u0000b'),
      binary: Buffer.from([0xff, 0x00, 0xfe]),
      repeated: [Buffer.from('one'), Buffer.from('two')],
      empty: null as unknown as Buffer,
    };
    const output: RecordedOutput = JSON.parse(JSON.stringify({ topic: 't', key: null, value: null, h: headerPairs(original) }));
    const headers = toKafkaHeaders(output);
    expect((headers['message-id'] as Buffer).equals(original['message-id'])).toBe(true);
    expect((headers.binary as Buffer).equals(original.binary)).toBe(true);
    expect((headers.repeated as Buffer[]).map((b) => b.toString())).toEqual(['one', 'two']);
    expect(headers.empty).toBeNull();
  });

  it('still replays the text headers of rows written before 0.2', () => {
    const message = toKafkaMessage({ topic: 't', key: Buffer.from('k').toString('base64'), value: null, headers: { 'message-id': 'm-1' } });
    expect(message.headers).toEqual({ 'message-id': 'm-1' });
    expect(message.key?.toString()).toBe('k');
  });

  it('cuts outputs into requests of bounded size, keeping their order', () => {
    const output = (i: number): RecordedOutput => ({
      topic: i % 2 === 0 ? 'a' : 'b',
      key: Buffer.from(`k${i}`).toString('base64'),
      value: Buffer.alloc(1000, i).toString('base64'),
      h: textHeaderPairs({ n: String(i) }),
    });
    const outputs = Array.from({ length: 10 }, (_, i) => output(i));
    expect(outputSize(outputs[0])).toBeGreaterThan(1000);
    const requests = toProduceRequests(outputs, 3500);
    expect(requests.length).toBe(4); // three outputs of ~1.1 KB per request
    const flattened = requests.flatMap((r) => r.flatMap((t) => t.messages.map((m) => Number((m.headers?.n as Buffer).toString()))));
    expect([...flattened].sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const topic of ['a', 'b']) {
      const order = requests.flatMap((r) => r.filter((t) => t.topic === topic).flatMap((t) => t.messages.map((m) => Number((m.headers?.n as Buffer).toString()))));
      expect(order).toEqual([...order].sort((x, y) => x - y));
    }
    expect(toProduceRequests(outputs, 1)).toHaveLength(10); // one output never splits
    // A topic's own limit (max.message.bytes of one record batch) cuts its outputs apart too.
    const limited = toProduceRequests(outputs, 100000, (topic) => (topic === 'a' ? 2500 : undefined));
    for (const request of limited) expect(request.find((t) => t.topic === 'a')?.messages.length ?? 0).toBeLessThanOrEqual(2);
    expect(limited.flatMap((r) => r.flatMap((t) => t.messages))).toHaveLength(10);
    expect(toProduceRequests([], 1000)).toEqual([]);
  });
});
