import { DecodeError } from '../../errors/decode.error';
import type { JsonLimits } from '../../interfaces/format-options.interface';
import { DEFAULT_JSON_LIMITS } from '../../options/format-defaults';
import { encodeJsonValue, parseJsonValue } from './json.codec';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const worst = require('../../../../../bench/json-worst-cases.js') as {
  JSON_WORST_CASES: Array<{ name: string; make(size: number): Buffer; bigIntegers?: JsonLimits['bigIntegers'] }>;
  linearity(make: (size: number) => Buffer, call: (input: Buffer) => unknown): Promise<{ small: number; quarter?: number; full?: number }>;
};

const BIGINT: JsonLimits = { ...DEFAULT_JSON_LIMITS, bigIntegers: 'bigint' };
const STRING: JsonLimits = { ...DEFAULT_JSON_LIMITS, bigIntegers: 'string' };
const MODES: JsonLimits[] = [DEFAULT_JSON_LIMITS, BIGINT, STRING];

function parse(input: string | Buffer, limits?: JsonLimits): Record<string, unknown> {
  return parseJsonValue(typeof input === 'string' ? Buffer.from(input, 'utf8') : input, limits);
}

/** The DecodeError parsing `input` throws; fails the test when it parses or throws anything else. */
function refusal(input: string | Buffer | null | undefined, limits?: JsonLimits): DecodeError {
  let thrown: unknown;
  try {
    parseJsonValue(typeof input === 'string' ? Buffer.from(input, 'utf8') : input, limits);
  } catch (error) {
    thrown = error;
  }
  if (!(thrown instanceof DecodeError)) throw new Error(`expected a DecodeError, got ${thrown === undefined ? 'a parsed value' : String(thrown)}`);
  expect(thrown.kind).toBe('undecodable');
  expect(thrown.retriable).toBe(false);
  expect(thrown.message.length).toBeLessThan(300);
  return thrown;
}

function encodingError(value: unknown): TypeError {
  try {
    encodeJsonValue(value);
  } catch (error) {
    if (error instanceof TypeError) return error;
    throw error;
  }
  throw new Error('expected a TypeError, got bytes');
}

/** Every object and array under `root`, without recursion (some tests nest 100,000 deep). */
function everyContainer(root: unknown): object[] {
  const found: object[] = [];
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    found.push(node);
    for (const key of Object.keys(node)) stack.push((node as Record<string, unknown>)[key]);
  }
  return found;
}

