import { hash } from 'crypto';
import { coordinatesDigest, displayMessageId, identify, isPlainText, outputIdSeed, sha256Hex, storableText } from './record-identity';

describe('record identity', () => {
  const message = (id?: Buffer | string, offset = '7') => ({ offset, headers: id === undefined ? {} : { 'message-id': id as Buffer } });

  it('keys a record by the SHA-256 of its raw message id bytes, scoped by topic unless group-wide', () => {
    const id = identify('payments', 0, message(Buffer.from('m-1')), 'topic');
    expect(id).toEqual({ raw: Buffer.from('m-1'), digest: sha256Hex(Buffer.from('m-1')), kind: 'message-id', scope: 'payments', displayId: 'm-1' });
    expect(identify('orders', 3, message(Buffer.from('m-1')), 'topic').scope).toBe('orders');
    expect(identify('orders', 3, message(Buffer.from('m-1')), 'group')).toMatchObject({ scope: '', digest: id.digest });
  });

  it('falls back to topic/partition/offset for a missing or empty message id', () => {
    expect(identify('payments', 2, message(undefined, '41'), 'topic').displayId).toBe('payments/2/41');
    expect(identify('payments', 2, message(Buffer.alloc(0), '41'), 'topic').displayId).toBe('payments/2/41');
  });

  it('keeps coordinates in a namespace no message id reaches: a header spelling them is another identity', () => {
    const coordinates = identify('payments', 0, message(undefined, '5'), 'topic');
    const forged = identify('payments', 0, message(Buffer.from('payments/0/5'), '4'), 'topic');
    expect(coordinates).toMatchObject({ kind: 'coordinates', scope: 'payments', displayId: 'payments/0/5' });
    expect(forged).toMatchObject({ kind: 'message-id', scope: 'payments', displayId: 'payments/0/5' });
    expect(coordinates.digest).not.toBe(forged.digest);
    // Not the SHA-256 of any bytes a header could carry, neither the text nor the text behind the domain tag.
    expect(coordinates.digest).toBe(coordinatesDigest('payments/0/5'));
    expect(coordinates.digest).toBe(hash('sha3-256', 'kafka-eo coordinates\u0000payments/0/5', 'hex'));
    expect(coordinates.digest).not.toBe(sha256Hex(Buffer.from('kafka-eo coordinates\u0000payments/0/5')));
    // The outputs' ids are derived apart as well, so that downstream consumers keep both records' outputs.
    expect(outputIdSeed(coordinates)).not.toBe(outputIdSeed(forged));
    // Group-wide, a header of any topic spelling the coordinates is still another identity.
    expect(identify('orders', 1, message(Buffer.from('payments/0/5')), 'group').digest).not.toBe(identify('payments', 0, message(undefined, '5'), 'group').digest);
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
