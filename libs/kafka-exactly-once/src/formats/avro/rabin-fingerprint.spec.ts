import * as avro from 'avsc';
import { fingerprintBytes, rabinFingerprint64 } from './rabin-fingerprint';
import { canonicalForm } from './schema-registry';

/**
 * Vectors from the Avro project's share/test/data/schema-tests.txt: input schema, its Parsing Canonical Form,
 * and the 64-bit Rabin fingerprint that the Java implementation computes for it.
 */
const VECTORS: Array<[string, string, bigint]> = [
  ['"null"', '"null"', 7195948357588979594n],
  ['"boolean"', '"boolean"', -6970731678124411036n],
  ['"int"', '"int"', 8247732601305521295n],
  ['"long"', '"long"', -3434872931120570953n],
  ['"float"', '"float"', 5583340709985441680n],
  ['"double"', '"double"', -8181574048448539266n],
  ['"bytes"', '"bytes"', 5746618253357095269n],
  ['"string"', '"string"', -8142146995180207161n],
  ['{"fields":[], "type":"record", "name":"foo"}', '{"name":"foo","type":"record","fields":[]}', -4824392279771201922n],
  ['{"fields":[], "type":"record", "name":"foo", "namespace":"x.y"}', '{"name":"x.y.foo","type":"record","fields":[]}', 5916914534497305771n],
  ['{"fields":[], "type":"record", "name":"a.b.foo", "namespace":"x.y"}', '{"name":"a.b.foo","type":"record","fields":[]}', -4616218487480524110n],
  ['{"fields":[], "type":"record", "name":"foo", "doc":"Useful info"}', '{"name":"foo","type":"record","fields":[]}', -4824392279771201922n],
  ['{"fields":[{"type":{"type":"boolean"}, "name":"f1"}], "type":"record", "name":"foo"}', '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"}]}', 7843277075252814651n],
  [
    '{"fields":[{"type":"boolean","aliases":[],"name":"f1","default":true},{"order":"descending","name":"f2","doc":"Hello","type":"int"}],"type":"record","name":"foo"}',
    '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"},{"name":"f2","type":"int"}]}',
    -4860222112080293046n,
  ],
  ['{"type":"enum", "name":"foo", "symbols":["A1"]}', '{"name":"foo","type":"enum","symbols":["A1"]}', -6342190197741309591n],
  ['{"namespace":"x.y.z", "type":"enum", "name":"foo", "doc":"foo bar", "symbols":["A1", "A2"]}', '{"name":"x.y.z.foo","type":"enum","symbols":["A1","A2"]}', -4448647247586288245n],
  ['{"name":"foo","type":"fixed","size":15}', '{"name":"foo","type":"fixed","size":15}', 1756455273707447556n],
  ['{"namespace":"x.y.z", "type":"fixed", "name":"foo", "doc":"foo bar", "size":32}', '{"name":"x.y.z.foo","type":"fixed","size":32}', -3064184465700546786n],
  ['{ "items":{"type":"null"}, "type":"array"}', '{"type":"array","items":"null"}', -589620603366471059n],
  ['{ "values":"string", "type":"map"}', '{"type":"map","values":"string"}', -8732877298790414990n],
  [
    '{"name":"PigValue","type":"record","fields":[{"name":"value", "type":["null", "int", "long", "PigValue"]}]}',
    '{"name":"PigValue","type":"record","fields":[{"name":"value","type":["null","int","long","PigValue"]}]}',
    -1759257747318642341n,
  ],
];

describe('CRC-64-AVRO fingerprint', () => {
  it.each(VECTORS)('%s', (input, canonical, expected) => {
    const type = avro.Type.forSchema(JSON.parse(input));
    const form = canonicalForm(type);
    expect(form).toBe(canonical);
    expect(rabinFingerprint64(Buffer.from(form, 'utf8'))).toBe(expected);
  });

  it('writes the fingerprint little-endian, as single-object encoding puts it on the wire', () => {
    // "string": -8142146995180207161 = 0x8F014872634503C7 as unsigned, so the first byte on the wire is C7.
    expect(fingerprintBytes(-8142146995180207161n).toString('hex')).toBe('c70345637248018f');
  });
});
