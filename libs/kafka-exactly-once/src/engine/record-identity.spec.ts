import { displayMessageId, identify, isPlainText, sha256Hex, storableText } from './record-identity';

describe('record identity', () => {
  const message = (id?: Buffer | string, offset = '7') => ({ offset, headers: id === undefined ? {} : { 'message-id': id as Buffer } });

  it('keys a record by the SHA-256 of its raw message id bytes, scoped by topic unless group-wide', () => {
    const id = identify('payments', 0, message(Buffer.from('m-1')), 'topic');
    expect(id).toEqual({ raw: Buffer.from('m-1'), digest: sha256Hex(Buffer.from('m-1')), scope: 'payments', displayId: 'm-1' });
    expect(identify('orders', 3, message(Buffer.from('m-1')), 'topic').scope).toBe('orders');
    expect(identify('orders', 3, message(Buffer.from('m-1')), 'group')).toMatchObject({ scope: '', digest: id.digest });
  });

  it('falls back to topic/partition/offset for a missing or empty message id', () => {
    expect(identify('payments', 2, message(undefined, '41'), 'topic').displayId).toBe('payments/2/41');
    expect(identify('payments', 2, message(Buffer.alloc(0), '41'), 'topic').displayId).toBe('payments/2/41');
  });

  it('takes the first of repeated message-id headers', () => {
    const id = identify('t', 0, { offset: '1', headers: { 'message-id': [Buffer.from('first'), Buffer.from('second')] } }, 'topic');
    expect(id.displayId).toBe('first');
  });

  it('keeps ids that text cannot hold apart and gives them a storable display form', () => {
    const nul = Buffer.from('abc\u0000def');
    const invalid = Buffer.from([0x61, 0xff, 0xfe, 0x62]);
    const long = Buffer.alloc(100_000, 0x61);
    for (const raw of [nul, invalid, long]) {
      const id = identify('t', 0, message(raw), 'topic');
      expect(id.raw.equals(raw)).toBe(true);
      expect(id.displayId).toMatch(/^sha256:[0-9a-f]{64} \(\d+ bytes/);
      expect(id.displayId).not.toContain('\u0000');
      expect(id.displayId.length).toBeLessThan(200);
    }
    // Different bytes that decode to the same lossy text are different ids.
    expect(identify('t', 0, message(Buffer.from([0xff])), 'topic').digest).not.toBe(identify('t', 0, message(Buffer.from([0xfe])), 'topic').digest);
  });

  it('tells plain text from bytes PostgreSQL text cannot hold', () => {
    expect(isPlainText(Buffer.from('héllo ✓'))).toBe(true);
    expect(isPlainText(Buffer.from([0x00]))).toBe(false);
    expect(isPlainText(Buffer.from([0xc3]))).toBe(false);
    expect(displayMessageId(Buffer.from('x'.repeat(200)))).toBe('x'.repeat(200));
    expect(displayMessageId(Buffer.from('x'.repeat(201)))).toMatch(/^sha256:.* \(201 bytes, starts "x{40}"\)$/);
  });

  it('makes error texts storable: no NUL, bounded length', () => {
    expect(storableText('a\u0000b')).toBe('a\\0b');
    expect(storableText('x'.repeat(10), 4)).toBe('xxxx…');
  });
});
