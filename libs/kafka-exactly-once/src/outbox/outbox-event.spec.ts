import { decodeHeaders, encodeHeaders, keyLockId, outboxMessage, type OutboxRow } from './outbox-event';

describe('outbox events', () => {
  it('keep every header byte a string can carry (NUL, quotes, non-ASCII) through the table and back', () => {
    const headers = { 'message-id': 'm\u0000"1"', 'x-note': 'caf\u00e9 \u{1f600}', 'event-type': 'a.B' };
    expect(decodeHeaders(encodeHeaders(headers))).toEqual(headers);
  });

  it('give a key of one topic one lock, and other keys or topics other locks', () => {
    const key = Buffer.from('acct-1');
    expect(keyLockId('payments', key)).toBe(keyLockId('payments', Buffer.from('acct-1')));
    expect(keyLockId('payments', key)).not.toBe(keyLockId('payments', Buffer.from('acct-2')));
    expect(keyLockId('payments', key)).not.toBe(keyLockId('refunds', key));
    // The topic and the key are separated: ("ab", "c") and ("a", "bc") are different locks.
    expect(keyLockId('ab', Buffer.from('c'))).not.toBe(keyLockId('a', Buffer.from('bc')));
    expect(BigInt(keyLockId('payments', key))).toBeGreaterThanOrEqual(-(2n ** 63n));
    expect(BigInt(keyLockId('payments', key))).toBeLessThan(2n ** 63n);
  });

  it('are sent with the key, value and headers they were written with', () => {
    const row: OutboxRow = { position: '1', id: 'm1', aggregatetype: 't', aggregateid: Buffer.from('k'), type: 'a.B', payload: Buffer.from([0xc3, 0x01, 0]), headers: encodeHeaders({ 'message-id': 'm1' }), created_at: new Date() };
    expect(outboxMessage(row)).toEqual({ key: Buffer.from('k'), value: Buffer.from([0xc3, 0x01, 0]), headers: { 'message-id': 'm1' } });
  });
});
