import { createHash } from 'crypto';
import { idempotencyKey, outputMessageId, uuidv7 } from './message-ids';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-([0-9a-f])[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('message ids', () => {
  it('derives the same output id on every replay, a different one per group, input and index', () => {
    const id = outputMessageId('g', 'input-1', 0);
    expect(id).toMatch(UUID);
    expect(id.charAt(14)).toBe('5');
    expect(outputMessageId('g', 'input-1', 0)).toBe(id);
    expect(new Set([id, outputMessageId('g', 'input-1', 1), outputMessageId('g', 'input-2', 0), outputMessageId('h', 'input-1', 0)]).size).toBe(4);
  });

  it('derives the ids earlier versions derived (a replay after an upgrade carries the same ids)', () => {
    expect(outputMessageId('payments', 'm-1', 0)).toBe('e3eeb68e-403a-5ce1-bf7d-fdab804a1fe7');
    expect(outputMessageId('grüppe', 'ünï\u0000code', 3)).toBe('0f7311e3-6406-5879-985e-f1c34352b69e');
  });

  it('makes UUIDv7 ids that sort by creation time', () => {
    const early = uuidv7(1_700_000_000_000);
    const late = uuidv7(1_700_000_000_001);
    expect(early).toMatch(UUID);
    expect(early.charAt(14)).toBe('7');
    expect(early < late).toBe(true);
    expect(early.slice(0, 13)).toBe('018bcfe5-6800');
  });
});

describe('idempotencyKey', () => {
  it('is a UUID (version 8) of the group and the inbox key: the same for every run of a record, different for any other', () => {
    const key = idempotencyKey('billing', 'payments', 'a'.repeat(64));
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(idempotencyKey('billing', 'payments', 'a'.repeat(64))).toBe(key);
    expect(idempotencyKey('receipts', 'payments', 'a'.repeat(64))).not.toBe(key);
    expect(idempotencyKey('billing', 'orders', 'a'.repeat(64))).not.toBe(key);
    expect(idempotencyKey('billing', 'payments', 'b'.repeat(64))).not.toBe(key);
    // Fixed: a key given to a payment provider yesterday must be the same key today.
    expect(idempotencyKey('g', 't', '0'.repeat(64))).toBe(idempotencyKeyOf('g', 't', '0'.repeat(64)));
  });
});

/** The derivation, written out: SHA-256 of the namespace tag, group, scope and digest, as a version 8 UUID. */
function idempotencyKeyOf(group: string, scope: string, digest: string): string {
  const bytes = createHash('sha256').update('kafka-eo idempotency key\u0000').update(`${group}\u0000${scope}\u0000${digest}`).digest().subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x80;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
