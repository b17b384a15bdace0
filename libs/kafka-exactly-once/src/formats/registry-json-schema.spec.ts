import { DecodeError } from '../errors/decode.error';
import { buildJsonSchemaValidator, frameJsonSchema, type JsonSchemaValidator, MAX_PROBLEMS, parseJsonBody, pathOf } from './registry-json-schema';

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

  it('names every problem with its path (all errors, not the first)', () => {
    const problems = validator(ORDER).validate({ amount: 1.5, status: 'LOST', lines: [{ sku: 'a' }, { sku: 2 }, {}], 'ship to': 4, extra: true });
    expect(problems).toEqual(
      expect.arrayContaining([
        "$: must have required property 'orderId'",
        '$: must NOT have additional properties: "extra"',
        '$.amount: must be integer',
        '$.status: must be equal to one of the allowed values: "NEW", "PAID"',
        '$.lines[1].sku: must be string',
        "$.lines[2]: must have required property 'sku'",
        '$["ship to"]: must be string',
      ]),
    );
    expect(problems).toHaveLength(7);
    expect(validator(ORDER).validate('text')).toEqual(['$: must be object']);
  });

  it('lists at most MAX_PROBLEMS problems, then how many more', () => {
    const problems = validator({ type: 'array', items: { type: 'string' } }).validate(Array.from({ length: 60 }, (_, i) => i));
    expect(problems).toHaveLength(MAX_PROBLEMS + 1);
    expect(problems[MAX_PROBLEMS]).toBe('… and 10 more');
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
    expect(v2020.validate({ point: [1, 'x', 3], tag: '', other: 1 })).toEqual(
      expect.arrayContaining(['$.point[1]: must be number', '$.point: must NOT have more than 2 items', '$.tag: must NOT have fewer than 1 characters', '$: must NOT have unevaluated properties: "other"']),
    );
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
    expect(plain.validate({ shipTo: { country: 'de' } })).toEqual(["$.shipTo: must have required property 'street'", '$.shipTo.country: must match pattern "^[A-Z]{2}$"']);
    const withId = validator({ $id: 'https://schemas.example.com/order.json', type: 'object', properties: { shipTo: { $ref: 'address.json' }, billTo: { $ref: 'https://schemas.example.com/address.json' } } }, references);
    expect(withId.validate({ shipTo: {}, billTo: { street: 1 } })).toEqual(["$.shipTo: must have required property 'street'", '$.billTo.street: must be string']);
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

  it('frames JSON bytes after the magic byte and the id, and writes JSON pointers as paths', () => {
    expect(frameJsonSchema(0x01020304, Buffer.from('{}'))).toEqual(Buffer.from([0, 1, 2, 3, 4, 0x7b, 0x7d]));
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
      const json = require('./registry-json-schema') as typeof import('./registry-json-schema');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const proto = require('./registry-protobuf') as typeof import('./registry-protobuf');
      expect(json.buildJsonSchemaValidator(1, '{}')).toEqual({ missingPeer: 'ajv' });
      expect(proto.buildProtobufCodec(1, 'syntax = "proto3"; message M {}')).toEqual({ missingPeer: 'protobufjs' });
    });
    jest.dontMock('ajv');
    jest.dontMock('protobufjs');
  });
});
