import { createHash } from 'crypto';
import { KeyUnresolvedError, keyDigestFromOperator, orderingKeyBytes, orderingKeyOf } from './ordering-key';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('ordering keys', () => {
  it('takes text, numbers, bigints and bytes', () => {
    expect(orderingKeyBytes('acct-1')).toEqual(Buffer.from('acct-1'));
    expect(orderingKeyBytes(42)).toEqual(Buffer.from('42'));
    expect(orderingKeyBytes(9007199254740993n)).toEqual(Buffer.from('9007199254740993'));
    expect(orderingKeyBytes(Buffer.from([0, 255]))).toEqual(Buffer.from([0, 255]));
  });

  it('refuses nothing usable with KeyUnresolvedError, saying what came back', () => {
    expect(() => orderingKeyBytes('')).toThrow(/an empty key/);
    expect(() => orderingKeyBytes(Buffer.alloc(0))).toThrow(/an empty key/);
    expect(() => orderingKeyBytes(null)).toThrow(/returned null/);
    expect(() => orderingKeyBytes(undefined)).toThrow(/returned undefined/);
    expect(() => orderingKeyBytes(NaN)).toThrow(/returned NaN/);
    expect(() => orderingKeyBytes({} as never)).toThrow(KeyUnresolvedError);
  });

  it('is known by the digest of its bytes, shown as text when it is plain text', () => {
    expect(orderingKeyOf(Buffer.from('acct-1'))).toMatchObject({ digest: sha(Buffer.from('acct-1')), display: 'acct-1' });
    const binary = Buffer.from([0xff, 0x00, 0x01]);
    expect(orderingKeyOf(binary).display).toBe(`sha256:${sha(binary)} (3 bytes)`);
  });

  it('is named by an operator as text, or as sha256:<digest> for bytes', () => {
    expect(keyDigestFromOperator('acct-1')).toBe(sha(Buffer.from('acct-1')));
    const digest = sha(Buffer.from([0xff]));
    expect(keyDigestFromOperator(`sha256:${digest}`)).toBe(digest);
    // As listed and logged: the digest form with its length (and the first characters of a long text key).
    expect(keyDigestFromOperator(orderingKeyOf(Buffer.from([0xff])).display)).toBe(digest);
    const long = Buffer.from('k'.repeat(300));
    expect(keyDigestFromOperator(orderingKeyOf(long).display)).toBe(sha(long));
    // Not a digest form: the text itself.
    expect(keyDigestFromOperator('sha256:xyz')).toBe(sha(Buffer.from('sha256:xyz')));
  });
});
