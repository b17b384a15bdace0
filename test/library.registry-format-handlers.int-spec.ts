import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SchemaRegistry as ConfluentClient, SchemaType } from '@kafkajs/confluent-schema-registry';
import { Kafka } from 'kafkajs';
import * as protobuf from 'protobufjs';
import { DEAD_LETTER_HEADERS, EventContext, EventPublisher, EventValidationError, IdempotentHandler, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';
import { newSpoolDirectory } from './support/producer-app';
import { startTestRegistry } from './support/registry';

const PAYMENT_JSON_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Payment',
  type: 'object',
  properties: { paymentId: { type: 'string' }, accountId: { type: 'string' }, amountCents: { type: 'integer' } },
  required: ['paymentId', 'accountId', 'amountCents'],
};
const RECEIPT_JSON_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'Receipt',
  type: 'object',
  properties: { paymentId: { type: 'string' }, amountCents: { type: 'integer' } },
  required: ['paymentId', 'amountCents'],
  additionalProperties: false,
};
const PAYMENT_PROTO = `syntax = "proto3";
package shop;
message Payment { string payment_id = 1; string account_id = 2; int64 amount_cents = 3; }
`;
const RECEIPT_PROTO = `syntax = "proto3";
package shop;
message Receipt { string payment_id = 1; int64 amount_cents = 2; Kind kind = 3; }
enum Kind { UNKNOWN = 0; CARD = 1; }
`;
/** Two messages of one topic, with the same fields: only the message's name tells them apart. */
const ORDER_EVENTS_PROTO = `syntax = "proto3";
package shop;
message OrderPlaced { string order_id = 1; int64 amount_cents = 2; }
message OrderCancelled { string order_id = 1; int64 amount_cents = 2; }
`;

@Injectable()
class PaymentsHandler {
  /** What each call of onOrderEvent got: the event, and the writer schema beside it. */
  readonly orderEvents: Array<{ event: unknown; schema: unknown }> = [];

  @IdempotentHandler({ topic: 'orders.proto', format: 'protobuf' })
  async onOrderEvent(event: { order_id: string; amount_cents: string }, ctx: EventContext): Promise<void> {
    this.orderEvents.push({ event, schema: ctx.message.schema });
    await ctx.manager.query('INSERT INTO applied (payment_id, amount, source) VALUES ($1, $2, $3)', [event.order_id, event.amount_cents, ctx.message.schema?.name ?? 'unnamed']);
  }

  @IdempotentHandler({ topic: 'payments.json', format: 'json' })
  async onJson(payment: { paymentId: string; accountId: string; amountCents: number }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (payment_id, amount, source) VALUES ($1, $2, $3)', [payment.paymentId, payment.amountCents, 'json-schema']);
    ctx.emit('receipts.json', { paymentId: payment.paymentId, amountCents: payment.amountCents }, { key: payment.accountId });
  }

