import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { mkdtempSync, writeFileSync } from 'fs';
import { Kafka, Partitioners } from 'kafkajs';
import { tmpdir } from 'os';
import { join } from 'path';
import { Client } from 'pg';
import { DEAD_LETTER_HEADERS, EventContext, IdempotentHandler, KafkaExactlyOnceModule, NonRetriableHandlerError, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { startLibraryModule } from './support/library';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { kafkaBrokers, testDriver } from './support/environment';

const ORDER = {
  type: 'record',
  name: 'OrderPlaced',
  namespace: 'test.orders',
  fields: [
    { name: 'orderId', type: 'string' },
    { name: 'behaviour', type: 'string', doc: 'ok | flaky | broken | fatal | swallow' },
  ],
};
const CONFIRMED = { type: 'record', name: 'OrderConfirmed', namespace: 'test.orders', fields: [{ name: 'orderId', type: 'string' }] };

/** Handler whose behaviour each test event chooses: fail twice then succeed, always fail, or refuse at once. */
@Injectable()
class OrdersHandler {
  readonly attempts = new Map<string, number>();
  readonly calls = new Map<string, number>();
  readonly handled: string[] = [];

  @IdempotentHandler({ topic: 'orders', schema: 'test.orders.OrderPlaced', retry: { attempts: 3, initialDelayMs: 20 } })
  async onOrder(event: { orderId: string; behaviour: string }, ctx: EventContext): Promise<void> {
    this.attempts.set(event.orderId, ctx.attempt);
    this.calls.set(event.orderId, (this.calls.get(event.orderId) ?? 0) + 1);
    await ctx.manager.query('INSERT INTO orders_seen (order_id, attempt) VALUES ($1, $2)', [event.orderId, ctx.attempt]);
    if (event.behaviour === 'flaky' && ctx.attempt < 3) throw new Error(`flaky failure ${ctx.attempt}`);
    // A handler that swallows the error of its own statement: the transaction is aborted all the same.
    if (event.behaviour === 'swallow') await ctx.manager.query('SELECT 1 / 0').catch(() => undefined);
    if (event.behaviour === 'broken') throw new Error('broken for good');
    if (event.behaviour === 'fatal') throw new NonRetriableHandlerError('order cannot be placed');
    ctx.emit('orders.confirmed', { orderId: event.orderId }, { key: event.orderId });
    this.handled.push(event.orderId);
  }
}

/**
 * The library in-process (Test.createTestingModule) on the real broker and PostgreSQL: retries in place,
 * dead letters with their headers and original bytes, undecodable input, and records without a message id.
 */
describe('library: retries and dead letters', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('dlq')}.`;
  const registry = (() => {
    const dir = mkdtempSync(join(tmpdir(), 'keo-dlq-schemas-'));
    writeFileSync(join(dir, 'order-placed.v1.avsc'), JSON.stringify(ORDER));
    writeFileSync(join(dir, 'order-confirmed.v1.avsc'), JSON.stringify(CONFIRMED));
    return { dir, schemas: SchemaRegistry.fromDirectory(dir) };
  })();

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('dlq');
    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    await db.query('CREATE TABLE orders_seen (order_id text, attempt int)');
    await db.end();
    await createTopics(kafka, [`${prefix}orders`, `${prefix}orders.confirmed`], 2);

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'dlq-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'dlq-test',
          schemas: { directory: registry.dir },
          topicPrefix: prefix,
          topics: { 'orders.confirmed': { schema: 'test.orders.OrderConfirmed' } },
          consumer: { sessionTimeout: 6000 },
        }),
      ],
      providers: [OrdersHandler],
    })
    class OrdersModule {}

    moduleRef = await startLibraryModule(OrdersModule);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('retries, dead-letters with headers and original bytes, keeps going, and dedups records without a message id', async () => {
    const schema = registry.schemas.current('test.orders.OrderPlaced');
    const order = (orderId: string, behaviour: string) => encodeSingleObject(schema, { orderId, behaviour });
    const garbage = Buffer.from('{"orderId":"json-is-not-avro"}');
    const producer = kafka.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    // One key, so one partition and one order: the line must go on past every bad record.
    await producer.send({
      topic: `${prefix}orders`,
      acks: -1,
      messages: [
        { key: 'k', value: order('o-1', 'ok'), headers: { 'message-id': 'm-1' } },
        { key: 'k', value: order('o-2', 'flaky'), headers: { 'message-id': 'm-2' } },
        { key: 'k', value: order('o-3', 'broken'), headers: { 'message-id': 'm-3' } },
        { key: 'k', value: garbage, headers: { 'message-id': 'm-4' } },
        { key: 'k', value: order('o-5', 'fatal'), headers: { 'message-id': 'm-5' } },
        { key: 'k', value: order('o-6', 'ok') }, // no message-id header
        { key: 'k', value: order('o-7', 'ok'), headers: { 'message-id': 'm-1' } }, // duplicate message id
      ],
    });
    await producer.disconnect();

    const dlq = await readTopic(kafka, `${prefix}orders.dlq`, { until: (r) => r.length >= 3, timeoutMs: 60000 });
    const confirmed = await readTopic(kafka, `${prefix}orders.confirmed`, { until: (r) => r.length >= 3, timeoutMs: 60000 });
    const handler = moduleRef.get(OrdersHandler);

    // Retried in place: o-2 succeeded on its third attempt; its failed attempts left no rows behind. (A unit of
    // work runs without savepoints first; when a record fails it runs again with them, so the handler of o-1,
    // before the failure in the same unit, may have been called twice: its first call's writes were rolled back.)
    expect(handler.attempts.get('o-2')).toBe(3);
    expect([...new Set(handler.handled)]).toEqual(['o-1', 'o-2', 'o-6']);
    expect(confirmed.map((r) => r.key).sort()).toEqual(['o-1', 'o-2', 'o-6']);
    expect(confirmed.every((r) => r.headers['causation-id'] && r.headers['event-type'] === 'test.orders.OrderConfirmed')).toBe(true);

    expect(dlq.map((r) => r.headers[DEAD_LETTER_HEADERS.reason])).toEqual(['handler-failed', 'decode-failed', 'handler-failed']);
    expect(dlq.map((r) => r.headers['message-id'])).toEqual(['m-3', 'm-4', 'm-5']);
    const [broken, undecodable, fatal] = dlq;
    expect(broken.headers).toMatchObject({
      [DEAD_LETTER_HEADERS.reason]: 'handler-failed',
      [DEAD_LETTER_HEADERS.attempts]: '3',
      [DEAD_LETTER_HEADERS.errorClass]: 'Error',
      [DEAD_LETTER_HEADERS.errorMessage]: 'broken for good',
      [DEAD_LETTER_HEADERS.originalTopic]: `${prefix}orders`,
      [DEAD_LETTER_HEADERS.consumerGroup]: `${prefix}group`,
    });
    expect(broken.headers[DEAD_LETTER_HEADERS.errorStack]).toContain('broken for good');
    expect(broken.value?.equals(order('o-3', 'broken'))).toBe(true);
    expect(broken.key).toBe('k');
    expect(undecodable.headers).toMatchObject({ [DEAD_LETTER_HEADERS.reason]: 'decode-failed', [DEAD_LETTER_HEADERS.errorClass]: 'DecodeError' });
    expect(undecodable.value?.equals(garbage)).toBe(true);
    expect(fatal.headers).toMatchObject({
      [DEAD_LETTER_HEADERS.reason]: 'handler-failed',
      [DEAD_LETTER_HEADERS.attempts]: '1',
      [DEAD_LETTER_HEADERS.errorClass]: 'NonRetriableHandlerError',
    });
    expect(Number(undecodable.headers[DEAD_LETTER_HEADERS.originalOffset])).toBe(Number(broken.headers[DEAD_LETTER_HEADERS.originalOffset]) + 1);

    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      // Only the successful attempt's writes survive (savepoint per attempt).
      const seen = await db.query('SELECT order_id, attempt FROM orders_seen ORDER BY order_id');
      expect(seen.rows).toEqual([
        { order_id: 'o-1', attempt: 1 },
        { order_id: 'o-2', attempt: 3 },
        { order_id: 'o-6', attempt: 1 },
      ]);
      // A record without a message-id header is known by topic/partition/offset; the duplicate m-1 is not a row.
      const partition = dlq[0].headers[DEAD_LETTER_HEADERS.originalPartition];
      const coordinates = `${prefix}orders/${partition}/5`;
      const inbox = await db.query(`SELECT message_id, status, attempts FROM kafka_eo_inbox ORDER BY "offset"`);
      expect(inbox.rows.map((r) => [r.message_id, r.status, r.attempts])).toEqual([
        ['m-1', 'processed', 1],
        ['m-2', 'processed', 3],
        ['m-3', 'dead-lettered', 3],
        ['m-4', 'dead-lettered', 1],
        ['m-5', 'dead-lettered', 1],
        [coordinates, 'processed', 1],
      ]);
      expect(confirmed.find((r) => r.key === 'o-6')?.headers['causation-id']).toBe(coordinates);
    } finally {
      await db.end();
    }
  });

  it('runs a unit without savepoints, and when a record fails in it, rolls it all back and runs it again with them', async () => {
    const schema = registry.schemas.current('test.orders.OrderPlaced');
    const order = (orderId: string, behaviour: string) => ({ key: 'k2', value: encodeSingleObject(schema, { orderId, behaviour }), headers: { 'message-id': `m-${orderId}` } });
    const producer = kafka.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    // One request, one key: one record batch, fetched and handled as one unit of work.
    await producer.send({ topic: `${prefix}orders`, acks: -1, messages: [order('u-1', 'ok'), order('u-2', 'ok'), order('u-3', 'fatal'), order('u-4', 'swallow'), order('u-5', 'ok')] });
    await producer.disconnect();

    const dlq = await readTopic(kafka, `${prefix}orders.dlq`, { until: (r) => r.length >= 5, timeoutMs: 60000 });
    const confirmed = await readTopic(kafka, `${prefix}orders.confirmed`, { until: (r) => r.length >= 6, timeoutMs: 60000 });
    const handler = moduleRef.get(OrdersHandler);

    // u-1 and u-2 ran before u-3 failed in the unit without savepoints, and once more in the careful run.
    expect(handler.calls.get('u-1')).toBe(2);
    expect(handler.calls.get('u-2')).toBe(2);
    expect(confirmed.filter((r) => r.key?.startsWith('u-')).map((r) => r.key).sort()).toEqual(['u-1', 'u-2', 'u-5']);
    const letters = dlq.filter((r) => r.headers['message-id']?.startsWith('m-u-'));
    expect(letters.map((r) => [r.headers['message-id'], r.headers[DEAD_LETTER_HEADERS.reason]])).toEqual([
      ['m-u-3', 'handler-failed'],
      ['m-u-4', 'handler-failed'],
    ]);
    // The swallowed failure surfaced when the savepoint was released: that attempt failed, and its retries too.
    expect(letters[1].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/current transaction is aborted/);

    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      // The rolled-back first run left nothing: one row per handled record, none of the failed ones.
      const seen = await db.query(`SELECT order_id, attempt FROM orders_seen WHERE order_id LIKE 'u-%' ORDER BY order_id`);
      expect(seen.rows).toEqual([
        { order_id: 'u-1', attempt: 1 },
        { order_id: 'u-2', attempt: 1 },
        { order_id: 'u-5', attempt: 1 },
      ]);
      const inbox = await db.query(`SELECT message_id, status FROM kafka_eo_inbox WHERE message_id LIKE 'm-u-%' ORDER BY "offset"`);
      expect(inbox.rows.map((r) => [r.message_id, r.status])).toEqual([
        ['m-u-1', 'processed'],
        ['m-u-2', 'processed'],
        ['m-u-3', 'dead-lettered'],
        ['m-u-4', 'dead-lettered'],
        ['m-u-5', 'processed'],
      ]);
    } finally {
      await db.end();
    }
  });
});
