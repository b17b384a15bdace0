import { DecodeError } from '../../errors/decode.error';
import { parseJsonValue } from '../json/json.codec';
import { buildJsonSchemaValidator, type JsonSchemaValidator, MAX_PROBLEMS, parseJsonBody, pathOf } from './json-schema.codec';

const ORDER = {
  type: 'object',
  properties: {
    orderId: { type: 'string' },
    amount: { type: 'integer', minimum: 0 },
    status: { enum: ['NEW', 'PAID'] },
    lines: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] } },
    'ship to': { type: 'string' },
  },
  required: ['orderId', 'amount'],
  additionalProperties: false,
};

// eslint-disable-next-line @typescript-eslint/no-require-imports
const worst = require('../../../../../bench/json-worst-cases.js') as {
  JSON_SCHEMA_WORST_CASES: Array<{ name: string; schema: object; make(size: number): Buffer }>;
  linearity(make: (size: number) => Buffer, call: (input: Buffer) => unknown): Promise<{ small: number; quarter?: number; full?: number }>;
};

/**
 * `items` behind a proxy that counts what the validator reads: its items (by index), or with `members`, the
 * members of each item (each item then a proxy too).
 */
function counting(items: unknown[], members = false): { array: unknown[]; reads: () => number } {
  let reads = 0;
  const watch = <T extends object>(target: T, counts: (key: string | symbol) => boolean): T =>
    new Proxy(target, {
      get(object, key, receiver) {
        if (counts(key)) reads++;
        return Reflect.get(object, key, receiver);
      },
    });
  const array = members ? items.map((item) => watch(item as object, (key) => typeof key === 'string')) : items;
  return { array: members ? array : watch(array, (key) => typeof key === 'string' && /^\d+$/.test(key)), reads: () => reads };
}

function validator(schema: unknown, references: Array<{ name: string; schema: string }> = []): JsonSchemaValidator {
  const built = buildJsonSchemaValidator(9, typeof schema === 'string' ? schema : JSON.stringify(schema), references);
  if (!('jsonSchema' in built)) throw new Error(JSON.stringify(built));
  return built.jsonSchema;
}

