import { recordDigest, takeCommitted } from '../kafkajs';
import { leaveOut } from './delivered-outputs';
import type { OutputRecord } from './output-record';

const output = (topic: string, value: string, headers: Array<[string, Buffer | null]> = [['message-id', Buffer.from('m')]]): OutputRecord => ({
  topic,
  key: Buffer.from('k'),
  value: Buffer.from(value),
  headers,
});
const digestOf = (o: OutputRecord) => recordDigest(o.topic, o.key, o.value, o.headers);
/** What a replayed record sends: its outputs less those it takes from the committed records left. */
const replay = (left: Map<string, number>, outputs: OutputRecord[]) => leaveOut(outputs, takeCommitted(left, outputs.map(digestOf)));

describe('leaving out outputs already committed', () => {
  it('leaves out only outputs whose every byte a committed record carries, as many times as such records were found', () => {
    const a = output('out', 'a');
    const left = new Map([[digestOf(a), 1], [digestOf(output('out.dlq', 'c')), 2]]);
    // The same message id with other bytes, or on another topic, is sent.
    const outputs = [a, output('out', 'b'), output('other', 'a'), output('out.dlq', 'c'), output('out.dlq', 'c'), output('out.dlq', 'c')];
    expect(replay(left, outputs).map((o) => `${o.topic}/${o.value}`)).toEqual(['out/b', 'other/a', 'out.dlq/c']);
    expect(left.size).toBe(0);
    // Each committed record counts once: another record's output with the same bytes is sent.
    expect(replay(left, [a])).toEqual([a]);
  });

  it('leaves out what a record took, as many of a digest as it took, whatever the order of its outputs', () => {
    const [a, b] = [output('out', 'a'), output('out', 'b')];
    expect(leaveOut([a, b, a, a], [digestOf(a), digestOf(a)])).toEqual([b, a]);
    expect(leaveOut([a, b], [])).toEqual([a, b]);
  });

  it('tells outputs apart by their headers: an empty message id, another id, an added header', () => {
    const sent = output('out', 'v', [['message-id', Buffer.alloc(0)]]);
    const left = new Map([[digestOf(sent), 1]]);
    const others = [output('out', 'v', [['message-id', Buffer.from('x')]]), output('out', 'v', [['message-id', null]]), output('out', 'v', [['message-id', Buffer.alloc(0)], ['x', Buffer.alloc(0)]]), output('out', 'v', [])];
    expect(replay(left, others)).toEqual(others);
    expect(replay(left, [sent])).toEqual([]);
  });
});
