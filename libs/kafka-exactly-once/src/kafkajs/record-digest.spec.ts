import { decodedHeaders, messageDigest, recordDigest } from './record-digest';

const b = (s: string) => Buffer.from(s);

describe('recordDigest', () => {
  it('is the same for the same bytes, whatever order different header names come in', () => {
    const one = recordDigest('t', b('k'), b('v'), [['a', b('1')], ['b', b('2')], ['a', b('3')]]);
    expect(recordDigest('t', b('k'), b('v'), [['b', b('2')], ['a', b('1')], ['a', b('3')]])).toBe(one);
    // As KafkaJS decodes them: a repeated name as an array, in order.
    expect(recordDigest('t', b('k'), b('v'), decodedHeaders({ a: [b('1'), b('3')], b: b('2') }))).toBe(one);
  });

  it('tells apart the order of one name\'s values, null from empty, and where one field ends and the next begins', () => {
    const base = recordDigest('t', b('k'), b('v'), [['a', b('1')], ['a', b('3')]]);
    const different = [
      recordDigest('t', b('k'), b('v'), [['a', b('3')], ['a', b('1')]]),
      recordDigest('t', null, b('v'), [['a', b('1')], ['a', b('3')]]),
      recordDigest('t', b(''), b('v'), [['a', b('1')], ['a', b('3')]]),
      recordDigest('t', b('k'), null, [['a', b('1')], ['a', b('3')]]),
      recordDigest('tk', b(''), b('v'), [['a', b('1')], ['a', b('3')]]),
      recordDigest('t', b('k'), b('v'), [['a', b('1')], ['a', null]]),
      recordDigest('t', b('k'), b('v'), [['a', b('1')], ['a', b('')]]),
      recordDigest('t', b('k'), b('v'), [['a', b('1')]]),
      recordDigest('u', b('k'), b('v'), [['a', b('1')], ['a', b('3')]]),
      // Bytes that are not UTF-8, told apart (no text conversion).
      recordDigest('t', b('k'), Buffer.from([0xff]), []),
    ];
    expect(new Set([base, ...different]).size).toBe(different.length + 1);
    expect(recordDigest('t', b('k'), Buffer.from([0xff]), [])).not.toBe(recordDigest('t', b('k'), Buffer.from([0xfe]), []));
  });

  it('reads headers named like Object members as KafkaJS decodes them (its fold puts the inherited member first)', () => {
    // KafkaJS 2.2.4's record decoder, src/protocol/recordBatch/record/v0/decoder.js: a reduce over a plain object.
    const fold = (pairs: Array<{ key: string; value: Buffer | null }>) =>
      pairs.reduce<Record<string, unknown>>((obj, { key, value }) => {
        const existing = (obj as Record<string, unknown>)[key];
        return { ...obj, [key]: existing === undefined ? value : Array.isArray(existing) ? existing.concat([value]) : [existing, value] };
      }, {});
    const pairs: Array<[string, Buffer | null]> = [['constructor', b('1')], ['toString', b('2')], ['__proto__', b('3')], ['m', null]];
    const decoded = decodedHeaders(fold(pairs.map(([key, value]) => ({ key, value }))));
    expect(decoded).toEqual(expect.arrayContaining(pairs));
    expect(decoded).toHaveLength(pairs.length);
    expect(recordDigest('t', null, null, decoded)).toBe(recordDigest('t', null, null, pairs));
  });
});

describe('messageDigest', () => {
  it('is the digest of the record a producer sends as it is read back: text as its UTF-8 bytes, an array of values as the name repeated', () => {
    const read = recordDigest('t', b('k'), b('vé'), decodedHeaders({ a: [b('1'), b('3')], b: b('2') }));
    expect(messageDigest('t', { key: 'k', value: b('vé'), headers: { b: '2', a: ['1', b('3')] } })).toBe(read);
    expect(messageDigest('t', { key: b('k'), value: 'vé', headers: { a: [b('1'), '3'], b: b('2') } })).toBe(read);
    expect(messageDigest('t', { key: null, value: null })).toBe(recordDigest('t', null, null, []));
    expect(messageDigest('t', { key: 'k', value: 'vé', headers: { a: ['3', '1'], b: '2' } })).not.toBe(read);
  });
});
