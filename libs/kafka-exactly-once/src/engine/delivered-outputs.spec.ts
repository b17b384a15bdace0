import { recordDigest } from '../kafkajs';
import { DeliveredOutputs } from './delivered-outputs';
import type { OutputRecord } from './output-record';

const output = (topic: string, value: string, headers: Array<[string, Buffer | null]> = [['message-id', Buffer.from('m')]]): OutputRecord => ({
  topic,
  key: Buffer.from('k'),
  value: Buffer.from(value),
  headers,
});
const digestOf = (o: OutputRecord) => recordDigest(o.topic, o.key, o.value, o.headers);

describe('DeliveredOutputs', () => {
  it('leaves out only outputs whose every byte a committed record carries, as many times as such records were found', () => {
    const a = output('out', 'a');
    const d = new DeliveredOutputs(new Map([[digestOf(a), 1], [digestOf(output('out.dlq', 'c')), 2]]), 10n);
    expect(d.found).toBe(3);
    expect(d.until).toBe(10n);
    // The same message id with other bytes, or on another topic, is sent.
    const outputs = [a, output('out', 'b'), output('other', 'a'), output('out.dlq', 'c'), output('out.dlq', 'c'), output('out.dlq', 'c')];
    const kept = d.undelivered('5', outputs);
    expect(kept.map((o) => `${o.topic}/${o.value}`)).toEqual(['out/b', 'other/a', 'out.dlq/c']);
    expect(d.skipped).toBe(3);
    // The same record replayed again (its unit of work failed and runs again): the same outputs left out.
    expect(d.undelivered('5', outputs)).toEqual(kept);
    expect(d.skipped).toBe(3);
    // Each committed record counts once: another record's output with the same bytes is sent.
    expect(d.undelivered('6', [a])).toEqual([a]);
  });

  it('tells outputs apart by their headers: an empty message id, another id, an added header', () => {
    const sent = output('out', 'v', [['message-id', Buffer.alloc(0)]]);
    const d = new DeliveredOutputs(new Map([[digestOf(sent), 1]]), 1n);
    const others = [output('out', 'v', [['message-id', Buffer.from('x')]]), output('out', 'v', [['message-id', null]]), output('out', 'v', [['message-id', Buffer.alloc(0)], ['x', Buffer.alloc(0)]]), output('out', 'v', [])];
    expect(d.undelivered('0', others)).toEqual(others);
    expect(d.undelivered('1', [sent])).toEqual([]);
  });
});