  @IdempotentHandler({ topic: 'payments.proto', format: 'protobuf' })
  async onProto(payment: { payment_id: string; account_id: string; amount_cents: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (payment_id, amount, source) VALUES ($1, $2, $3)', [payment.payment_id, payment.amount_cents, 'protobuf']);
    ctx.emit('receipts.proto', { payment_id: payment.payment_id, amount_cents: BigInt(payment.amount_cents), kind: 'CARD' }, { key: payment.account_id });
  }
}

@Injectable()
class PlainOrdersHandler {
  @IdempotentHandler({ topic: 'orders.plain', format: 'json' })
  async onOrder(order: { orderId: string; amountCents: number }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (payment_id, amount, source) VALUES ($1, $2, $3)', [order.orderId, order.amountCents, 'plain-json']);
  }
}

/**
 * Handlers that read JSON Schema and Protobuf in Confluent's framing, written by another service (JSON Schema by
 * the registry's own Node client, Protobuf by protobufjs with its message indexes written out), and that write
 * their outputs in the same formats with the subjects' latest schemas, read back independently of the library.
 */
describe('library: handlers of JSON Schema and Protobuf topics', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  let registry: ReturnType<typeof startTestRegistry>;
  let client: ConfluentClient;
  let ids: { paymentJson: number; receiptJson: number; paymentProto: number; receiptProto: number };
  let orderEventsId: number;
  const prefix = `${uniqueTopic('registry-handlers')}.`;

  beforeAll(async () => {
    registry = startTestRegistry();
    client = new ConfluentClient({ host: registry.url });
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('registry_handlers');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (payment_id text, amount numeric, source text)');
    await createTopics(kafka, ['payments.json', 'payments.proto', 'receipts.json', 'receipts.proto', 'orders.proto', 'orders.plain'].map((t) => `${prefix}${t}`), 2);
    const subject = (topic: string) => ({ subject: `${prefix}${topic}-value` });
    orderEventsId = (await client.register({ type: SchemaType.PROTOBUF, schema: ORDER_EVENTS_PROTO }, subject('orders.proto'))).id;
    ids = {
      paymentJson: (await client.register({ type: SchemaType.JSON, schema: JSON.stringify(PAYMENT_JSON_SCHEMA) }, subject('payments.json'))).id,
      receiptJson: (await client.register({ type: SchemaType.JSON, schema: JSON.stringify(RECEIPT_JSON_SCHEMA) }, subject('receipts.json'))).id,
      paymentProto: (await client.register({ type: SchemaType.PROTOBUF, schema: PAYMENT_PROTO }, subject('payments.proto'))).id,
      receiptProto: (await client.register({ type: SchemaType.PROTOBUF, schema: RECEIPT_PROTO }, subject('receipts.proto'))).id,
    };

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'registry-handlers-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'registry-handlers-test',
          topicPrefix: prefix,
          schemaRegistry: { url: registry.url },
          topics: {
            'receipts.json': { format: 'json', wireFormat: 'schema-registry' },
            'receipts.proto': { format: 'protobuf', schema: 'shop.Receipt' },
            // Plain JSON only, in a module with a registry: a value starting with 00 is not read as its framing.
            'orders.plain': { format: 'json', registryFraming: false },
          },
          publisher: { spool: { directory: newSpoolDirectory() }, sendTimeoutMs: 3000 },
          consumer: { sessionTimeout: 6000 },
        }),
      ],
      providers: [PaymentsHandler, PlainOrdersHandler],
    })
    class RegistryHandlersModule {}

    moduleRef = await startLibraryModule(RegistryHandlersModule);
  });

  afterAll(async () => {
    await moduleRef?.close();
    registry?.stop();
  });

  const framed = (id: number, ...parts: Buffer[]) => {
    const header = Buffer.alloc(5);
    header.writeUInt32BE(id, 1);
    return Buffer.concat([header, ...parts]);
  };

  it('reads JSON Schema records, dead-letters one its writer schema refuses, and writes receipts in JSON Schema framing', async () => {
    const good = await client.encode(ids.paymentJson, { paymentId: 'j-1', accountId: 'acc-1', amountCents: 120 });
    const good2 = await client.encode(ids.paymentJson, { paymentId: 'j-2', accountId: 'acc-1', amountCents: 250 });
    // Framed by hand: the registry's client would refuse to write it (amountCents is not an integer).
    const invalid = framed(ids.paymentJson, Buffer.from('{"paymentId":"j-bad","accountId":"acc-1","amountCents":"12"}'));
    await sendRaw(kafka, `${prefix}payments.json`, [
      { key: 'acc-1', value: good, headers: { 'message-id': 'j-1' } },
      { key: 'acc-1', value: invalid, headers: { 'message-id': 'j-bad' } },
      { key: 'acc-1', value: good2, headers: { 'message-id': 'j-2' } },
      { key: 'acc-1', value: good, headers: { 'message-id': 'j-1' } }, // sent twice
    ]);
    const receipts = await readTopic(kafka, `${prefix}receipts.json`, { until: (r) => r.length >= 2, timeoutMs: 60000 });
    const dlq = await readTopic(kafka, `${prefix}payments.json.dlq`, { until: (r) => r.length >= 1, timeoutMs: 60000 });
    expect(dlq.map((r) => [r.headers['message-id'], r.headers[DEAD_LETTER_HEADERS.reason]])).toEqual([['j-bad', 'validation-failed']]);
    expect(dlq[0].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/amountCents/);
    expect(dlq[0].value?.equals(invalid)).toBe(true);
    // The receipts: in the registry's framing under the receipts subject's id, read by the registry's own client.
    expect(receipts.map((r) => r.value!.readUInt32BE(1))).toEqual([ids.receiptJson, ids.receiptJson]);
    expect(await Promise.all(receipts.map((r) => client.decode(r.value!)))).toEqual([
      { paymentId: 'j-1', amountCents: 120 },
      { paymentId: 'j-2', amountCents: 250 },
    ]);
    const rows = await queryDatabase(databaseUrl, `SELECT payment_id FROM applied WHERE source = 'json-schema' ORDER BY payment_id`);
    expect(rows.map((r) => r.payment_id)).toEqual(['j-1', 'j-2']);

    // Writing an event the receipts' schema refuses: an EventValidationError, nothing written.
    const publisher = moduleRef.get(EventPublisher);
    await expect(publisher.publish('receipts.json', { paymentId: 'p', amountCents: 1, extra: true }, { key: 'k' })).rejects.toThrow(EventValidationError);
    await expect(publisher.publish('receipts.json', { paymentId: 'p', amountCents: 1, extra: true }, { key: 'k' })).rejects.toThrow(/additional/);
  });

  it('reads Protobuf records by their message indexes, int64 exact, dead-letters a body that does not decode, and writes receipts in Protobuf framing', async () => {
    const root = protobuf.parse(PAYMENT_PROTO, { keepCase: true }).root;
    const Payment = root.lookupType('shop.Payment');
    const body = (payment: object) => Buffer.from(Payment.encode(Payment.fromObject(payment)).finish());
    // Confluent's Protobuf framing: the id, then the message indexes ([0], the file's first message, as one 00 byte).
    const record = (payment: object) => framed(ids.paymentProto, Buffer.from([0]), body(payment));
    const broken = framed(ids.paymentProto, Buffer.from([0]), body({ payment_id: 'x', account_id: 'acc-2', amount_cents: '5' }).subarray(0, 4));
    await sendRaw(kafka, `${prefix}payments.proto`, [
      { key: 'acc-2', value: record({ payment_id: 'p-1', account_id: 'acc-2', amount_cents: '9223372036854775807' }), headers: { 'message-id': 'p-1' } },
      { key: 'acc-2', value: broken, headers: { 'message-id': 'p-broken' } },
      { key: 'acc-2', value: framed(ids.paymentProto, Buffer.from([2, 6]), body({ payment_id: 'y' })), headers: { 'message-id': 'p-index' } },
      { key: 'acc-2', value: record({ payment_id: 'p-2', account_id: 'acc-2', amount_cents: '42' }), headers: { 'message-id': 'p-2' } },
    ]);
    const receipts = await readTopic(kafka, `${prefix}receipts.proto`, { until: (r) => r.length >= 2, timeoutMs: 60000 });
    const dlq = await readTopic(kafka, `${prefix}payments.proto.dlq`, { until: (r) => r.length >= 2, timeoutMs: 60000 });
    expect(dlq.map((r) => [r.headers['message-id'], r.headers[DEAD_LETTER_HEADERS.reason]])).toEqual([
      ['p-broken', 'decode-failed'],
      ['p-index', 'decode-failed'],
    ]);
    expect(dlq[1].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/name no message/);

    const Receipt = protobuf.parse(RECEIPT_PROTO, { keepCase: true }).root.lookupType('shop.Receipt');
    expect(receipts.map((r) => [r.value!.readUInt32BE(1), r.value![5]])).toEqual([
      [ids.receiptProto, 0],
      [ids.receiptProto, 0],
    ]);
    expect(receipts.map((r) => Receipt.toObject(Receipt.decode(r.value!.subarray(6)), { longs: String, enums: String }))).toEqual([
      { payment_id: 'p-1', amount_cents: '9223372036854775807', kind: 'CARD' },
      { payment_id: 'p-2', amount_cents: '42', kind: 'CARD' },
    ]);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT count(*)::int AS n FROM applied WHERE source = 'protobuf'`))[0].n >= 2, 30000, 'the Protobuf payments applied');
    const rows = await queryDatabase(databaseUrl, `SELECT payment_id, amount::text AS amount FROM applied WHERE source = 'protobuf' ORDER BY payment_id`);
    expect(rows).toEqual([
      { payment_id: 'p-1', amount: '9223372036854775807' },
      { payment_id: 'p-2', amount: '42' },
    ]);

    // A Protobuf event with a field its message does not have, or a wrong type: refused, nothing written.
    const publisher = moduleRef.get(EventPublisher);
    await expect(publisher.publish('receipts.proto', { payment_id: 'p', amount_cents: 'abc' }, { key: 'k' })).rejects.toThrow(/amount_cents: expected an integer/);
    await expect(publisher.publish('receipts.proto', { payment_id: 'p', tip: 1 }, { key: 'k' })).rejects.toThrow(/tip: no such field/);
  });

  it('tells a handler which of two Protobuf messages of one topic a record carries (ctx.message.schema), the event itself unchanged', async () => {
    const root = protobuf.parse(ORDER_EVENTS_PROTO, { keepCase: true }).root;
    const body = (name: string, value: object) => {
      const type = root.lookupType(name);
      return Buffer.from(type.encode(type.fromObject(value)).finish());
    };
    // Message indexes [0] (the file's first message, one 00 byte) and [1] (count 1, index 1, zigzag: 02 02).
    await sendRaw(kafka, `${prefix}orders.proto`, [
      { key: 'o-1', value: framed(orderEventsId, Buffer.from([0]), body('shop.OrderPlaced', { order_id: 'o-1', amount_cents: '700' })), headers: { 'message-id': 'o-1-placed' } },
      { key: 'o-1', value: framed(orderEventsId, Buffer.from([2, 2]), body('shop.OrderCancelled', { order_id: 'o-1', amount_cents: '700' })), headers: { 'message-id': 'o-1-cancelled' } },
    ]);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT count(*)::int AS n FROM applied WHERE payment_id = 'o-1'`))[0].n >= 2, 30000, 'both order events applied');
    const rows = await queryDatabase(databaseUrl, `SELECT source FROM applied WHERE payment_id = 'o-1' ORDER BY source DESC`);
    expect(rows.map((r) => r.source)).toEqual(['shop.OrderPlaced', 'shop.OrderCancelled']);
    const handler = moduleRef.get(PaymentsHandler);
    // The same fields and values: the decoded objects are equal, and carry nothing of their message.
    expect(handler.orderEvents.map((e) => e.event)).toEqual([
      { order_id: 'o-1', amount_cents: '700' },
      { order_id: 'o-1', amount_cents: '700' },
    ]);
    expect(handler.orderEvents.map((e) => e.schema)).toEqual([
      { id: orderEventsId, type: 'protobuf', name: 'shop.OrderPlaced' },
      { id: orderEventsId, type: 'protobuf', name: 'shop.OrderCancelled' },
    ]);
  });

  it("reads a topic declared plain JSON only as JSON: a value starting with 00 gets the JSON reader's refusal, even one framed with a real JSON Schema id", async () => {
    const framedOrder = framed(ids.paymentJson, Buffer.from('{"orderId":"o-framed","amountCents":1}'));
    await sendRaw(kafka, `${prefix}orders.plain`, [
      { key: 'o', value: framedOrder, headers: { 'message-id': 'o-framed' } },
      { key: 'o', value: Buffer.from('{"orderId":"o-1","amountCents":5}'), headers: { 'message-id': 'o-1' } },
    ]);
    const dlq = await readTopic(kafka, `${prefix}orders.plain.dlq`, { until: (r) => r.length >= 1, timeoutMs: 60000 });
    expect(dlq.map((r) => [r.headers['message-id'], r.headers[DEAD_LETTER_HEADERS.reason]])).toEqual([['o-framed', 'decode-failed']]);
    expect(dlq[0].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/value starts with byte 00, as Schema Registry framing does .*JSON has no such framing/);
    expect(dlq[0].value?.equals(framedOrder)).toBe(true);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT count(*)::int AS n FROM applied WHERE source = 'plain-json'`))[0].n >= 1, 30000, 'the plain JSON order applied');
    expect(await queryDatabase(databaseUrl, `SELECT payment_id FROM applied WHERE source = 'plain-json'`)).toEqual([{ payment_id: 'o-1' }]);
  });
});
