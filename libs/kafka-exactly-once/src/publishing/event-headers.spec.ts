import { fromDurableHeaders, headersProblem, messageIdProblem, toDurableHeaders, UnsendableHeadersError } from './event-headers';
import { estimateRecordBytes } from './record-size';

describe('event headers', () => {
  it('takes strings and bytes, leaves undefined out, and refuses anything else naming the header', () => {
    expect(headersProblem(undefined)).toBeUndefined();
    expect(headersProblem({ a: 'text', b: Buffer.from([0, 255]), c: new Uint8Array([1]), d: undefined })).toBeUndefined();
    expect(headersProblem({ attempt: 3 })).toMatch(/^header "attempt" has a number \(3\) as its value: .*String\(value\)/);
    expect(headersProblem({ ok: 'x', flag: true })).toMatch(/header "flag" has a boolean/);
    expect(headersProblem({ gone: null })).toMatch(/header "gone" has null/);
    expect(headersProblem({ nested: { a: 1 } })).toMatch(/header "nested" has an object/);
    expect(headersProblem({ '': 'x' })).toMatch(/name must not be empty/);
    expect(headersProblem('a=b')).toMatch(/must be an object/);
    expect(headersProblem([['a', 'b']])).toMatch(/must be an object/);
    // A hostile name is shown escaped and cut.
    expect(headersProblem({ ['\u0000<script>'.repeat(50)]: 1 })).toMatch(/^header "\\u0000<script>.{80,}…" has/);
  });

  it('refuses message ids that are not usable strings', () => {
    expect(messageIdProblem(undefined)).toBeUndefined();
    expect(messageIdProblem('m-1')).toBeUndefined();
    expect(messageIdProblem(123)).toMatch(/must be a string, got a number \(123\)/);
    expect(messageIdProblem('')).toMatch(/must not be empty/);
    expect(messageIdProblem('a\u0000b')).toMatch(/U\+0000/);
    expect(messageIdProblem('\ud800')).toMatch(/well-formed/);
  });

  it('keeps bytes byte for byte through the durable form (JSON), apart from text', () => {
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x41]);
    const durable = toDurableHeaders({ text: 'héllo', bytes, view: new Uint8Array(bytes.buffer, bytes.byteOffset + 1, 2), skipped: undefined });
    const back = fromDurableHeaders(JSON.parse(JSON.stringify(durable)));
    expect(back).toEqual({ text: 'héllo', bytes, view: Buffer.from([0xff, 0xfe]) });
    expect(Buffer.isBuffer(back.bytes)).toBe(true);
    // A text that looks like base64 stays text.
    expect(fromDurableHeaders(toDurableHeaders({ t: 'AP/+QQ==' }))).toEqual({ t: 'AP/+QQ==' });
    // Sizes are those of the bytes sent.
    expect(estimateRecordBytes({ key: null, value: '', headers: toDurableHeaders({ b: Buffer.alloc(1000) }) })).toBe(
      estimateRecordBytes({ key: null, value: '', headers: { b: 'x'.repeat(1000) } }),
    );
  });

  it('keeps a header named like an Object member (__proto__, constructor) as a header, through the durable form', () => {
    const headers = JSON.parse('{"__proto__": "p", "constructor": "c"}');
    const back = fromDurableHeaders(JSON.parse(JSON.stringify(toDurableHeaders(headers))));
    expect(Object.keys(back).sort()).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(back, '__proto__')?.value).toBe('p');
  });

  it('reads what earlier versions spooled: a Buffer as JSON becomes its bytes; a value no version could send is refused', () => {
    expect(fromDurableHeaders(JSON.parse(JSON.stringify({ b: Buffer.from([0, 255, 1]) })))).toEqual({ b: Buffer.from([0, 255, 1]) });
    expect(() => fromDurableHeaders({ attempt: 3 })).toThrow(UnsendableHeadersError);
    expect(() => fromDurableHeaders({ attempt: 3 })).toThrow(/header "attempt" has a number \(3\)/);
    expect(() => fromDurableHeaders({ b: { type: 'Buffer', data: [256] } })).toThrow(/header "b" has an object/);
    expect(() => fromDurableHeaders('x')).toThrow(/its headers are the string/);
    expect(fromDurableHeaders(undefined)).toEqual({});
    // Sizing a record with such a value never throws (the drainer sizes before it sets the record aside).
    expect(estimateRecordBytes({ key: null, value: '', headers: { attempt: 3 as never } })).toBeGreaterThan(0);
  });
});
