import { DecodeError } from '../errors/decode.error';
import { DEFAULT_JSON_LIMITS } from '../options/format-defaults';
import type { RegistrySchema } from '../registry/registry-schemas';
import { SchemaRegistry } from './avro/schema-registry';
import type { WriterCodec } from './format.codec';
import { JSON_CODEC } from './json/json.codec';
import { writerCodecs } from './writer-codecs';

const NOTE = { type: 'record', name: 'Note', namespace: 't', fields: [{ name: 'id', type: 'string' }, { name: 'n', type: 'long' }] };

function built(schemaType: string, text: string, references: RegistrySchema['references'] = []): WriterCodec {
  const writer = writerCodecs('bigint').build({ id: 7, schemaType, text, references });
  if (!('codec' in writer)) throw new Error(JSON.stringify(writer));
  return writer.codec;
}

describe('the formats\' codecs of registry writer schemas', () => {
  it('reads the kinds of schema the formats know, by schemaType', () => {
    const builder = writerCodecs('bigint');
    expect(['AVRO', 'JSON', 'PROTOBUF'].map((t) => builder.reads(t))).toEqual([true, true, true]);
    expect(builder.reads('XML')).toBe(false);
  });

  it('writes, reads back and checks an Avro value by the writer\'s type', () => {
    const codec = built('AVRO', JSON.stringify(NOTE));
    expect(codec).toMatchObject({ format: 'avro', schemaType: 'AVRO', validatesDecoded: false });
    const body = codec.encode({ id: 'a', n: 9007199254740993n });
    expect(codec.decode(body, DEFAULT_JSON_LIMITS)).toEqual({ value: { id: 'a', n: 9007199254740993n }, name: 't.Note' });
    expect(codec.validate({ id: 5 })).toEqual([
      { path: 'id', problem: 'expected a "string", got 5' },
      { path: 'n', problem: 'is missing (expected a "long")' },
    ]);
  });

  it('keeps one codec per Avro type: the application\'s own schema is the codec its records read with', () => {
    const schema = SchemaRegistry.fromSchemas([{ schema: NOTE }]).current('t.Note');
    const builder = writerCodecs('bigint');
    expect(builder.ownCodec(schema)).toBe(builder.ownCodec(schema));
    expect(builder.ownCodec(schema)).toMatchObject({ schemaType: 'AVRO', type: schema.type });
  });

  it('reads JSON Schema values as JSON text, checks them against the schema, and writes plain JSON', () => {
    const codec = built('JSON', JSON.stringify({ type: 'object', required: ['a'], properties: { a: { type: 'integer' } } }));
    expect(codec).toMatchObject({ format: 'json', schemaType: 'JSON', describe: 'JSON Schema id 7', validatesDecoded: true });
    const read = codec.decode(Buffer.from('{"a":"x"}'), DEFAULT_JSON_LIMITS);
    expect(read).toEqual({ value: { a: 'x' } });
    expect(codec.validate(read.value)).toEqual([{ path: 'a', problem: 'must be integer' }]);
    expect(codec.validate({ a: 1 })).toEqual([]);
    expect(codec.encode({ a: 1 }).toString()).toBe('{"a":1}');
    expect(() => codec.decode(Buffer.from('{"a":'), DEFAULT_JSON_LIMITS)).toThrow(DecodeError);
    expect(() => codec.decode(Buffer.from('{"a":'), DEFAULT_JSON_LIMITS)).toThrow(/^value of JSON Schema id 7: /);
  });

  it('reads and writes each message of a Protobuf schema by its name, and says what it cannot write', () => {
    const codec = built('PROTOBUF', 'syntax = "proto3"; package p; message M { int64 n = 1; } message N { string s = 1; }');
    expect(codec).toMatchObject({ format: 'protobuf', schemaType: 'PROTOBUF', describe: 'Protobuf schema id 7', validatesDecoded: false });
    expect(codec.decode(codec.encode({ s: 'x' }, 'p.N'), DEFAULT_JSON_LIMITS)).toEqual({ value: { s: 'x' }, name: 'p.N' });
    expect(codec.decode(codec.encode({ n: 2n ** 62n }), DEFAULT_JSON_LIMITS)).toEqual({ value: { n: String(2n ** 62n) }, name: 'p.M' });
    expect(codec.validate({ s: 'x' }, 'p.N')).toEqual([]);
    expect(codec.validate({ nope: 1 }, 'p.M')).toEqual([{ path: '', problem: expect.stringMatching(/\$\.nope: no such field/) }]);
    expect(() => codec.encode({ nope: 1 }, 'p.M')).toThrow(/\$\.nope: no such field/);
  });

  it('names the schema problem when a writer cannot be built, by its kind', () => {
    const builder = writerCodecs('bigint');
    expect(builder.build({ id: 7, schemaType: 'AVRO', text: '{"type":', references: [] })).toEqual({ unreadable: expect.stringMatching(/^the registry's schema id 7 is not valid JSON: /) });
    expect(builder.build({ id: 7, schemaType: 'AVRO', text: '{"type":"record","name":"A","fields":[{"name":"b","type":"t.Missing"}]}', references: [] })).toEqual({ unreadable: expect.stringMatching(/^the registry's schema id 7 is not an Avro schema this library can build: .*t\.Missing/) });
    expect(builder.build({ id: 7, schemaType: 'JSON', text: '{"type":"strnig"}', references: [] })).toEqual({ unreadable: expect.stringMatching(/^the registry's schema id 7 is a JSON Schema that cannot be read here: JSON Schema id 7 does not compile/) });
    expect(builder.build({ id: 7, schemaType: 'PROTOBUF', text: 'syntax = "proto3"; message {', references: [] })).toEqual({ unreadable: expect.stringMatching(/^the registry's schema id 7 is a Protobuf schema that cannot be read here: /) });
  });
});

describe('the plain JSON codec', () => {
  it('reads within the reader\'s limits, and says what it cannot write as a JSON object', () => {
    expect(JSON_CODEC).toMatchObject({ format: 'json', describe: 'JSON', validatesDecoded: false });
    expect(JSON_CODEC.decode(JSON_CODEC.encode({ a: 2n ** 63n }), { ...DEFAULT_JSON_LIMITS, bigIntegers: 'bigint' })).toEqual({ value: { a: 2n ** 63n } });
    expect(() => JSON_CODEC.decode(Buffer.from('{"a":1}'), { ...DEFAULT_JSON_LIMITS, maxBytes: 3 })).toThrow(/more than maxBytes 3/);
    expect(JSON_CODEC.validate({ a: NaN })).toEqual([{ path: '', problem: expect.stringMatching(/NaN at key "a"/) }]);
    expect(JSON_CODEC.validate([1])).toEqual([{ path: '', problem: 'event cannot be written as a JSON object: it is an array' }]);
    expect(JSON_CODEC.validate({ a: 1 })).toEqual([]);
  });
});
