import 'reflect-metadata';
import { IsInt, IsString, Min } from 'class-validator';
import * as v from 'valibot';
import { z } from 'zod';
import { DecodeError } from '../errors/decode.error';
import { EventValidationError } from '../errors/event-validation.error';
import { SchemaRegistryError } from '../errors/schema-registry.error';
import { RetriableValidationError } from '../errors/retriable-validation.error';
import type { RegistryAnswer, RegistryTransport } from '../registry/registry-http';
import { SchemaRegistry } from './avro/schema-registry';
import { encodeSingleObject } from './avro/single-object.codec';
import { eventReader } from './event-reader';
import { formatRegistry } from './writer-codecs';
import { eventValidator, validationProblem } from './event-validator';
import { DEFAULT_JSON_LIMITS } from '../options/format-defaults';
import { frameForRegistry } from '../registry/registry-framing';
import { encodeMessageIndexes } from './protobuf/protobuf.codec';

class Order {
  @IsString()
  orderId!: string;

  @IsInt()
  @Min(1)
  amountCents!: number;
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** A registry answering from a table of schemas by id (the unit's stand-in for the REST API). */
function registryOf(schemas: Record<number, { schemaType?: string; schema: string }>, asked: string[] = []): SchemaRegistry {
  const transport: RegistryTransport = {
    async request(_method, path): Promise<RegistryAnswer> {
      asked.push(path);
      const id = Number(/^\/schemas\/ids\/(\d+)$/.exec(path)?.[1]);
      const found = schemas[id];
      return found ? { status: 200, body: found } : { status: 404, body: { error_code: 40403, message: 'Schema not found' } };
    },
  };
  const registry = SchemaRegistry.fromSchemas([]);
  registry.remote = formatRegistry({ url: 'http://registry.invalid', subjectNameStrategy: 'topic', autoRegister: false, requestTimeoutMs: 1000, unknownIdWaitMs: 0, missingPeerWaitMs: 0 }, 'bigint', transport);
  return registry;
}

describe('event readers', () => {
  it('reads JSON and hands it over as it is without a validator', async () => {
    const reader = eventReader(SchemaRegistry.fromSchemas([]), { format: 'json', json: DEFAULT_JSON_LIMITS });
    expect(reader.describe).toBe('JSON');
    await expect(reader.read(json({ orderId: 'o', amountCents: 'any' }))).resolves.toEqual({ orderId: 'o', amountCents: 'any' });
    await expect(reader.read(Buffer.from('[1]'))).rejects.toThrow(DecodeError);
    await expect(reader.read(Buffer.from([0, 0, 0, 0, 1, 0x7b]))).rejects.toThrow(/Schema Registry/);
  });

  it('validates with a class-validator DTO: the handler gets the instance; problems name their fields', async () => {
    const reader = eventReader(SchemaRegistry.fromSchemas([]), { format: 'json', json: DEFAULT_JSON_LIMITS, validator: eventValidator(Order), validatorName: 'Order' });
    const order = await reader.read(json({ orderId: 'o-1', amountCents: 5 }));
    expect(order).toBeInstanceOf(Order);
    expect(order).toEqual(Object.assign(new Order(), { orderId: 'o-1', amountCents: 5 }));
    const refused = await reader.read(json({ orderId: 7, amountCents: 0 })).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(EventValidationError);
    expect((refused as EventValidationError).fieldErrors.map((e) => e.path).sort()).toEqual(['amountCents', 'orderId']);
    expect((refused as Error).message).toMatch(/^Event is not a valid Order: /);
  });

  it('validates with Standard Schemas (zod, valibot): the handler gets their output', async () => {
    const zodReader = eventReader(SchemaRegistry.fromSchemas([]), {
      format: 'json',
      json: { ...DEFAULT_JSON_LIMITS, bigIntegers: 'bigint' },
      validator: eventValidator(z.object({ id: z.string(), amount: z.union([z.bigint(), z.number().int().transform(BigInt)]) })),
      validatorName: 'a zod schema',
    });
    await expect(zodReader.read(Buffer.from('{"id":"a","amount":9223372036854775807,"dropped":1}'))).resolves.toEqual({ id: 'a', amount: 9223372036854775807n });
    await expect(zodReader.read(Buffer.from('{"id":"a","amount":1.5}'))).rejects.toThrow(/amount/);
    const valibot = eventValidator(v.object({ n: v.pipe(v.number(), v.minValue(2)) }));
    await expect(valibot({ n: 3 })).resolves.toEqual({ n: 3 });
    await expect(valibot({ n: 1 })).rejects.toThrow(EventValidationError);
  });

  it('makes a validator that throws a validation failure of the record, and refuses what is not a validator', async () => {
    const throwing = { '~standard': { version: 1 as const, vendor: 'custom', validate: () => { throw new RangeError('boom'); } } };
    const reader = eventReader(SchemaRegistry.fromSchemas([]), { format: 'json', json: DEFAULT_JSON_LIMITS, validator: eventValidator(throwing), validatorName: 'a custom schema' });
    const failure = await reader.read(json({ a: 1 })).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(EventValidationError);
    expect((failure as Error).message).toMatch(/the validator threw: boom/);
    expect(validationProblem({})).toMatch(/DTO class .* or a Standard Schema/);
    expect(validationProblem(null)).toMatch(/got null/);
    expect(validationProblem(Order)).toBeUndefined();
  });

  it('reads Avro with its reader schema, and validates it too when asked', async () => {
    const registry = SchemaRegistry.fromSchemas([{ schema: { type: 'record', name: 'Order', namespace: 't', fields: [{ name: 'orderId', type: 'string' }, { name: 'amountCents', type: 'int' }] } }]);
    const schema = registry.current('t.Order');
    const reader = eventReader(registry, { format: 'avro', schema, json: DEFAULT_JSON_LIMITS, validator: eventValidator(Order), validatorName: 'Order' });
    expect(reader.describe).toBe('t.Order (Avro), validated with Order');
    await expect(reader.read(encodeSingleObject(schema, { orderId: 'o', amountCents: 2 }))).resolves.toBeInstanceOf(Order);
    await expect(reader.read(encodeSingleObject(schema, { orderId: 'o', amountCents: 0 }))).rejects.toThrow(EventValidationError);
    await expect(reader.read(json({ orderId: 'o' }))).rejects.toThrow(DecodeError);
  });

  it('reads JSON Schema and Protobuf in the registry framing by the writer type, whichever of the two the handler reads', async () => {
    const registry = registryOf({
      1: { schemaType: 'JSON', schema: JSON.stringify({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }) },
      2: { schemaType: 'PROTOBUF', schema: 'syntax = "proto3"; package p; message M { int64 n = 1; string s = 2; }' },
      3: { schema: JSON.stringify({ type: 'record', name: 'A', fields: [{ name: 'n', type: 'int' }] }) },
    });
    const protobuf = require('protobufjs') as typeof import('protobufjs');
    const M = protobuf.parse('syntax = "proto3"; package p; message M { int64 n = 1; string s = 2; }', { keepCase: true }).root.lookupType('p.M');
    const protoValue = frameForRegistry(2, Buffer.concat([encodeMessageIndexes([0]), Buffer.from(M.encode(M.fromObject({ n: '9007199254740993', s: 'x' })).finish())]));
    const values = [frameForRegistry(1, json({ n: 4 })), frameForRegistry(1, json({ n: 'four' })), protoValue, frameForRegistry(3, Buffer.from([2])), frameForRegistry(99, json({}))];
    // Not fetched yet: the registry's part, waited on (never dead-lettered).
    await expect(eventReader(registry, { format: 'json', json: DEFAULT_JSON_LIMITS }).read(values[0])).rejects.toThrow(SchemaRegistryError);
    await registry.remote!.prefetch(values);
    for (const format of ['json', 'protobuf'] as const) {
      const reader = eventReader(registry, { format, json: DEFAULT_JSON_LIMITS });
      await expect(reader.read(values[0])).resolves.toEqual({ n: 4 });
      await expect(reader.read(values[1])).rejects.toThrow(EventValidationError);
      await expect(reader.read(values[2])).resolves.toEqual({ n: '9007199254740993', s: 'x' });
      await expect(reader.read(values[3])).rejects.toThrow(/an Avro schema/);
      await expect(reader.read(values[4])).rejects.toThrow(/does not exist/);
    }
    const protobufReader = eventReader(registry, { format: 'protobuf', json: DEFAULT_JSON_LIMITS });
    await expect(protobufReader.read(json({ n: 1 }))).rejects.toThrow(/not in a Schema Registry's framing/);
    await expect(protobufReader.read(null)).rejects.toThrow(/tombstone/);
    // Decoded, the writer schema beside the event (never in it): its id, its kind, the Protobuf message's name.
    expect(protobufReader.decode(values[2])).toEqual({ event: { n: '9007199254740993', s: 'x' }, schema: { id: 2, type: 'protobuf', name: 'p.M' } });
    expect(protobufReader.decode(values[0])).toEqual({ event: { n: 4 }, schema: { id: 1, type: 'json' } });
    expect(eventReader(registry, { format: 'json', json: DEFAULT_JSON_LIMITS }).decode(json({ n: 1 }))).toEqual({ event: { n: 1 } });
  });

  it('names which of two Protobuf messages of one schema a record carries, and the Avro record of a registry value', async () => {
    const proto = 'syntax = "proto3"; package shop; message OrderPlaced { string id = 1; } message OrderCancelled { string id = 1; }';
    const registry = registryOf({ 5: { schemaType: 'PROTOBUF', schema: proto }, 6: { schema: JSON.stringify({ type: 'record', name: 'Order', namespace: 'shop.avro', fields: [{ name: 'id', type: 'string' }] }) } });
    const protobuf = require('protobufjs') as typeof import('protobufjs');
    const root = protobuf.parse(proto, { keepCase: true }).root;
    const framed = (index: number, name: string) => frameForRegistry(5, Buffer.concat([encodeMessageIndexes([index]), Buffer.from(root.lookupType(name).encode({ id: 'o-1' }).finish())]));
    const avro = frameForRegistry(6, Buffer.from([6, 0x6f, 0x2d, 0x31])); // the registry's framing, an Avro body: "o-1"
    await registry.remote!.prefetch([framed(0, 'shop.OrderPlaced'), avro]);
    const reader = eventReader(registry, { format: 'protobuf', json: DEFAULT_JSON_LIMITS });
    // Same fields, same values: only the message name tells them apart.
    expect(reader.decode(framed(0, 'shop.OrderPlaced'))).toEqual({ event: { id: 'o-1' }, schema: { id: 5, type: 'protobuf', name: 'shop.OrderPlaced' } });
    expect(reader.decode(framed(1, 'shop.OrderCancelled'))).toEqual({ event: { id: 'o-1' }, schema: { id: 5, type: 'protobuf', name: 'shop.OrderCancelled' } });
    const schemas = SchemaRegistry.fromSchemas([{ schema: { type: 'record', name: 'Order', namespace: 'shop.avro', fields: [{ name: 'id', type: 'string' }] } }]);
    schemas.remote = registry.remote;
    const avroReader = eventReader(schemas, { format: 'avro', schema: schemas.current('shop.avro.Order'), json: DEFAULT_JSON_LIMITS });
    expect(avroReader.decode(avro)).toEqual({ event: { id: 'o-1' }, schema: { id: 6, type: 'avro', name: 'shop.avro.Order' } });
  });

  it('tells a validator that could not decide (retriable) from one that refuses the event', async () => {
    let away = true;
    const Checked = z.object({ customerId: z.string() }).refine(async (order) => {
      if (away) throw new RetriableValidationError('customers service away');
      return order.customerId !== 'unknown';
    }, 'no such customer');
    const reader = eventReader(SchemaRegistry.fromSchemas([]), { format: 'json', json: DEFAULT_JSON_LIMITS, validator: eventValidator(Checked), validatorName: 'a zod schema' });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await expect(reader.read(json({ customerId: 'c-1' }))).rejects.toThrow(RetriableValidationError);
      // Any error a validator throws with retriable: true counts the same (wrapped, its cause kept).
      const duckTyped = eventReader(SchemaRegistry.fromSchemas([]), { format: 'json', json: DEFAULT_JSON_LIMITS, validator: async () => { throw Object.assign(new Error('ECONNREFUSED'), { retriable: true }); }, validatorName: 'check' });
      const error = await duckTyped.read(json({})).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RetriableValidationError);
      expect(error).toMatchObject({ message: 'check could not decide now: ECONNREFUSED', cause: expect.objectContaining({ message: 'ECONNREFUSED' }) });
      // Any other throw is a refusal, as before.
      const throwing = eventReader(SchemaRegistry.fromSchemas([]), { format: 'json', json: DEFAULT_JSON_LIMITS, validator: async () => { throw new Error('bug'); }, validatorName: 'check' });
      await expect(throwing.read(json({}))).rejects.toThrow(EventValidationError);
      away = false;
      await expect(reader.read(json({ customerId: 'c-1' }))).resolves.toEqual({ customerId: 'c-1' });
      await expect(reader.read(json({ customerId: 'unknown' }))).rejects.toThrow(EventValidationError);
      // zod's own ~standard.validate would leave the refinement's rejection unhandled (colinhacks/zod#6610).
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('reads a topic declared plain JSON only as JSON even with a registry: a value starting with 00 gets the JSON reader\'s refusal, never a lookup', async () => {
    const asked: string[] = [];
    const registry = registryOf({ 1: { schemaType: 'JSON', schema: '{}' } }, asked);
    const plain = eventReader(registry, { format: 'json', json: DEFAULT_JSON_LIMITS, registryFraming: false });
    expect(plain.readsRegistry).toBe(false);
    expect(plain.describe).toBe('JSON, plain only');
    const framed = frameForRegistry(1, json({ n: 4 }));
    await registry.remote!.prefetch([]);
    await expect(plain.read(framed)).rejects.toThrow(DecodeError);
    await expect(plain.read(framed)).rejects.toThrow(/starts with byte 00, as Schema Registry framing does .*JSON has no such framing/);
    await expect(plain.read(json({ n: 4 }))).resolves.toEqual({ n: 4 });
    expect(asked).toEqual([]);
    // The same topic's reader by default: the registry's framing.
    expect(eventReader(registry, { format: 'json', json: DEFAULT_JSON_LIMITS }).readsRegistry).toBe(true);
  });
});

describe('event readers without the optional packages', () => {
  const missing = (name: string) => () => {
    throw Object.assign(new Error(`Cannot find module '${name}'`), { code: 'MODULE_NOT_FOUND' });
  };

  it('makes a writer whose package is missing wait only when the topic\'s subject holds it, for missingPeerWaitMs, and otherwise dead-letters the record naming the package; an Avro reader still refuses it as not Avro', async () => {
    await jest.isolateModulesAsync(async () => {
      jest.doMock('ajv', missing('ajv'));
      jest.doMock('protobufjs', missing('protobufjs'));
      try {
        /* eslint-disable @typescript-eslint/no-require-imports */
        await readWithoutPackages({ reader: require('./event-reader'), serde: require('./avro/schema-registry'), remote: require('./writer-codecs') });
        /* eslint-enable @typescript-eslint/no-require-imports */
      } finally {
        jest.dontMock('ajv');
        jest.dontMock('protobufjs');
      }
    });
  });

  async function readWithoutPackages(modules: { reader: typeof import('./event-reader'); serde: typeof import('./avro/schema-registry'); remote: typeof import('./writer-codecs') }): Promise<void> {
    // Ids 1 and 2 under the topic's own subject (orders-value), 3 and 4 under another team's only.
    const schemas: Record<number, { schemaType: string; schema: string; subjects: string[] }> = {
      1: { schemaType: 'JSON', schema: '{}', subjects: ['orders-value'] },
      2: { schemaType: 'PROTOBUF', schema: 'syntax = "proto3"; message M { int32 n = 1; }', subjects: ['audit-value', 'orders-value'] },
      3: { schemaType: 'JSON', schema: '{"title": "other"}', subjects: ['payments-value'] },
      4: { schemaType: 'PROTOBUF', schema: 'syntax = "proto3"; message Other { int32 n = 1; }', subjects: ['payments-value'] },
    };
    const registryWith = (strategy: 'topic' | 'record' | 'topic-record', now: () => number) => {
      const registry = modules.serde.SchemaRegistry.fromSchemas([{ schema: { type: 'record', name: 'A', fields: [{ name: 'n', type: 'int' }] } }]);
      registry.remote = modules.remote.formatRegistry({ url: 'http://registry.invalid', subjectNameStrategy: strategy, autoRegister: false, requestTimeoutMs: 1000, unknownIdWaitMs: 0, missingPeerWaitMs: 60_000 }, 'bigint', {
        request: async (_method, path) => {
          const [, id, versions] = /^\/schemas\/ids\/(\d+)(\/versions)?$/.exec(path)!;
          const { subjects, ...schema } = schemas[Number(id)];
          return { status: 200, body: versions ? subjects.map((subject) => ({ subject: strategy === 'topic-record' ? subject.replace(/-value$/, '-t.M') : subject, version: 1 })) : schema };
        },
      }, now);
      return registry;
    };
    let now = 1_000_000;
    const registry = registryWith('topic', () => now);
    const values = [frameForRegistry(1, json({ n: 1 })), frameForRegistry(2, Buffer.from([0, 8, 1])), frameForRegistry(3, json({ n: 1 })), frameForRegistry(4, Buffer.from([0, 8, 1]))];
    await registry.remote!.prefetch(values);
    const failure = (reader: ReturnType<typeof modules.reader.eventReader>, value: Buffer) => reader.read(value).catch((e: unknown) => e);
    for (const format of ['json', 'protobuf'] as const) {
      const reader = modules.reader.eventReader(registry, { format, json: DEFAULT_JSON_LIMITS, topic: 'orders' });
      // The topic's subject holds the schema (the boot refuses that, when the registry answers then): the record waits.
      for (const [value, peer] of [[values[0], 'ajv'], [values[1], 'protobufjs']] as const) {
        expect(await failure(reader, value)).toMatchObject({ name: 'SchemaRegistryError', failure: 'missing-peer', retriable: true, subject: 'orders-value' });
        expect(((await failure(reader, value)) as Error).message).toMatch(
          new RegExp(`${peer} \\(\\^\\d\\.0\\.0, an optional peer dependency of kafka-exactly-once\\) is not installed, and orders's subject orders-value holds it: its records wait up to 60000 ms \\(schemaRegistry\\.missingPeerWaitMs, 0 ms so far\\), then are dead-lettered\\. Install it and restart the application: npm install "${peer}@\\^\\d\\.0\\.0"`),
        );
      }
      // Another subject's schema (another team's, a hostile record's): the record's failure at once, naming the package.
      for (const [value, peer] of [[values[2], 'ajv'], [values[3], 'protobufjs']] as const) {
        expect(await failure(reader, value)).toMatchObject({ name: 'DecodeError', retriable: false });
        expect(((await failure(reader, value)) as Error).message).toMatch(
          new RegExp(`is not installed, and the subject of orders does not hold that schema \\(not waited for: the registry lists it under subject payments-value\\)\\. If orders is to carry such records, install it, restart the application and replay this dead letter: npm install "${peer}@`),
        );
      }
    }
    // Another topic's reader: the subject of id 1 is not its own.
    expect(await failure(modules.reader.eventReader(registry, { format: 'json', json: DEFAULT_JSON_LIMITS, topic: 'payments' }), values[0])).toMatchObject({ name: 'DecodeError' });
    // The wait is bounded: from the first record that waited for the package, then dead letters naming it.
    now += 59_999;
    const orders = modules.reader.eventReader(registry, { format: 'json', json: DEFAULT_JSON_LIMITS, topic: 'orders' });
    expect(await failure(orders, values[0])).toMatchObject({ failure: 'missing-peer', message: expect.stringContaining('59999 ms so far') });
    now += 1;
    expect(await failure(orders, values[0])).toMatchObject({ name: 'DecodeError', message: expect.stringMatching(/\(the records of orders's subject orders-value waited 60000 ms for it: schemaRegistry\.missingPeerWaitMs\)\. Install it, restart the application and replay this dead letter: npm install "ajv@\^8\.0\.0"/) });
    // The record strategy names no topic: never a wait. The topic-record one names the topic: orders-t.M waits.
    for (const [strategy, name] of [['record', 'DecodeError'], ['topic-record', 'SchemaRegistryError']] as const) {
      const other = registryWith(strategy, () => now);
      await other.remote!.prefetch(values);
      expect(await failure(modules.reader.eventReader(other, { format: 'protobuf', json: DEFAULT_JSON_LIMITS, topic: 'orders' }), values[1])).toMatchObject({ name });
    }
    const avro = modules.reader.eventReader(registry, { format: 'avro', schema: registry.current('A'), json: DEFAULT_JSON_LIMITS, topic: 'orders' });
    await expect(avro.read(values[1])).rejects.toMatchObject({ name: 'DecodeError', message: expect.stringMatching(/a PROTOBUF schema under this id, not an Avro one/) });
  }
});
