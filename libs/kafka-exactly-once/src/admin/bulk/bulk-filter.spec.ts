import { OperatorRequestError } from '../../errors/operator-request.error';
import { bulkSelection, containsPattern, ratePerSecond, selectionDigest } from './bulk-filter';

function refusal(run: () => unknown): { field?: string; message: string } {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(OperatorRequestError);
    expect((err as OperatorRequestError).status).toBe(400);
    return { field: (err as OperatorRequestError).field, message: (err as Error).message };
  }
  throw new Error('not refused');
}

describe('bulk action filters', () => {
  it('takes each kind with its own actions only', () => {
    expect(bulkSelection('dead-letters', 'replay', {})).toEqual({ kind: 'dead-letters', action: 'replay', filter: {} });
    expect(bulkSelection('parked-keys', 'release', undefined).action).toBe('release');
    expect(bulkSelection('outbox-set-aside', 'discard', null).action).toBe('discard');
    expect(refusal(() => bulkSelection('dead-letters', 'discard', {}))).toMatchObject({ field: 'action', message: expect.stringContaining('replay for dead-letters') });
    expect(refusal(() => bulkSelection('inbox', 'replay', {}))).toMatchObject({ field: 'kind' });
    expect(refusal(() => bulkSelection(undefined, 'replay', {}))).toMatchObject({ field: 'kind' });
  });

  it('refuses unknown fields, wrong types, long texts, bad reasons and bad times, naming the field', () => {
    const dead = (filter: unknown) => () => bulkSelection('dead-letters', 'replay', filter);
    expect(refusal(dead({ colour: 'red' }))).toMatchObject({ field: 'colour' });
    expect(refusal(dead([]))).toMatchObject({ field: 'filter' });
    expect(refusal(dead({ topic: 7 }))).toMatchObject({ field: 'topic' });
    expect(refusal(dead({ topic: 't'.repeat(250) }))).toMatchObject({ field: 'topic' });
    expect(refusal(dead({ error: 'e'.repeat(201) }))).toMatchObject({ field: 'error' });
    expect(refusal(dead({ reason: 'bored' }))).toMatchObject({ field: 'reason' });
    expect(refusal(dead({ from: 'yesterday' }))).toMatchObject({ field: 'from' });
    expect(refusal(dead({ from: '2026-12-06' }))).toMatchObject({ field: 'from' });
    expect(refusal(dead({ to: '2026-13-45T10:00:00Z' }))).toMatchObject({ field: 'to' });
    expect(refusal(dead({ from: '2026-12-06T10:00:00Z', to: '2026-12-06T09:00:00Z' }))).toMatchObject({ field: 'to' });
    expect(refusal(() => bulkSelection('outbox-set-aside', 'retry', { reason: 'handler-failed' }))).toMatchObject({ field: 'reason' });
  });

  it('writes a filter one way: empty fields left out, times in UTC', () => {
    const selection = bulkSelection('dead-letters', 'replay', { topic: 'payments', reason: '', error: 'ledger', from: '2026-12-06T11:00:00+01:00', key: 'acct-1' });
    expect(selection.filter).toEqual({ topic: 'payments', error: 'ledger', from: '2026-12-06T10:00:00.000Z', key: 'acct-1' });
  });

  it('gives the same filter the same digest, whatever the order or spelling of its fields, and another filter another', () => {
    const a = selectionDigest(bulkSelection('dead-letters', 'replay', { topic: 'payments', from: '2026-12-06T10:00:00Z' }));
    const b = selectionDigest(bulkSelection('dead-letters', 'replay', { from: '2026-12-06T11:00:00.000+01:00', topic: 'payments', key: '' }));
    expect(b).toBe(a);
    expect(selectionDigest(bulkSelection('dead-letters', 'replay', { topic: 'payments' }))).not.toBe(a);
    expect(selectionDigest(bulkSelection('outbox-set-aside', 'retry', {}))).not.toBe(selectionDigest(bulkSelection('outbox-set-aside', 'discard', {})));
    expect(a).toMatch(/^[0-9a-f]{64}$/);
  });

  it('looks for an error text as the characters it is (% and _ and \\ escaped)', () => {
    expect(containsPattern('50%_off\\')).toBe('%50\\%\\_off\\\\%');
  });

  it('takes a rate of 1 to 100 items a second, 10 by default', () => {
    expect(ratePerSecond(undefined)).toBe(10);
    expect(ratePerSecond(100)).toBe(100);
    for (const bad of [0, 101, 2.5, '10']) expect(refusal(() => ratePerSecond(bad))).toMatchObject({ field: 'ratePerSecond' });
  });
});
