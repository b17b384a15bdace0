import * as protobuf from 'protobufjs';
import { DecodeError } from 'kafka-exactly-once';
import { parseJsonBody } from 'kafka-exactly-once/formats/json-schema/json-schema.codec';
import { frameForRegistry } from 'kafka-exactly-once/registry/registry-framing';
import type { FieldError } from 'kafka-exactly-once/errors/event-validation.error';
import type { Writer } from 'kafka-exactly-once/registry/registry-schemas';
import type { WriterCodec } from 'kafka-exactly-once/formats/format.codec';
import { formatRegistry, type FormatRegistry } from 'kafka-exactly-once/formats/writer-codecs';
import { DEFAULT_JSON_LIMITS } from 'kafka-exactly-once/options/format-defaults';
import { uniqueTopic } from './support/kafka';
import { startTestRegistry } from './support/registry';

// NOTE: Apicurio 2.4's Confluent API tells a JSON Schema by its content, and refuses one with neither `$schema` nor
// `properties` ("Given schema is not from type: JSON", 42201) whatever schemaType says: each schema here names its draft.
const CURRENCY = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'string', pattern: '^[A-Z]{3}$' };
const ORDER_V1 = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: { orderId: { type: 'string' }, amount: { type: 'integer' } },
  required: ['orderId', 'amount'],
};
const ORDER_V2 = { ...ORDER_V1, properties: { ...ORDER_V1.properties, currency: { $ref: 'currency.json' } } };

const MONEY_PROTO = `syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; }
`;
const ORDER_PROTO_V1 = `syntax = "proto3";
package shop;

message Order {
  string order_id = 1;
  int64 amount = 2;
  message Line { string sku = 1; }
  repeated Line lines = 3;
}
message Refund { string order_id = 1; }
`;
// v2 adds fields: one of a type from a referenced file, one of a well-known type (the registry wants no reference for it).
const ORDER_PROTO_V2 = ORDER_PROTO_V1.replace('package shop;\n', 'package shop;\nimport "shop/common/money.proto";\nimport "google/protobuf/timestamp.proto";\n').replace(
  '  repeated Line lines = 3;\n',
  '  repeated Line lines = 3;\n  shop.common.Money total = 4;\n  google.protobuf.Timestamp placed_at = 5;\n',
);

/**
 * JSON Schema and Protobuf records in Confluent's Schema Registry framing, against a real registry (Apicurio's
 * Confluent-compatible API, started by scripts/registry/registry.sh when none answers): schemas registered over the
 * registry's REST API as another service's deploy would, records framed byte by byte as Confluent's serializers
 * write them (the bodies by protobufjs and JSON.stringify, not by the library), and two versions of each read side
 * by side by the library's RegistrySchemas and the formats' codecs.
 */
