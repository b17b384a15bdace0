import { headerPairs, MessageHeaderReader, textHeaderPairs, toKafkaHeaders, toKafkaMessage, toProduceRequests } from './record-headers';
import { type RecordedOutput, decodeUnitOutputs, encodeUnitOutputs, fromRecordedOutput, OutputRecord, outputRecordSize, toRecordedOutput } from './output-record';

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
    const message = toKafkaMessage(fromRecordedOutput({ topic: 't', key: Buffer.from('k').toString('base64'), value: null, headers: { 'message-id': 'm-1' } }));
    expect({ ...message.headers }).toEqual({ 'message-id': Buffer.from('m-1') });
    expect(message.key?.toString()).toBe('k');
  });

  it('cuts outputs into requests of bounded size, keeping their order', () => {
    const output = (i: number): OutputRecord => ({
      topic: i % 2 === 0 ? 'a' : 'b',
      key: Buffer.from(`k${i}`),
      value: Buffer.alloc(1000, i),
      headers: [['n', Buffer.from(String(i))]],
    });
    const outputs = Array.from({ length: 10 }, (_, i) => output(i));
    expect(outputRecordSize(outputs[0])).toBeGreaterThan(1000);
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

  it('keeps a unit\'s outputs byte for byte in its blob, each under the offset of the record that emitted it', () => {
    const hostile: OutputRecord = {
      topic: 'payments.processed',
      key: Buffer.from([0x00, 0xff, 0xfe]),
      value: null,
      headers: [
        ['message-id', Buffer.from('a\u0000b')],
        ['repeated', Buffer.from('one')],
        ['repeated', Buffer.from('two')],
        ['nul', null],
        ['ünïcode ✓', Buffer.alloc(0)],
        ['__proto__', Buffer.from([0x70])],
      ],
    };
    const large: OutputRecord = { topic: 't', key: null, value: Buffer.alloc(300000, 7), headers: [] };
    const blob = encodeUnitOutputs([
      { offset: '9007199254740993', outputs: [hostile, large] }, // above 2^53: kept exactly
      { offset: '12', outputs: [] },
      { offset: '13', outputs: [large] },
    ]);
    const back = decodeUnitOutputs(blob);
    expect([...back.keys()]).toEqual(['9007199254740993', '13']);
    expect(back.get('9007199254740993')).toEqual([hostile, large]);
    expect(back.get('13')).toEqual([large]);
    // Through the row's JSON form too (a dead letter's, a retry tier's), and into KafkaJS's headers.
    expect(fromRecordedOutput(JSON.parse(JSON.stringify(toRecordedOutput(hostile))))).toEqual(hostile);
    const headers = toKafkaMessage(hostile).headers!;
    expect((headers.repeated as Buffer[]).map((b) => b.toString())).toEqual(['one', 'two']);
    expect(headers.nul).toBeNull();
    expect(Object.getPrototypeOf(headers)).toBeNull();
    // A blob cut short, or of another format, is an error: never read as fewer outputs.
    expect(() => decodeUnitOutputs(blob.subarray(0, blob.length - 1))).toThrow(/truncated/);
    expect(() => decodeUnitOutputs(Buffer.from([2]))).toThrow(/unknown format/);
    expect(decodeUnitOutputs(encodeUnitOutputs([]))).toEqual(new Map());
  });

  it('reads one header as text for tracing: the first of a repeated name, nothing for a null value or a name Object has', () => {
    const headers = Object.assign(Object.create(null), { traceparent: Buffer.from('00-ab-cd-01'), repeated: [Buffer.from('first'), Buffer.from('second')], gone: null }) as never;
    const reader = new MessageHeaderReader({ headers } as never);
    expect(reader.get('traceparent')).toBe('00-ab-cd-01');
    expect(reader.get('repeated')).toBe('first');
    expect(reader.get('gone')).toBeUndefined();
    expect(reader.get('absent')).toBeUndefined();
    expect(new MessageHeaderReader({ headers: { a: Buffer.from('1') } } as never).get('constructor')).toBeUndefined();
    expect(new MessageHeaderReader({} as never).get('traceparent')).toBeUndefined();
    expect(reader.names()).toEqual(['traceparent', 'repeated', 'gone']);
  });
});
