import { DeliveredOutputs } from './delivered-outputs';
import type { OutputRecord } from './output-record';

const output = (topic: string, id: string | null, extra: Array<[string, Buffer | null]> = []): OutputRecord => ({
  topic,
  key: Buffer.from('k'),
  value: Buffer.from('v'),
  headers: [...extra, ...(id === null ? [] : ([['message-id', Buffer.from(id)]] as Array<[string, Buffer]>))],
});

describe('DeliveredOutputs', () => {
  const delivered = () => new DeliveredOutputs(new Map([['out', new Set(['a', 'b'])], ['out.dlq', new Set(['c'])]]), 10n);

  it('leaves out only the outputs whose topic and message id were found committed, and counts them', () => {
    const d = delivered();
    const kept = d.undelivered([output('out', 'a'), output('out', 'x'), output('other', 'b'), output('out.dlq', 'c'), output('out.dlq', 'a')]);
    expect(kept.map((o) => `${o.topic}/${o.headers.at(-1)?.[1]?.toString()}`)).toEqual(['out/x', 'other/b', 'out.dlq/a']);
    expect(d.skipped).toBe(2);
    expect(d.size).toBe(3);
    expect(d.until).toBe(10n);
  });

  it('sends an output without a message id, or with a null one, as it is', () => {
    const d = delivered();
    const none = output('out', null);
    const nul = output('out', null, [['message-id', null]]);
    expect(d.undelivered([none, nul])).toEqual([none, nul]);
    expect(d.skipped).toBe(0);
  });

  it('reads the first message-id header of an output, as the reader of the log does', () => {
    const d = delivered();
    expect(d.undelivered([output('out', 'x', [['message-id', Buffer.from('a')]])])).toEqual([]);
    expect(d.undelivered([output('out', 'a', [['message-id', Buffer.from('x')]])])).toHaveLength(1);
  });
});