describe('JSON Schema validator of a registry schema', () => {
  it('finds nothing wrong with a valid value', () => {
    const v = validator(ORDER);
    expect(v.id).toBe(9);
    expect(v.validate({ orderId: 'o', amount: 3, status: 'PAID', lines: [{ sku: 'a' }] })).toEqual([]);
  });

  it('names the first problem with its path, and stops there', () => {
    const v = validator(ORDER);
    const base = { orderId: 'o', amount: 1 };
    expect(v.validate({ amount: 1.5, status: 'LOST', lines: [{ sku: 2 }], 'ship to': 4, extra: true })).toEqual(["$: must have required property 'orderId'"]);
    expect(v.validate({ ...base, extra: true })).toEqual(['$: must NOT have additional properties: "extra"']);
    expect(v.validate({ ...base, amount: 1.5 })).toEqual(['$.amount: must be integer']);
    expect(v.validate({ ...base, status: 'LOST' })).toEqual(['$.status: must be equal to one of the allowed values: "NEW", "PAID"']);
    expect(v.validate({ ...base, lines: [{ sku: 'a' }, { sku: 2 }, {}] })).toEqual(['$.lines[1].sku: must be string']);
    expect(v.validate({ ...base, lines: [{ sku: 'a' }, {}] })).toEqual(["$.lines[1]: must have required property 'sku'"]);
    expect(v.validate({ ...base, 'ship to': 4 })).toEqual(['$["ship to"]: must be string']);
    expect(v.validate('text')).toEqual(['$: must be object']);
  });

  it('reads a 1 MiB value of 500,000 wrong items up to the first, and names it alone', () => {
    const schema = { type: 'object', properties: { items: { type: 'array', items: { type: 'string' } } } };
    const value = parseJsonValue(Buffer.from(`{"items":[${'1,'.repeat(499_999)}1]}`));
    expect(validator(schema).validate(value)).toEqual(['$.items[0]: must be string']);
    // The work: items read by the validator (all 500,000 were, each with an error object, when it listed every problem).
    const { array, reads } = counting((value as { items: unknown[] }).items);
    expect(validator(schema).validate({ items: array })).toEqual(['$.items[0]: must be string']);
    expect(reads()).toBeLessThan(10);
  });

  describe('in time linear in the value, for every value up to the reader\'s maxBytes', () => {
    // Loose bounds against a freeze, not a speed test (bench/json-codec.js prints the figures): a few hundred ms
    // at most for each of these at 1 MiB; ajv's own uniqueItems took seconds at 64 KiB and minutes at 1 MiB.
    it.each(worst.JSON_SCHEMA_WORST_CASES.map((c) => [c.name, c]))('%s', async (_, c) => {
      const v = validator(c.schema);
      const times = await worst.linearity(c.make, (input) => v.validate(parseJsonValue(input)));
      expect(times.small).toBeLessThan(1000);
      expect(times.full).toBeLessThan(1000);
      if (times.quarter !== undefined) expect(times.full).toBeLessThan(8 * times.quarter + 100);
    });
  });

  it('lists at most MAX_PROBLEMS problems, then how many more (a failed anyOf lists its branches)', () => {
    const problems = validator({ anyOf: Array.from({ length: 60 }, (_, i) => ({ const: i })) }).validate('x');
    expect(problems).toHaveLength(MAX_PROBLEMS + 1);
    expect(problems[0]).toBe('$: must be equal to constant: 0');
    expect(problems[MAX_PROBLEMS]).toBe('… and 11 more');
  });

  describe('uniqueItems', () => {
    const unique = (items?: object) => validator({ type: 'array', uniqueItems: true, ...(items ? { items } : {}) });

    it('finds items JSON Schema calls equal: objects whatever their keys\' order, numbers by value, at any depth', () => {
      const v = unique();
      expect(v.validate([{ a: 1, b: [1, { c: null }] }, 2, { b: [1, { c: null }], a: 1.0 }])).toEqual(['$: must NOT have duplicate items (items ## 0 and 2 are identical)']);
      expect(v.validate([0, -0])).toEqual(['$: must NOT have duplicate items (items ## 0 and 1 are identical)']);
      expect(v.validate([2n ** 64n, 'x', 2n ** 64n])).toEqual(['$: must NOT have duplicate items (items ## 0 and 2 are identical)']);
      expect(v.validate([[], {}, '', 0, false, null, '0', 'null', 'false', [[]], [{}], { '': null }, { '': 'null' }, [1, 2], [2, 1], { a: '1' }, { a: 1 }, { '"a"': 1 }, 2n ** 64n])).toEqual([]);
      expect(unique({ type: 'string' }).validate(['a', 'b', 'a'])).toEqual(['$: must NOT have duplicate items (items ## 0 and 2 are identical)']);
      expect(unique({ type: ['string', 'number'] }).validate(['1', 1, 'x'])).toEqual([]);
      expect(validator({ type: 'object', properties: { tags: { type: 'array', uniqueItems: true } } }).validate({ tags: [{ k: 'a' }, { k: 'a' }] })).toEqual(['$.tags: must NOT have duplicate items (items ## 0 and 1 are identical)']);
      expect(validator({ type: 'array', uniqueItems: false }).validate([1, 1])).toEqual([]);
      expect(unique().validate([1])).toEqual([]);
    });

    it('checks arrays nested under checked arrays, each by its own items', () => {
      const tree = validator({ $ref: '#/definitions/node', definitions: { node: { type: 'array', uniqueItems: true, items: { anyOf: [{ type: 'integer' }, { $ref: '#/definitions/node' }] } } } });
      expect(tree.validate([1, [1, 2], [2, 1], [[1], [2]]])).toEqual([]);
      // (each anyOf above the duplicate adds its branches' problems)
      expect(tree.validate([1, [1, 2], [2, [3, 3]]])).toContain('$[2][1]: must NOT have duplicate items (items ## 0 and 1 are identical)');
      expect(tree.validate([[[1], [2]], [[1], [2]]])).toEqual(['$: must NOT have duplicate items (items ## 0 and 1 are identical)']);
    });

    it('reads each item twice at most, where ajv compared every pair of objects (quadratic)', () => {
      const { array, reads } = counting(Array.from({ length: 1500 }, (_, i) => ({ id: i })), true);
      expect(unique().validate(array)).toEqual([]);
      expect(reads()).toBeLessThanOrEqual(2 * 1500);
    });
  });

  it('reads draft 2020-12 (prefixItems, $defs, unevaluatedProperties) and 2019-09 when $schema says so, draft-07 otherwise', () => {
    const v2020 = validator({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: { point: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }], items: false }, tag: { $ref: '#/$defs/tag' } },
      unevaluatedProperties: false,
      $defs: { tag: { type: 'string', minLength: 1 } },
    });
    expect(v2020.validate({ point: [1, 2], tag: 't' })).toEqual([]);
    expect(v2020.validate({ point: [1, 'x'], tag: 't' })).toEqual(['$.point[1]: must be number']);
    expect(v2020.validate({ point: [1, 2, 3], tag: 't' })).toEqual(['$.point: must NOT have more than 2 items']);
    expect(v2020.validate({ point: [1, 2], tag: '' })).toEqual(['$.tag: must NOT have fewer than 1 characters']);
    expect(v2020.validate({ point: [1, 2], tag: 't', other: 1 })).toEqual(['$: must NOT have unevaluated properties: "other"']);
    const v2019 = validator({ $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object', dependentRequired: { a: ['b'] } });
    expect(v2019.validate({ a: 1 })).toEqual(['$: must have property b when property a is present']);
    // draft-07's own keywords, without $schema: `dependencies`.
    expect(validator({ type: 'object', dependencies: { a: ['b'] } }).validate({ a: 1 })).toEqual(['$: must have property b when property a is present']);
    expect(validator({ $schema: 'http://json-schema.org/draft-06/schema#', type: 'integer' }).validate(1.5)).toEqual(['$: must be integer']);
  });

  it('reads a schema with references, under their names and relative to the schema\'s $id, a reference referring to another', () => {
    const address = { type: 'object', properties: { street: { type: 'string' }, country: { $ref: 'country.json' } }, required: ['street'] };
    const country = { type: 'string', pattern: '^[A-Z]{2}$' };
    const references = [
      { name: 'country.json', schema: JSON.stringify(country) },
      { name: 'address.json', schema: JSON.stringify(address) },
    ];
    const plain = validator({ type: 'object', properties: { shipTo: { $ref: 'address.json' } } }, references);
    expect(plain.validate({ shipTo: { street: 's', country: 'DE' } })).toEqual([]);
    expect(plain.validate({ shipTo: { country: 'de' } })).toEqual(["$.shipTo: must have required property 'street'"]);
    expect(plain.validate({ shipTo: { street: 's', country: 'de' } })).toEqual(['$.shipTo.country: must match pattern "^[A-Z]{2}$"']);
    const withId = validator({ $id: 'https://schemas.example.com/order.json', type: 'object', properties: { shipTo: { $ref: 'address.json' }, billTo: { $ref: 'https://schemas.example.com/address.json' } } }, references);
    expect(withId.validate({ shipTo: {}, billTo: { street: 1 } })).toEqual(["$.shipTo: must have required property 'street'"]);
    expect(withId.validate({ shipTo: { street: 's' }, billTo: { street: 1 } })).toEqual(['$.billTo.street: must be string']);
  });

  it('refuses a $ref to a remote URL no reference gives (never fetched), and one that resolves to nothing', () => {
    const remote = buildJsonSchemaValidator(9, JSON.stringify({ type: 'object', properties: { a: { $ref: 'https://schemas.example.com/a.json#/definitions/x' } } }));
    expect(remote).toEqual({ unreadable: expect.stringMatching(/^JSON Schema id 9 refers to https:\/\/schemas\.example\.com\/a\.json#\/definitions\/x, which is not among its references: a remote schema is never fetched/) });
    expect(buildJsonSchemaValidator(9, JSON.stringify({ $ref: 'missing.json' }))).toEqual({ unreadable: expect.stringMatching(/^JSON Schema id 9 does not compile: can't resolve reference missing\.json/) });
    // A URL inside data (an example, a constant) is not a reference.
    expect(buildJsonSchemaValidator(9, JSON.stringify({ const: { $ref: 'https://x.example/y' }, examples: [{ $ref: 'https://x.example/z' }] }))).toHaveProperty('jsonSchema');
    // The schema's own $id, absolute, is not remote.
    expect(validator({ $id: 'https://x.example/self.json', type: 'object', properties: { next: { $ref: 'https://x.example/self.json' } } }).validate({ next: { next: 1 } })).toEqual(['$.next.next: must be object']);
  });

  it('is unreadable, saying why, for a schema that does not compile, is not JSON, or names a draft ajv 8 does not read', () => {
    expect(buildJsonSchemaValidator(9, JSON.stringify({ type: 'strnig' }))).toEqual({ unreadable: expect.stringMatching(/^JSON Schema id 9 does not compile: schema is invalid: data\/type must be equal to one of the allowed values/) });
    expect(buildJsonSchemaValidator(9, '{"type":')).toEqual({ unreadable: expect.stringMatching(/^JSON Schema id 9 \(or one of its references\) is not JSON: /) });
    expect(buildJsonSchemaValidator(9, '[1]')).toEqual({ unreadable: 'JSON Schema id 9 is not a schema (an object or a boolean)' });
    expect(buildJsonSchemaValidator(9, JSON.stringify({ $schema: 'http://json-schema.org/draft-04/schema#' }))).toEqual({ unreadable: expect.stringMatching(/draft-04\/schema# is not a JSON Schema draft ajv 8 reads/) });
    expect(validator(true).validate(1)).toEqual([]);
    expect(validator(false).validate(1)).toEqual(['$: must NOT be valid']);
  });

  it('reads a record\'s JSON body, and refuses one that is not UTF-8 JSON, naming the schema id', () => {
    expect(parseJsonBody(9, Buffer.from('{"a":[1,"é"]}'))).toEqual({ a: [1, 'é'] });
    expect(() => parseJsonBody(9, Buffer.from('{"a":'))).toThrow(DecodeError);
    expect(() => parseJsonBody(9, Buffer.from('{"a":'))).toThrow(/JSON Schema id 9 is not JSON/);
    expect(() => parseJsonBody(9, Buffer.from([0x22, 0xff, 0x22]))).toThrow(/JSON Schema id 9 is not UTF-8 text/);
  });

  it('writes JSON pointers as paths', () => {
    expect(pathOf('')).toBe('$');
    expect(pathOf('/a/0/b~1c/d~0e/_x$')).toBe('$.a[0]["b/c"]["d~e"]._x$');
  });
});

describe('without the optional packages', () => {
  const missing = (name: string) => () => {
    throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' });
  };

  it('says which package is missing (not a problem of the schema: its records wait for the package)', () => {
    jest.isolateModules(() => {
      jest.doMock('ajv', missing('ajv'));
      jest.doMock('protobufjs', missing('protobufjs'));
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const json = require('./json-schema.codec') as typeof import('./json-schema.codec');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const proto = require('../protobuf/protobuf.codec') as typeof import('../protobuf/protobuf.codec');
      expect(json.buildJsonSchemaValidator(1, '{}')).toEqual({ missingPeer: 'ajv' });
      expect(proto.buildProtobufSchema(1, 'syntax = "proto3"; message M {}')).toEqual({ missingPeer: 'protobufjs' });
    });
    jest.dontMock('ajv');
    jest.dontMock('protobufjs');
  });
});