describe('library: JSON Schema and Protobuf in the Schema Registry framing', () => {
  let registry: ReturnType<typeof startTestRegistry>;
  let remote: FormatRegistry;
  const prefix = uniqueTopic('registry-formats');

  beforeAll(() => {
    registry = startTestRegistry();
    remote = formatRegistry({ url: registry.url, subjectNameStrategy: 'topic', autoRegister: false, requestTimeoutMs: 5000, unknownIdWaitMs: 0, missingPeerWaitMs: 0 }, 'bigint');
  });

  afterAll(() => {
    registry?.stop();
  });

  /** The registry's REST API, as any client calls it. */
  async function rest(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const answer = await fetch(`${registry.url}${path}`, {
      method,
      headers: { 'content-type': 'application/vnd.schemaregistry.v1+json', accept: 'application/vnd.schemaregistry.v1+json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await answer.text();
    return { status: answer.status, body: text ? JSON.parse(text) : null };
  }

  async function register(subject: string, schemaType: 'JSON' | 'PROTOBUF', schema: string, references: Array<{ name: string; subject: string; version: number }> = []): Promise<number> {
    const answer = await rest('POST', `/subjects/${encodeURIComponent(subject)}/versions`, { schemaType, schema, references });
    if (answer.status !== 200 || typeof answer.body?.id !== 'number') throw new Error(`registering ${subject}: ${answer.status} ${JSON.stringify(answer.body)}`);
    return answer.body.id;
  }

  /** Confluent's framing, written out: magic byte 0, the id as 4 bytes big-endian, then what follows. */
  const framed = (id: number, ...parts: Buffer[]) => Buffer.concat([Buffer.from([0, (id >>> 24) & 0xff, (id >>> 16) & 0xff, (id >>> 8) & 0xff, id & 0xff]), ...parts]);

  function writerOf(id: number): Exclude<Writer<WriterCodec>, 'unknown'> {
    const writer = remote.writer(id);
    if (writer === undefined || writer === 'unknown') throw new Error(`no writer of id ${id}: ${String(writer)}`);
    return writer;
  }

  /** What a consumer of the library would do with a JSON Schema record: the writer by id, the JSON, its problems. */
  function readJson(value: Buffer): { id: number; value: unknown; problems: FieldError[] } {
    const id = value.readUInt32BE(1);
    const writer = writerOf(id);
    if (!('codec' in writer) || writer.codec.schemaType !== 'JSON') throw new Error(`id ${id} is not a JSON Schema writer: ${JSON.stringify(writer)}`);
    const parsed = parseJsonBody(id, value.subarray(5));
    return { id, value: parsed, problems: writer.codec.validate(parsed) };
  }

  function readProtobuf(value: Buffer): { message?: string; value: unknown } {
    const id = value.readUInt32BE(1);
    const writer = writerOf(id);
    if (!('codec' in writer) || writer.codec.schemaType !== 'PROTOBUF') throw new Error(`id ${id} is not a Protobuf writer: ${JSON.stringify(writer)}`);
    const { name, value: read } = writer.codec.decode(value.subarray(5), DEFAULT_JSON_LIMITS);
    return { message: name, value: read };
  }

  /** A body as protobufjs writes it from the .proto texts themselves (the other service's side). */
  function protobufBody(texts: string[], message: string, value: Record<string, unknown>): Buffer {
    const root = new protobuf.Root();
    root.addJSON(protobuf.common.get('google/protobuf/timestamp.proto')!.nested!);
    for (const text of texts) protobuf.parse(text, root, { keepCase: true });
    const type = root.lookupType(message);
    return Buffer.from(type.encode(type.fromObject(value)).finish());
  }

  it('reads JSON Schema records of v1 and v2 side by side, v2 with a schema reference, and names the first problem of invalid values', async () => {
    const currencySubject = `${prefix}.currency`;
    const subject = `${prefix}.orders-json-value`;
    await register(currencySubject, 'JSON', JSON.stringify(CURRENCY));
    const v1 = await register(subject, 'JSON', JSON.stringify(ORDER_V1));
    const v2 = await register(subject, 'JSON', JSON.stringify(ORDER_V2), [{ name: 'currency.json', subject: currencySubject, version: 1 }]);
    expect(v2).not.toBe(v1);

    // What the registry answers for the id the records carry: the library reads its schemaType and references.
    const byId = await rest('GET', `/schemas/ids/${v2}`);
    expect(byId.body).toMatchObject({ schemaType: 'JSON', references: [{ name: 'currency.json', subject: currencySubject, version: 1 }] });

    const json = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8');
    const records = [
      framed(v1, json({ orderId: 'o-1', amount: 100 })),
      framed(v2, json({ orderId: 'o-2', amount: 200, currency: 'EUR' })),
      framed(v1, json({ orderId: 'o-3', amount: 300 })),
      framed(v2, json({ amount: '12', currency: 'euro' })),
      framed(v1, json({ orderId: 4, amount: 1.5 })),
      framed(v2, json({ orderId: 'o-6', amount: 600, currency: 'euro' })),
      framed(v1, json({ orderId: 'o-7', amount: 1.5 })),
    ];
    await remote.prefetch(records);
    expect(writerOf(v1)).toHaveProperty('codec.describe', `JSON Schema id ${v1}`);
    expect(writerOf(v2)).toHaveProperty('codec.describe', `JSON Schema id ${v2}`);

    const read = records.map(readJson);
    expect(read.slice(0, 3)).toEqual([
      { id: v1, value: { orderId: 'o-1', amount: 100 }, problems: [] },
      { id: v2, value: { orderId: 'o-2', amount: 200, currency: 'EUR' }, problems: [] },
      { id: v1, value: { orderId: 'o-3', amount: 300 }, problems: [] },
    ]);
    // The first problem of each (validation stops there), the one under v2's reference included.
    expect(read.slice(3).map((r) => r.problems)).toEqual([
      [{ path: '', problem: "must have required property 'orderId'" }],
      [{ path: 'orderId', problem: 'must be string' }],
      [{ path: 'currency', problem: 'must match pattern "^[A-Z]{3}$"' }],
      [{ path: 'amount', problem: 'must be integer' }],
    ]);
    // Bytes that are not JSON at all: a decode failure, naming the id.
    expect(() => readJson(framed(v1, Buffer.from('{"orderId":')))).toThrow(DecodeError);
    expect(() => readJson(framed(v1, Buffer.from('{"orderId":')))).toThrow(new RegExp(`JSON Schema id ${v1} is not JSON`));

    // The writer side: the subject's latest schema (v2), framed as Confluent's serializer frames it.
    const latest = await remote.latestFor(subject);
    expect(latest.id).toBe(v2);
    expect(remote.latestSoon(subject)).toBe(latest); // cached: given at once
    if (!('codec' in latest.writer) || latest.writer.codec.schemaType !== 'JSON') throw new Error('latest is not a JSON Schema writer');
    const value = { orderId: 'o-5', amount: 500, currency: 'USD' };
    expect(latest.writer.codec.validate(value)).toEqual([]);
    expect(frameForRegistry(latest.id, json(value))).toEqual(framed(v2, json(value)));
  });

  it('reads Protobuf records of v1 and v2 side by side, v2 importing a referenced file, by their message indexes; refuses a body that does not decode and an unknown index', async () => {
    const moneySubject = `${prefix}.money`;
    const subject = `${prefix}.orders-proto-value`;
    await register(moneySubject, 'PROTOBUF', MONEY_PROTO);
    const v1 = await register(subject, 'PROTOBUF', ORDER_PROTO_V1);
    const v2 = await register(subject, 'PROTOBUF', ORDER_PROTO_V2, [{ name: 'shop/common/money.proto', subject: moneySubject, version: 1 }]);
    expect(v2).not.toBe(v1);
    expect((await rest('GET', `/schemas/ids/${v1}`)).body).toMatchObject({ schemaType: 'PROTOBUF' });
    expect((await rest('GET', `/subjects/${encodeURIComponent(subject)}/versions/latest`)).body).toMatchObject({ id: v2, schemaType: 'PROTOBUF', references: [{ name: 'shop/common/money.proto', subject: moneySubject, version: 1 }] });

    const big = '9007199254740993'; // 2^53 + 1
    const v1Order = protobufBody([ORDER_PROTO_V1], 'shop.Order', { order_id: 'o-1', amount: big, lines: [{ sku: 'a' }] });
    const v2Order = protobufBody([MONEY_PROTO, ORDER_PROTO_V2], 'shop.Order', { order_id: 'o-2', amount: '200', total: { currency: 'EUR', units: '-9223372036854775808' }, placed_at: { seconds: '1700000000', nanos: 7 } });
    const v2Refund = protobufBody([MONEY_PROTO, ORDER_PROTO_V2], 'shop.Refund', { order_id: 'o-2' });
    const v1Line = protobufBody([ORDER_PROTO_V1], 'shop.Order.Line', { sku: 'nested' });
    // Message indexes by hand: [0] is the single byte 0; [1] is count 1 and index 1 (zigzag: 2, 2); [0, 0] is 4, 0, 0.
    const records = [framed(v1, Buffer.from([0]), v1Order), framed(v2, Buffer.from([0]), v2Order), framed(v2, Buffer.from([2, 2]), v2Refund), framed(v1, Buffer.from([4, 0, 0]), v1Line)];
    await remote.prefetch(records);
    expect(writerOf(v1)).toHaveProperty('codec.describe', `Protobuf schema id ${v1}`);
    expect(writerOf(v2)).toHaveProperty('codec.describe', `Protobuf schema id ${v2}`);

    expect(records.map(readProtobuf)).toEqual([
      { message: 'shop.Order', value: { order_id: 'o-1', amount: big, lines: [{ sku: 'a' }] } },
      { message: 'shop.Order', value: { order_id: 'o-2', amount: '200', lines: [], total: { currency: 'EUR', units: '-9223372036854775808' }, placed_at: { seconds: '1700000000', nanos: 7 } } },
      { message: 'shop.Refund', value: { order_id: 'o-2' } },
      { message: 'shop.Order.Line', value: { sku: 'nested' } },
    ]);
    // A v2 record read with v1's writer would lose `total`: each id reads with its own writer.
    expect(readProtobuf(framed(v1, Buffer.from([0]), v2Order)).value).toEqual({ order_id: 'o-2', amount: '200', lines: [] });

    // Field 1 (order_id) says 10 bytes follow, and one does.
    const truncated = framed(v2, Buffer.from([0]), Buffer.from([0x0a, 0x0a, 0x61]));
    expect(() => readProtobuf(truncated)).toThrow(DecodeError);
    expect(() => readProtobuf(truncated)).toThrow(new RegExp(`Protobuf schema id ${v2} does not read as shop\\.Order`));
    // Message index [5]: the file declares two top-level messages.
    const unknownIndex = framed(v2, Buffer.from([2, 10]), v2Refund);
    expect(() => readProtobuf(unknownIndex)).toThrow(DecodeError);
    expect(() => readProtobuf(unknownIndex)).toThrow(new RegExp(`Protobuf schema id ${v2}: message indexes \\[5\\] name no message: the file declares 2 messages`));

    // The writer side: the subject's latest schema (v2); what protobufjs reads from the library's bytes.
    const latest = await remote.latestFor(subject);
    expect(latest.id).toBe(v2);
    if (!('codec' in latest.writer) || latest.writer.codec.schemaType !== 'PROTOBUF') throw new Error('latest is not a Protobuf writer');
    const written = frameForRegistry(latest.id, latest.writer.codec.encode({ order_id: 'w' }, 'shop.Refund'));
    expect(written.subarray(0, 7)).toEqual(framed(v2, Buffer.from([2, 2])));
    expect(written.subarray(7)).toEqual(protobufBody([MONEY_PROTO, ORDER_PROTO_V2], 'shop.Refund', { order_id: 'w' }));
    const root = new protobuf.Root();
    root.addJSON(protobuf.common.get('google/protobuf/timestamp.proto')!.nested!);
    protobuf.parse(MONEY_PROTO, root, { keepCase: true });
    protobuf.parse(ORDER_PROTO_V2, root, { keepCase: true });
    const order = frameForRegistry(latest.id, latest.writer.codec.encode({ order_id: 'w', amount: 2n ** 62n, total: { currency: 'USD', units: 5 } }));
    expect(order.subarray(5, 6)).toEqual(Buffer.from([0]));
    const decoded = root.lookupType('shop.Order').toObject(root.lookupType('shop.Order').decode(order.subarray(6)), { longs: String });
    expect(decoded).toEqual({ order_id: 'w', amount: String(2n ** 62n), total: { currency: 'USD', units: '5' } });
  });

  it('knows an id the registry does not have as unknown, and a subject without schemas as nothing to write with', async () => {
    const missing = framed(0x7ffffff0, Buffer.from('{}'));
    await remote.prefetch([missing]);
    expect(remote.writer(0x7ffffff0)).toBe('unknown');
    await expect(remote.latestFor(`${prefix}.nothing-value`)).rejects.toMatchObject({ failure: 'no-id' });
    await expect(Promise.resolve(remote.latestSoon(`${prefix}.nothing-value`))).rejects.toThrow(/has no schema to write with/);
  });
});