describe('parseJsonValue', () => {
  it('reads a typical event as JSON.parse does', () => {
    const text = '{"paymentId":"p-1","amount":1250.75,"currency":"EUR","tags":["a","b"],"merchant":{"id":"m-7","ok":true,"note":null}}';
    expect(parse(text)).toEqual(JSON.parse(text));
  });

  it('uses the documented defaults', () => {
    expect(DEFAULT_JSON_LIMITS).toEqual({ maxBytes: 1_048_576, maxDepth: 64, bigIntegers: 'reject' });
  });

  describe('framing and encoding', () => {
    it('refuses a tombstone', () => {
      expect(refusal(null).message).toBe('record has no value (a tombstone)');
      expect(refusal(undefined).message).toBe('record has no value (a tombstone)');
    });

    it('refuses an empty value', () => {
      expect(refusal(Buffer.alloc(0)).message).toBe('value is empty (0 bytes): a JSON object is at least {}');
    });

    it('refuses a 10 MB value by its size before decoding it', () => {
      // Neither UTF-8 nor JSON, and framed like a registry value: only the size may be named.
      const huge = Buffer.alloc(10 * 1024 * 1024, 0xff);
      huge[0] = 0x00;
      expect(refusal(huge).message).toBe('value is 10485760 bytes, more than maxBytes 1048576: refused before decoding');
    });

    it('reads a value of exactly maxBytes and refuses one byte more', () => {
      const limits = { ...DEFAULT_JSON_LIMITS, maxBytes: 9 };
      expect(parse('{"a":123}', limits)).toEqual({ a: 123 });
      expect(refusal('{"a":1234}', limits).message).toBe('value is 10 bytes, more than maxBytes 9: refused before decoding');
    });

    it('refuses a byte order mark', () => {
      expect(refusal(Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d])).message).toBe(
        'value starts with a UTF-8 byte order mark (EF BB BF): JSON on the wire must not carry a byte order mark (RFC 8259 §8.1)',
      );
    });

    it('refuses a leading 00 byte as Schema Registry framing JSON does not have', () => {
      const framed = Buffer.concat([Buffer.from([0x00, 0x00, 0x00, 0x00, 0x2a]), Buffer.from('{"a":1}')]);
      expect(refusal(framed).message).toBe(
        'value starts with byte 00, as Schema Registry framing does (00 + 4-byte schema id): JSON has no such framing; it starts with 00 00 00 00 2a (12 bytes)',
      );
    });

    it('refuses invalid UTF-8, naming the byte', () => {
      expect(refusal(Buffer.from([0x7b, 0x22, 0xc3, 0x22, 0x3a, 0x31, 0x7d])).message).toBe(
        'value is not UTF-8: an invalid byte sequence at byte 2 (c3 22 3a 31)',
      );
      expect(refusal(Buffer.from([0xc3])).message).toBe('value is not UTF-8: an invalid byte sequence at byte 0 (c3)');
      // An overlong "/": a decoder that accepted it would let a filter on "/" be bypassed.
      expect(refusal(Buffer.from([0x7b, 0x22, 0xc0, 0xaf, 0x22, 0x3a, 0x31, 0x7d])).message).toBe(
        'value is not UTF-8: an invalid byte sequence at byte 2 (c0 af 22 3a)',
      );
      // A UTF-16 surrogate written as UTF-8 (CESU-8).
      expect(refusal(Buffer.from([0x7b, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x3a, 0x31, 0x7d])).message).toContain('invalid byte sequence at byte 2 (ed a0 80 22)');
    });

    it('names the byte where a fatal UTF-8 decoder first fails, for any bytes (seeded)', () => {
      // The oracle: each sequence's length from its lead byte, then the decoder itself on that sequence.
      const decoder = new TextDecoder('utf-8', { fatal: true });
      const oracle = (bytes: Buffer): number => {
        for (let i = 0; i < bytes.length; ) {
          const c = bytes[i];
          const size = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
          if (size === 0 || i + size > bytes.length) return i;
          try {
            decoder.decode(bytes.subarray(i, i + size));
          } catch {
            return i;
          }
          i += size;
        }
        return -1;
      };
      const random = seeded(8);
      const pool = [0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff];
      let refused = 0;
      for (let n = 0; n < 1500; n++) {
        const body = Buffer.from(Array.from({ length: 1 + Math.floor(random() * 8) }, () => pool[Math.floor(random() * pool.length)]));
        const bytes = Buffer.concat([Buffer.from('{"a":"'), body, Buffer.from('"}')]);
        const at = oracle(bytes);
        if (at < 0) continue;
        refused++;
        expect(refusal(bytes).message).toMatch(new RegExp(`^value is not UTF-8: an invalid byte sequence at byte ${at} \\(`));
      }
      expect(refused).toBeGreaterThan(500);
    });

    it('reads multi-byte UTF-8 in keys and strings', () => {
      expect(parse('{"währung":"€","名前":"😀","a":"\\u00e9\\ud83d\\ude00"}')).toEqual({ währung: '€', 名前: '😀', a: 'é😀' });
    });
  });

  describe('syntax and top level', () => {
    it("refuses what JSON.parse refuses, with its message", () => {
      const error = refusal('{"a":1');
      expect(error.message).toMatch(/^value is not JSON: .*position 6/);
      expect(error.cause).toBeInstanceOf(SyntaxError);
      expect(refusal('{"a":x}').message).toMatch(/^value is not JSON: Unexpected token 'x'/);
      expect(refusal('   ').message).toMatch(/^value is not JSON: /);
      expect(refusal('{"a":1}}').message).toMatch(/^value is not JSON: /);
      expect(refusal('{"a":NaN}').message).toMatch(/^value is not JSON: /);
      expect(refusal("{'a':1}").message).toMatch(/^value is not JSON: /);
    });

    it('quotes little of a long invalid value', () => {
      const error = refusal(`{"a":"${'x'.repeat(5000)}",y}`);
      expect(error.message.length).toBeLessThan(160);
    });

    it.each([
      ['[{"a":1}]', 'an array'],
      ['"text"', 'a string'],
      ['12.5', 'a number'],
      ['true', 'true'],
      ['false', 'false'],
      ['null', 'null'],
    ])('refuses a top level %s, naming it', (text, what) => {
      expect(refusal(text).message).toBe(`value is not a JSON object: the top level is ${what}`);
    });

    it('reads whitespace around and inside the object', () => {
      expect(parse(' \r\n\t{ "a" : [ 1 , { } ] }\n')).toEqual({ a: [1, {}] });
      expect(parse('{}')).toEqual({});
    });
  });

  describe('nesting', () => {
    const deepArrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const deepObjects = (n: number, inner = '{}') => '{"a":'.repeat(n) + inner + '}'.repeat(n);

    it('reads 64 levels by default and refuses 65 before parsing', () => {
      expect(parse(deepObjects(63))).toBeDefined();
      expect(refusal(deepObjects(64)).message).toBe('value nests objects and arrays deeper than maxDepth 64 (at byte 320): refused before parsing');
    });

    it('counts brackets inside strings as text', () => {
      expect(parse(`{"a":"${'['.repeat(1000)}","b":"${'{'.repeat(1000)}"}`)).toEqual({ a: '['.repeat(1000), b: '{'.repeat(1000) });
    });

    it('refuses 100,000-deep arrays and objects at the default depth, with one scan', () => {
      expect(refusal(deepArrays(100_000)).message).toBe('value nests objects and arrays deeper than maxDepth 64 (at byte 64): refused before parsing');
      expect(refusal(deepObjects(100_000)).message).toBe('value nests objects and arrays deeper than maxDepth 64 (at byte 320): refused before parsing');
    });

    describe('with maxDepth raised to 200,000', () => {
      const limits: JsonLimits = { ...DEFAULT_JSON_LIMITS, maxDepth: 200_000, maxBytes: 16 * 1_048_576 };

      it('refuses 100,000-deep arrays as a top level array, without a stack overflow', () => {
        expect(refusal(deepArrays(100_000), limits).message).toBe('value is not a JSON object: the top level is an array');
      });

      it('reads 100,000-deep objects, without a stack overflow', () => {
        let node = parse(deepObjects(100_000), limits);
        let depth = 1;
        while (Object.keys(node).length > 0) {
          node = node.a as Record<string, unknown>;
          depth++;
        }
        expect(depth).toBe(100_001);
      });

      it('names a duplicate key 100,000 deep, with a shortened path', () => {
        const error = refusal(deepObjects(100_000, '{"k":1,"k":2}'), limits);
        expect(error.message).toMatch(/^value is not JSON: a duplicate key "k" at \$(\.a)+…a?(\.a)+ \(JSON\.parse keeps the last, other readers the first\)$/);
      });

      it('reads a big integer 100,000 deep in bigint mode', () => {
        let node = parse(deepObjects(100_000, '{"n":9223372036854775808}'), { ...limits, bigIntegers: 'bigint' });
        for (let i = 0; i < 100_000; i++) node = node.a as Record<string, unknown>;
        expect(node).toEqual({ n: 2n ** 63n });
      });
    });
  });

  describe('duplicate keys', () => {
    it('refuses one at the top level', () => {
      expect(refusal('{"amount":1,"currency":"EUR","amount":2}').message).toBe(
        'value is not JSON: a duplicate key "amount" at $ (JSON.parse keeps the last, other readers the first)',
      );
    });

    it('refuses one nested, naming the path', () => {
      expect(refusal('{"payment":{"amount":1,"amount":1}}').message).toBe(
        'value is not JSON: a duplicate key "amount" at $.payment (JSON.parse keeps the last, other readers the first)',
      );
      expect(refusal('{"items":[{"id":1},{"id":2,"sku":"x","id":3}]}').message).toContain('a duplicate key "id" at $.items[1] ');
      expect(refusal('{"a b":{"x.y":{"k":1,"k":2}}}').message).toContain('a duplicate key "k" at $["a b"]["x.y"] ');
    });

    it('refuses keys that are the same once unescaped', () => {
      expect(refusal('{"a":1,"\\u0061":2}').message).toContain('a duplicate key "a" at $ ');
      expect(refusal('{"é":1,"\\u00e9":2}').message).toContain('a duplicate key "é" at $ ');
      expect(refusal('{"q\\"":1,"q\\u0022":2}').message).toContain('a duplicate key "q\\"" at $ ');
    });

    it('reads keys that differ only after unescaping, or that are the same in other objects', () => {
      expect(parse('{"a":1,"\\u0062":2,"A":3}')).toEqual({ a: 1, b: 2, A: 3 });
      expect(parse('{"a":{"a":1},"b":[{"a":1},{"a":2}]}')).toEqual({ a: { a: 1 }, b: [{ a: 1 }, { a: 2 }] });
      expect(parse('{"":1,"x":{"":2}}')).toEqual({ '': 1, x: { '': 2 } });
    });

    it('is not confused by ":" or quotes inside strings', () => {
      expect(parse('{"k:1":"v:2","x":"a\\":b","y":"\\\\","z":"\\\\\\":"}')).toEqual({ 'k:1': 'v:2', x: 'a":b', y: '\\', z: '\\":' });
      expect(refusal('{"k:1":"v:2","k:1":"\\":"}').message).toContain('a duplicate key "k:1" at $ ');
      // A string ending in an escaped backslash must not swallow the quote that closes it.
      expect(refusal('{"a":"\\\\","a":1}').message).toContain('a duplicate key "a" at $ ');
    });

    it('refuses a duplicate whose first value had a different shape than the one JSON.parse kept', () => {
      expect(refusal('{"a":{"n":9007199254740993,"x":{"9":[1]}},"a":0}', BIGINT).message).toContain('a duplicate key "a" at $ ');
      expect(refusal('{"a":[{"b":{"c":1}}],"a":{"0":2}}').message).toContain('a duplicate key "a" at $ ');
    });

    it('refuses an empty key repeated', () => {
      expect(refusal('{"":1,"":2}').message).toContain('a duplicate key "" at $ ');
    });

    it('quotes a long key shortened', () => {
      const key = 'k'.repeat(10_000);
      const error = refusal(`{"${key}":1,"${key}":2}`);
      expect(error.message).toBe(`value is not JSON: a duplicate key "${'k'.repeat(24)}…" at $ (JSON.parse keeps the last, other readers the first)`);
    });
  });

  describe('__proto__ and other prototype keys', () => {
    it('refuses "__proto__" at the top level and nested, naming the path', () => {
      expect(refusal('{"__proto__":{"polluted":1}}').message).toBe(
        'value has a key "__proto__" at $: refused, as a reader that merges or spreads objects would take it for a prototype',
      );
      expect(refusal('{"a":{"b":[{"__proto__":{"polluted":1}}]}}').message).toContain('a key "__proto__" at $.a.b[0]: refused');
      expect(refusal('{"\\u005f_proto__":{"polluted":1}}').message).toContain('a key "__proto__" at $: refused');
      // Also on the path taken for long numbers.
      expect(refusal('{"n":9007199254740993,"__proto__":{}}', BIGINT).message).toContain('a key "__proto__" at $: refused');
    });

    it('keeps "constructor" and "prototype" as own data properties and changes no prototype', () => {
      const hostile = [
        '{"constructor":{"prototype":{"polluted":1}}}',
        '{"a":{"constructor":{"prototype":{"polluted":1}},"prototype":{"polluted":1}}}',
        '{"prototype":{"polluted":1},"x":[{"constructor":{"name":"polluted"}}]}',
        '{"toString":"polluted","hasOwnProperty":1,"valueOf":{}}',
      ];
      for (const text of hostile) {
        const value = parse(text);
        expect(value).toEqual(JSON.parse(text));
        for (const node of everyContainer(value)) {
          expect(Object.getPrototypeOf(node)).toBe(Array.isArray(node) ? Array.prototype : Object.prototype);
        }
      }
      const top = parse('{"constructor":{"prototype":{"polluted":1}},"prototype":2}');
      expect(Object.getOwnPropertyDescriptor(top, 'constructor')).toEqual({ value: { prototype: { polluted: 1 } }, writable: true, enumerable: true, configurable: true });
      expect(Object.getOwnPropertyDescriptor(top, 'prototype')?.value).toBe(2);
      for (const attempt of ['{"__proto__":{"polluted":1}}', '{"a":{"__proto__":{"polluted":1}}}']) refusal(attempt);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect(Object.prototype).not.toHaveProperty('polluted');
      expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain('polluted');
    });

    it('is not fooled by a key someone added to Object.prototype', () => {
      const proto = Object.prototype as Record<string, unknown>;
      proto.injected = 1;
      try {
        expect(refusal('{"a":1,"a":2}').message).toContain('a duplicate key "a"');
        expect(parse('{"a":1}')).toEqual({ a: 1 });
      } finally {
        delete proto.injected;
      }
    });
  });

  describe('numbers', () => {
    it('reads safe integers and short decimals as numbers', () => {
      expect(parse('{"a":9007199254740991,"b":-9007199254740991,"c":0,"d":-0,"e":1250.75,"f":1e3,"g":1.5E-3,"h":123456789012345}')).toEqual({
        a: 9007199254740991,
        b: -9007199254740991,
        c: 0,
        d: -0,
        e: 1250.75,
        f: 1000,
        g: 0.0015,
        h: 123456789012345,
      });
    });

    it("refuses an integer beyond ±(2^53-1) in 'reject' mode, naming the path and the digits", () => {
      expect(refusal('{"a":9007199254740993}').message).toBe(
        "value has an integer beyond ±(2^53-1) at $.a: 9007199254740993 (a double would round it; bigIntegers 'bigint' or 'string' reads it exactly)",
      );
      expect(refusal('{"a":9007199254740992}').message).toContain('at $.a: 9007199254740992 ');
      expect(refusal('{"x":[1,{"b":-9223372036854775808}]}').message).toContain('at $.x[1].b: -9223372036854775808 ');
      expect(refusal('{"a":9223372036854775808}').message).toContain('at $.a: 9223372036854775808 ');
    });

    it('reads 2^63 and -2^63 exactly in bigint and string modes', () => {
      const text = '{"max":9223372036854775808,"min":-9223372036854775808,"small":7}';
      expect(parse(text, BIGINT)).toEqual({ max: 2n ** 63n, min: -(2n ** 63n), small: 7 });
      expect(parse(text, STRING)).toEqual({ max: '9223372036854775808', min: '-9223372036854775808', small: 7 });
    });

    it('reads integers written with an exponent or a zero fraction by their exact value', () => {
      const text = '{"a":9.007199254740993e15,"b":1e20,"c":9007199254740993.000,"d":-2E+20,"e":9.007199254740991e15}';
      expect(parse(text, BIGINT)).toEqual({ a: 9007199254740993n, b: 10n ** 20n, c: 9007199254740993n, d: -(2n * 10n ** 20n), e: 9007199254740991 });
      expect(parse(text, STRING)).toEqual({ a: '9007199254740993', b: '100000000000000000000', c: '9007199254740993', d: '-200000000000000000000', e: 9007199254740991 });
      expect(refusal(text).message).toContain('integer beyond ±(2^53-1) at $.a: 9007199254740993 ');
    });

    it('puts each big integer back where it was, arrays and numeric keys included', () => {
      const text = '{"z":[9007199254740993,1,{"2":-9007199254740994}],"10":12345678901234567890,"a":"9007199254740993"}';
      expect(parse(text, BIGINT)).toEqual({ z: [9007199254740993n, 1, { 2: -9007199254740994n }], 10: 12345678901234567890n, a: '9007199254740993' });
    });

    it('refuses a number beyond a double in every mode', () => {
      for (const limits of MODES) {
        expect(refusal('{"a":1e400}', limits).message).toBe("value has a number beyond a double's range at $.a: 1e400");
        expect(refusal('{"a":[-1.5e309]}', limits).message).toBe("value has a number beyond a double's range at $.a[0]: -1.5e309");
        expect(refusal(`{"a":${'9'.repeat(400)}}`, limits).message).toBe(`value has a number beyond a double's range at $.a: ${'9'.repeat(24)}… (400 characters)`);
      }
    });

    it('refuses a decimal a double would round, in every mode', () => {
      for (const limits of MODES) {
        expect(refusal('{"a":0.12345678901234567890123}', limits).message).toBe(
          'value has a number at $.a that a double cannot hold: 0.1234567890123456789012… (25 characters) would read as 0.12345678901234568 (a double would round it: send such a number as a string)',
        );
        expect(refusal('{"a":1e-400}', limits).message).toContain('at $.a that a double cannot hold: 1e-400 would read as 0 ');
        expect(refusal('{"a":3e-324}', limits).message).toContain('3e-324 would read as 5e-324 ');
        expect(refusal('{"a":1234567890.12345678}', limits).message).toContain('would read as 1234567890.1234567 ');
        expect(refusal('{"a":9007199254740993.5}', limits).message).toContain('9007199254740993.5 would read as 9007199254740994 ');
      }
    });

    it('reads decimals of 16 and 17 digits that a double holds', () => {
      const text = '{"a":0.1234567890123456,"b":0.30000000000000004,"c":5e-324,"e":0.10000000000000000555,"f":123456789012345.6}';
      for (const limits of MODES) expect(parse(text, limits)).toEqual(JSON.parse(text));
    });

    it('takes a double written with an exponent and no fraction left for an integer', () => {
      expect(refusal('{"a":1.7976931348623157e308}').message).toContain(`integer beyond ±(2^53-1) at $.a: 179769313486231570000000… (309 characters)`);
      expect(parse('{"a":1.7976931348623157e308}', BIGINT)).toEqual({ a: 17976931348623157n * 10n ** 292n });
      expect(parse('{"a":1.5e15}')).toEqual({ a: 1.5e15 });
    });

    it('reads numbers with runs of zeros on either side of the point by their value', () => {
      const text = `{"a":1${'0'.repeat(30)}e-30,"b":0.${'0'.repeat(30)}1e31,"c":1.${'0'.repeat(40)},"d":-0.${'0'.repeat(40)},"e":100${'0'.repeat(20)}.000e-20,"f":1${'0'.repeat(20)}}`;
      expect(parse(text, STRING)).toEqual({ a: 1, b: 1, c: 1, d: -0, e: 100, f: `1${'0'.repeat(20)}` });
      expect(parse(text, BIGINT)).toEqual({ a: 1, b: 1, c: 1, d: -0, e: 100, f: 10n ** 20n });
      expect(refusal(`{"a":0.1${'0'.repeat(40)}1}`).message).toContain(`at $.a that a double cannot hold: 0.1${'0'.repeat(21)}… (44 characters) would read as 0.1 `);
      expect(refusal(`{"a":1${'0'.repeat(40)}1e-41}`).message).toContain('at $.a that a double cannot hold: ');
    });

    it('leaves numbers inside strings and keys alone', () => {
      expect(parse('{"99999999999999999999":"1e400","n":"0.12345678901234567890123"}')).toEqual({ '99999999999999999999': '1e400', n: '0.12345678901234567890123' });
    });
  });

  it('reads a typical event without the slow pass over the text', () => {
    // The slow pass reads the decoded text by charCodeAt; the fast one reads bytes, JSON.parse and Object.keys.
    const charCodeAt = jest.spyOn(String.prototype, 'charCodeAt');
    try {
      const event = '{"messageId":"0193a1b2-c3d4-7e5f-8a9b-000000000042","type":"PaymentRequested","accountId":"acct-1234","amount":1250.75,"currency":"EUR","requestedAt":"2024-05-01T12:34:56.789Z","at":1714567890123,"merchant":{"id":"m-77","country":"DE"},"attempt":1}';
      expect(parse(event)).toEqual(JSON.parse(event));
      expect(charCodeAt).not.toHaveBeenCalled();
      refusal('{"a":1,"a":2}');
      expect(charCodeAt).toHaveBeenCalled();
    } finally {
      charCodeAt.mockRestore();
    }
  });

  describe('in time linear in the value, for every value up to maxBytes', () => {
    // Loose bounds against a freeze, not a speed test: each of these values is read in tens of milliseconds (the
    // most costly about 250 ms of CPU per MiB, bench/json-codec.js --worst); a path whose time grows with the square
    // of a run of digits, keys or escapes takes seconds at 64 KiB and minutes at 1 MiB.
    it.each(worst.JSON_WORST_CASES.map((c) => [c.name, c]))('%s', async (_, c) => {
      const limits = { ...DEFAULT_JSON_LIMITS, bigIntegers: c.bigIntegers ?? 'reject' };
      const times = await worst.linearity(c.make, (input) => {
        try {
          parseJsonValue(input, limits);
        } catch (error) {
          if (!(error instanceof DecodeError)) throw error;
        }
      });
      expect(times.small).toBeLessThan(1000);
      expect(times.full).toBeLessThan(1000);
      // Twice the bytes, at most about three times the time (a linear reader: twice).
      if (times.quarter !== undefined) expect(times.full).toBeLessThan(8 * times.quarter + 100);
    });
  });

  it('agrees with JSON.parse on thousands of random objects (seeded)', () => {
    const random = seeded(47);
    for (let i = 0; i < 3000; i++) {
      const text = JSON.stringify(randomObject(random, 0), null, random() < 0.3 ? 2 : undefined);
      expect(parse(text)).toEqual(JSON.parse(text));
    }
  });

  it('finds a duplicate in thousands of random objects (seeded), however its key is written', () => {
    const random = seeded(4711);
    for (let i = 0; i < 1000; i++) {
      const text = JSON.stringify(randomObject(random, 0));
      // Repeat the first key of the top level, its first character written as a \u escape.
      const first = /^\{("(?:[^"\\]|\\.)*")/.exec(text);
      if (first === null || first[1] === '""') continue;
      const key = JSON.parse(first[1]) as string;
      const escaped = `"\\u${key.charCodeAt(0).toString(16).padStart(4, '0')}${JSON.stringify(key.slice(1)).slice(1)}`;
      expect(refusal(`${text.slice(0, -1)},${escaped}:0}`).message).toContain(`a duplicate key ${JSON.stringify(key.length > 24 ? `${key.slice(0, 24)}…` : key)} at $ `);
    }
  });
});

