import { encodeSingleObject } from '../formats/avro/single-object.codec';
import { frameForRegistry } from '../registry/registry-framing';
import { formatRegistry } from '../formats/writer-codecs';
import { SchemaRegistry } from '../formats/avro/schema-registry';
import { bytesView, headerViews, MAX_DECODED_CHARS, valueView } from './record-view';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const worst = require('../../../../bench/json-worst-cases.js') as {
  JSON_WORST_CASES: Array<{ name: string; make(size: number): Buffer }>;
  linearity(make: (size: number) => Buffer, call: (input: Buffer) => unknown): Promise<{ small: number; quarter?: number; full?: number }>;
};

const schemas = SchemaRegistry.fromSchemas([
  { schema: { type: 'record', name: 'Thing', namespace: 'test', fields: [{ name: 'n', type: 'long' }, { name: 'raw', type: 'bytes' }, { name: 'note', type: 'string' }] } },
  {
    schema: {
      type: 'record',
      name: 'Bag',
      namespace: 'test',
      fields: [
        { name: 'tag', type: ['null', 'string'] },
        { name: 'nothings', type: { type: 'array', items: 'null' } },
        { name: 'counts', type: { type: 'map', values: 'long' } },
      ],
    },
  },
]);
const thing = schemas.current('test.Thing');

describe('record views', () => {
  it("says at once that the registry knows no schema of a value's id: the wait for it is a consumer's, not a view's", async () => {
    const registry = SchemaRegistry.fromSchemas([]);
    registry.remote = formatRegistry({ url: 'http://registry.invalid', subjectNameStrategy: 'topic', autoRegister: false, requestTimeoutMs: 1000, unknownIdWaitMs: 30000, missingPeerWaitMs: 0 }, 'bigint', {
      request: async () => ({ status: 404, body: { error_code: 40403, message: 'Schema not found' } }),
    });
    expect(await valueView(registry, frameForRegistry(77, Buffer.from([2])))).toMatchObject({ framing: 'schema-registry', decoded: null, error: 'the Schema Registry knows no schema of id 77' });
  });

  it('decodes a value with its writer schema: longs as strings, bytes as base64', async () => {
    const value = encodeSingleObject(thing, { n: 9007199254740993n, raw: Buffer.from([0, 255]), note: '<b>' });
    const view = await valueView(schemas, value);
    expect(view).toMatchObject({ bytes: value.length, framing: 'single-object', schema: 'test.Thing', truncated: false, error: null });
    expect(JSON.parse(view.decoded!)).toEqual({ n: '9007199254740993', raw: { $bytes: 'AP8=' }, note: '<b>' });
    expect(view.hex).toBe(value.toString('hex'));
  });

  it('says why a value is not decoded, never throwing, and shows text values as text', async () => {
    const unknown = Buffer.concat([Buffer.from([0xc3, 0x01]), Buffer.alloc(8, 7), Buffer.from([1])]);
    expect(await valueView(schemas, unknown)).toMatchObject({ framing: 'single-object', decoded: null, error: expect.stringContaining('fingerprint 0707070707070707') });
    expect(await valueView(schemas, Buffer.from('<script>x</script>'))).toMatchObject({ framing: 'unknown', decoded: null, text: '<script>x</script>' });
    expect(await valueView(schemas, Buffer.from([0xff, 0xfe]))).not.toHaveProperty('text');
    expect(await valueView(schemas, Buffer.from([0xff, 0xfe]))).toMatchObject({ framing: 'unknown', hex: 'fffe' });
    expect(await valueView(schemas, Buffer.from([0, 0, 0, 0, 7, 1]))).toMatchObject({ framing: 'schema-registry', error: expect.stringContaining('no registry') });
    expect(await valueView(undefined, encodeSingleObject(thing, { n: 1n, raw: Buffer.alloc(0), note: '' }))).toMatchObject({ error: expect.stringContaining('--schemas-dir') });
    const corrupt = encodeSingleObject(thing, { n: 1n, raw: Buffer.alloc(0), note: 'x' }).subarray(0, 11);
    expect((await valueView(schemas, corrupt)).error).toMatch(/^cannot decode/);
    expect(await valueView(schemas, null)).toMatchObject({ bytes: null, framing: 'none' });
  });

  it('shows a JSON value as read, its big integers as their digits, and says why a brace-started value is not JSON', async () => {
    const view = await valueView(schemas, Buffer.from('{"orderId":"o-1","amount":9223372036854775807}'));
    expect(view).toMatchObject({ framing: 'json', schema: null, error: null, truncated: false });
    expect(JSON.parse(view.decoded!)).toEqual({ orderId: 'o-1', amount: '9223372036854775807' });
    expect(await valueView(schemas, Buffer.from('{"a":1,"a":2}'))).toMatchObject({ framing: 'unknown', decoded: null, error: expect.stringMatching(/not readable as JSON: .*duplicate key/) });
  });

  it('shows a value of a long number in time linear in its bytes, saying why it is not read', async () => {
    // A loose bound against a freeze (the view runs on the application's event loop): milliseconds here, minutes
    // for a reader whose time grows with the square of the number's zeros.
    const zeros = worst.JSON_WORST_CASES.find((c) => c.name === 'zeros-in-fraction')!;
    const times = await worst.linearity(zeros.make, (input) => valueView(schemas, input));
    expect(times.small).toBeLessThan(1000);
    expect(times.full).toBeLessThan(1000);
    if (times.quarter !== undefined) expect(times.full).toBeLessThan(8 * times.quarter + 100);
    expect(await valueView(schemas, zeros.make(1_048_576))).toMatchObject({ framing: 'unknown', decoded: null, error: expect.stringContaining('that a double cannot hold: 0.1000') });
  });

  it('cuts a large value: its JSON at 65536 characters, its hex at 256 bytes', async () => {
    const value = encodeSingleObject(thing, { n: 1n, raw: Buffer.alloc(0), note: 'x'.repeat(1_000_000) });
    const view = await valueView(schemas, value);
    expect(view.truncated).toBe(true);
    expect(view.decoded).toHaveLength(MAX_DECODED_CHARS);
    expect(view.hex).toHaveLength(512);
    expect((await valueView(schemas, Buffer.alloc(1_000_000, 0x3c))).text).toHaveLength(4097);
  });

  it("bounds what a value's block counts claim: a hostile count is refused before avsc allocates or loops over it", async () => {
    const bag = schemas.current('test.Bag');
    const fine = encodeSingleObject(bag, { tag: 'x', nothings: [null, null], counts: { a: 1n } });
    expect(JSON.parse((await valueView(schemas, fine)).decoded!)).toEqual({ tag: 'x', nothings: [null, null], counts: { a: '1' } });
    // Zig-zag varints: a union branch, then an array of null whose one block claims `n` items (no byte each), then an empty map.
    const zigzag = (n: bigint) => {
      const bytes: number[] = [];
      for (let v = n >= 0n ? n * 2n : -n * 2n - 1n; ; v >>= 7n) {
        if (v < 0x80n) return Buffer.from([...bytes, Number(v)]);
        bytes.push(Number(v & 0x7fn) | 0x80);
      }
    };
    const hostile = (n: bigint) => Buffer.concat([fine.subarray(0, 10), zigzag(0n), zigzag(n), zigzag(0n), zigzag(0n)]);
    const claimed = await valueView(schemas, hostile(5_000_000n));
    expect(claimed).toMatchObject({ framing: 'single-object', schema: 'test.Bag', decoded: null, error: expect.stringMatching(/^cannot decode: its arrays and maps claim 5000000 items, more than the 100000/) });
    expect((await valueView(schemas, hostile(2n ** 62n))).error).toMatch(/claim more than 2\^53 items/);
    // A negative count (a block with its byte size) is counted the same.
    const sized = Buffer.concat([fine.subarray(0, 10), zigzag(0n), zigzag(-3_000_000n), zigzag(0n), zigzag(0n), zigzag(0n)]);
    expect((await valueView(schemas, sized)).error).toMatch(/claim 3000000 items/);
  });

  it('shows keys and headers as text when they are, else by their size and first bytes', () => {
    expect(bytesView(Buffer.from('acct-1'))).toEqual({ text: 'acct-1', bytes: 6 });
    expect(bytesView(Buffer.from([0xc3, 0x28]))).toEqual({ text: null, bytes: 2, hex: 'c328' });
    expect(bytesView(Buffer.from('a\u0000b'))).toMatchObject({ text: null });
    const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
    expect(headerViews([[b64('x'), b64('y')], [b64('gone'), null], [b64(Buffer.from([0xff])), b64(Buffer.from([0xff]))]])).toEqual([
      { name: 'x', text: 'y', bytes: 1 },
      { name: 'gone', null: true, text: null, bytes: 0 },
      { name: '\ufffd', text: null, bytes: 1, hex: 'ff' },
    ]);
  });
});