describe('encodeJsonValue', () => {
  it('writes UTF-8 JSON without a byte order mark', () => {
    const bytes = encodeJsonValue({ amount: 12.5, currency: '€', note: null, ok: true, list: [1, 'a'] });
    expect(bytes[0]).toBe(0x7b);
    expect(bytes.toString('utf8')).toBe('{"amount":12.5,"currency":"€","note":null,"ok":true,"list":[1,"a"]}');
    expect([...bytes.subarray(27, 30)]).toEqual([0xe2, 0x82, 0xac]);
  });

  it('writes a bigint as a number of its exact digits', () => {
    expect(encodeJsonValue({ a: 2n ** 63n, b: [-(2n ** 64n), 0n], c: { d: 1n } }).toString()).toBe(
      '{"a":9223372036854775808,"b":[-18446744073709551616,0],"c":{"d":1}}',
    );
  });

  it('round-trips bigints through parseJsonValue in bigint mode', () => {
    expect(parseJsonValue(encodeJsonValue({ a: 2n ** 63n }), { ...DEFAULT_JSON_LIMITS, bigIntegers: 'bigint' })).toEqual({ a: 2n ** 63n });
    const event = { id: 'p-1', big: -(2n ** 63n), items: [{ n: 10n ** 30n }], safe: 5n };
    expect(parseJsonValue(encodeJsonValue(event), BIGINT)).toEqual({ ...event, safe: 5 });
  });

  it('keeps a string that imitates a marker as it is', () => {
    const value = { s: '\u0000abc:123', t: '"\\u0000x:1"', b: 1n };
    expect(JSON.parse(encodeJsonValue(value).toString())).toEqual({ s: '\u0000abc:123', t: '"\\u0000x:1"', b: 1 });
  });

  it('writes a Date by its toJSON and leaves undefined properties out', () => {
    const at = new Date('2024-05-01T12:34:56.789Z');
    expect(encodeJsonValue({ at, gone: undefined, kept: 1, list: [undefined] }).toString()).toBe(
      '{"at":"2024-05-01T12:34:56.789Z","kept":1,"list":[null]}',
    );
    const money = { toJSON: () => ({ units: '12', nanos: 500 }) };
    expect(encodeJsonValue({ money }).toString()).toBe('{"money":{"units":"12","nanos":500}}');
  });

  it('writes an instance of a class as its own enumerable properties', () => {
    class PaymentRequested {
      constructor(readonly paymentId: string, readonly amount: bigint) {}
    }
    expect(encodeJsonValue(new PaymentRequested('p-1', 10n)).toString()).toBe('{"paymentId":"p-1","amount":10}');
  });

  it('round-trips the random objects parseJsonValue reads', () => {
    const random = seeded(99);
    for (let i = 0; i < 500; i++) {
      const value = randomObject(random, 0);
      expect(parseJsonValue(encodeJsonValue(value))).toEqual(value);
    }
  });

  it.each([
    [[1, 2], 'it is an array'],
    ['text', 'it is a string'],
    [12, 'it is a number'],
    [null, 'it is null'],
    [undefined, 'it is undefined'],
    [5n, 'it is a bigint'],
    [true, 'it is true'],
  ])('refuses a top level %p', (value, what) => {
    expect(encodingError(value).message).toBe(`event cannot be written as a JSON object: ${what}`);
  });

  it('refuses a top level whose toJSON is not an object', () => {
    expect(encodingError(new Date(0)).message).toBe('event cannot be written as a JSON object: it would be written as a string');
  });

  it('refuses a cycle', () => {
    const event: Record<string, unknown> = { a: { b: 1 } };
    (event.a as Record<string, unknown>).back = event;
    expect(encodingError(event).message).toMatch(/^event cannot be written as JSON: it has a cycle \(Converting circular structure to JSON/);
    const withBigint: Record<string, unknown> = { n: 1n };
    withBigint.self = withBigint;
    expect(encodingError(withBigint).message).toMatch(/it has a cycle/);
  });

  it('refuses NaN and Infinity rather than writing null', () => {
    expect(encodingError({ amount: NaN }).message).toBe(
      'event cannot be written as JSON: NaN at key "amount" (JSON has no such number; JSON.stringify would write null)',
    );
    expect(encodingError({ a: { b: [1, -Infinity] } }).message).toContain('-Infinity at key "1"');
    expect(encodingError({ a: Infinity, b: 1n }).message).toContain('Infinity at key "a"');
  });
});

/** mulberry32: a small seeded generator, so a failure reproduces. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = ['a', 'b', 'Z', '0', '9', ':', ',', '"', '\\', '/', ' ', '{', '}', '[', ']', 'é', '€', '名', '😀', '\n', '\u0000', '\u2028', 'e', '-'];

function randomString(random: () => number, max: number): string {
  let text = '';
  const length = Math.floor(random() * max);
  for (let i = 0; i < length; i++) text += ALPHABET[Math.floor(random() * ALPHABET.length)];
  return text;
}

function randomValue(random: () => number, depth: number): unknown {
  const pick = random();
  if (depth < 4 && pick < 0.12) return randomObject(random, depth + 1);
  if (depth < 4 && pick < 0.22) return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
  if (pick < 0.45) return randomString(random, 12);
  if (pick < 0.6) return Math.floor((random() - 0.5) * 2e12);
  if (pick < 0.75) return Math.round((random() - 0.5) * 1e7) / 100;
  if (pick < 0.85) return random() < 0.5;
  return null;
}

function randomObject(random: () => number, depth: number): Record<string, unknown> {
  const value: Record<string, unknown> = {};
  const size = Math.floor(random() * 8);
  for (let i = 0; i < size; i++) {
    const key = random() < 0.2 ? String(Math.floor(random() * 20)) : randomString(random, 8);
    if (key === '__proto__') continue;
    value[key] = randomValue(random, depth);
  }
  return value;
}
