import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IsInt, IsString, Min } from 'class-validator';
import { Kafka } from 'kafkajs';
import { Client } from 'pg';
import { z } from 'zod';
import { DataSource } from 'typeorm';
import { getDataSourceToken } from '@nestjs/typeorm';
import { DEAD_LETTER_HEADERS, EventContext, EventValidationError, IdempotentHandler, KafkaExactlyOnceModule, OrderedEvent, Outbox, OutputInvalidError, RetriableValidationError } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { sendRaw, startLibraryModule } from './support/library';

/** What Nest's ValidationPipe users already have: a DTO class with class-validator decorators. */
class OrderPlaced {
  @IsString()
  orderId!: string;

  @IsInt()
  @Min(1)
  amountCents!: number;
}

/**
 * A Standard Schema (zod) for a ledger entry whose amounts may pass 2^53: with `bigIntegers: 'bigint'` those come
 * as bigint and the others as numbers, so the schema takes both and gives a bigint.
 */
const LedgerEntry = z.object({ accountId: z.string().min(1), seq: z.number().int(), amount: z.union([z.bigint(), z.number().int().transform((n) => BigInt(n))]) });

/**
 * A validator that asks a service of its own (here a flag in its place): while the service is away it cannot
 * decide and says so (RetriableValidationError); once back, it accepts or refuses.
 */
const customers = { away: false, asked: [] as Array<{ customerId: string; away: boolean }> };
const CheckedOrder = z.object({ orderId: z.string(), customerId: z.string() }).refine(async (order) => {
  customers.asked.push({ customerId: order.customerId, away: customers.away });
  if (customers.away) throw new RetriableValidationError('the customers service is away');
  return order.customerId !== 'c-unknown';
}, 'no such customer');

@Injectable()
class OrdersHandler {
  readonly seen: unknown[] = [];

  @IdempotentHandler({ topic: 'orders', format: 'json', validate: OrderPlaced, retry: { attempts: 2, initialDelayMs: 10 } })
  async onOrder(order: OrderPlaced, ctx: EventContext): Promise<void> {
    this.seen.push(order);
    await ctx.manager.query('INSERT INTO orders_seen (order_id, amount_cents, is_dto) VALUES ($1, $2, $3)', [order.orderId, order.amountCents, order instanceof OrderPlaced]);
    // A bigint and a Date written as JSON: exact digits and ISO 8601.
    ctx.emit('orders.confirmed', { orderId: order.orderId, micros: BigInt(order.amountCents) * 10n ** 16n, at: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)) }, { key: order.orderId });
  }

  @IdempotentHandler({ topic: 'checked', format: 'json', validate: CheckedOrder, retry: { attempts: 30, initialDelayMs: 100, maxDelayMs: 200 } })
  async onChecked(order: z.infer<typeof CheckedOrder>, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO orders_seen (order_id, amount_cents, is_dto) VALUES ($1, 0, false)', [order.orderId]);
  }

  /** Emits what JSON cannot hold when asked to: a bug of the handler, not of its input. */
  readonly emitErrors: unknown[] = [];
  @IdempotentHandler({ topic: 'emits', format: 'json', retry: { attempts: 3, initialDelayMs: 10 } })
  async onEmit(order: { orderId: string; bad?: boolean }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO orders_seen (order_id, amount_cents, is_dto) VALUES ($1, 0, false)', [order.orderId]);
    try {
      ctx.emit('orders.confirmed', { orderId: order.orderId, micros: order.bad ? Number.NaN : 1 }, { key: order.orderId });
    } catch (err) {
      this.emitErrors.push(err);
      throw err;
    }
  }

  @IdempotentHandler({ topic: 'ledger', format: 'json', validate: LedgerEntry, json: { bigIntegers: 'bigint' } })
  @OrderedEvent()
  async onLedger(entry: z.infer<typeof LedgerEntry>, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO ledger_seen (account_id, seq, amount) VALUES ($1, $2, $3)', [entry.accountId, entry.seq, entry.amount.toString()]);
  }
}

/**
 * The library reading and writing plain JSON on the real broker and PostgreSQL: validated with a class-validator
 * DTO and with a Standard Schema (zod), every hostile value dead-lettered with its reason and its original bytes
 * (nothing retried, nothing stalled), an invalid event under @OrderedEvent parking its key, and JSON written back
 * with exact big integers. The module has no Avro schemas at all.
 */
describe('library: JSON format', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('formats')}.`;

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('formats');
    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    await db.query('CREATE TABLE orders_seen (order_id text, amount_cents int, is_dto boolean)');
    await db.query('CREATE TABLE ledger_seen (account_id text, seq int, amount numeric)');
    await db.end();
    await createTopics(kafka, [`${prefix}orders`, `${prefix}orders.confirmed`, `${prefix}ledger`, `${prefix}checked`, `${prefix}emits`], 2);

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'formats-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'formats-test',
          topicPrefix: prefix,
          topics: { 'orders.confirmed': { format: 'json' } },
          outbox: { relay: true, checkpointTopic: `${prefix}checkpoints`, pollIntervalMs: 200 },
          consumer: { sessionTimeout: 6000 },
        }),
      ],
      providers: [OrdersHandler],
    })
    class FormatsModule {}

    moduleRef = await startLibraryModule(FormatsModule);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('handles valid JSON once, as the DTO, and dead-letters each hostile value with its reason and original bytes', async () => {
    const json = (value: unknown) => Buffer.from(JSON.stringify(value));
    const hostile: Array<[string, Buffer | null, string, RegExp]> = [
      ['h-not-json', Buffer.from('{"orderId": "x", '), 'decode-failed', /not JSON/],
      ['h-array', json([{ orderId: 'x', amountCents: 1 }]), 'decode-failed', /array/],
      ['h-string', Buffer.from('"o-1"'), 'decode-failed', /string/],
      ['h-bom', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json({ orderId: 'b', amountCents: 1 })]), 'decode-failed', /byte order mark/],
      ['h-utf8', Buffer.concat([Buffer.from('{"orderId":"'), Buffer.from([0xc3]), Buffer.from('","amountCents":1}')]), 'decode-failed', /UTF-8/],
      ['h-zero', Buffer.concat([Buffer.from([0, 0, 0, 0, 7]), json({ orderId: 'z', amountCents: 1 })]), 'decode-failed', /Schema Registry/],
      ['h-proto', Buffer.from('{"orderId":"p","amountCents":1,"__proto__":{"isAdmin":true}}'), 'decode-failed', /__proto__/],
      ['h-duplicate', Buffer.from('{"orderId":"d","amountCents":1,"amountCents":100000}'), 'decode-failed', /duplicate/],
      ['h-deep', Buffer.from(`{"orderId":"deep","amountCents":1,"n":${'['.repeat(100_000)}${']'.repeat(100_000)}}`), 'decode-failed', /deep|depth|nest/i],
      ['h-big', Buffer.from('{"orderId":"big","amountCents":9223372036854775807}'), 'decode-failed', /9223372036854775807/],
      ['h-tombstone', null, 'decode-failed', /no value/],
      ['h-type', json({ orderId: 'wrong-type', amountCents: '100' }), 'validation-failed', /amountCents/],
      ['h-missing', json({ orderId: 'missing' }), 'validation-failed', /amountCents/],
      ['h-zero-amount', json({ orderId: 'zero', amountCents: 0 }), 'validation-failed', /amountCents/],
      // class-transformer cannot build a nested object with a key `constructor`: the validator throws, and the record
      // is refused as an invalid event, never handled half-built.
      ['h-constructor', json({ orderId: 'c', amountCents: 1, extra: { constructor: 'x' } }), 'validation-failed', /the validator threw/],
    ];
    // One key: one partition, one order; the valid records after the hostile ones must all be handled.
    await sendRaw(kafka, `${prefix}orders`, [
      { key: 'k', value: json({ orderId: 'o-1', amountCents: 100 }), headers: { 'message-id': 'm-1' } },
      ...hostile.map(([id, value]) => ({ key: 'k', value, headers: { 'message-id': id } })),
      { key: 'k', value: json({ orderId: 'o-2', amountCents: 250, constructor: 'kept', prototype: 1 }), headers: { 'message-id': 'm-2' } },
      { key: 'k', value: json({ orderId: 'o-1-again', amountCents: 999 }), headers: { 'message-id': 'm-1' } }, // a duplicate id
      { key: 'k', value: json({ orderId: 'o-3', amountCents: 300 }) }, // no message id: known by its coordinates
    ]);

    const dlq = await readTopic(kafka, `${prefix}orders.dlq`, { until: (r) => r.length >= hostile.length, timeoutMs: 90000 });
    const confirmed = await readTopic(kafka, `${prefix}orders.confirmed`, { until: (r) => r.length >= 3, timeoutMs: 60000 });

    expect(dlq.map((r) => r.headers['message-id'])).toEqual(hostile.map(([id]) => id));
    for (const [id, value, reason, message] of hostile) {
      const letter = dlq.find((r) => r.headers['message-id'] === id)!;
      expect([id, letter.headers[DEAD_LETTER_HEADERS.reason]]).toEqual([id, reason]);
      expect([id, letter.headers[DEAD_LETTER_HEADERS.attempts]]).toEqual([id, '1']);
      expect(letter.headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(message);
      // The original bytes, whatever they were (a tombstone stays one).
      if (value === null) expect(letter.value).toBeNull();
      else expect(letter.value?.equals(value)).toBe(true);
    }
    // Nothing a record carried reached a prototype.
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();

    const handler = moduleRef.get(OrdersHandler);
    // Keyed by order: on different partitions, so compared as a set.
    expect(confirmed.map((r) => r.key).sort()).toEqual(['o-1', 'o-2', 'o-3']);
    // Plain JSON any reader takes: the bigint as its exact digits, the Date as ISO 8601.
    expect(confirmed.find((r) => r.key === 'o-1')!.value!.toString('utf8')).toBe('{"orderId":"o-1","micros":1000000000000000000,"at":"2026-01-02T03:04:05.000Z"}');
    expect(confirmed.every((r) => r.headers['event-type'] === 'json' && r.headers['causation-id'])).toBe(true);
    expect(handler.seen.every((o) => o instanceof OrderPlaced)).toBe(true);

    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const seen = await db.query('SELECT order_id, amount_cents, is_dto FROM orders_seen ORDER BY order_id');
      expect(seen.rows).toEqual([
        { order_id: 'o-1', amount_cents: 100, is_dto: true },
        { order_id: 'o-2', amount_cents: 250, is_dto: true },
        { order_id: 'o-3', amount_cents: 300, is_dto: true },
      ]);
    } finally {
      await db.end();
    }
  });

  it('writes JSON through the outbox as ctx.emit does, and refuses an event JSON cannot hold', async () => {
    const outbox = moduleRef.get(Outbox);
    const dataSource = moduleRef.get<DataSource>(getDataSourceToken());
    await dataSource.transaction(async (manager) => {
      await outbox.add(manager, 'orders.confirmed', { orderId: 'ob-1', micros: 2n ** 64n, at: new Date(Date.UTC(2026, 11, 5)) }, { key: 'ob-1', messageId: 'ob-1' });
    });
    await dataSource.transaction(async (manager) => {
      await expect(outbox.add(manager, 'orders.confirmed', { orderId: 'ob-2', amount: Number.NaN }, { key: 'ob-2' })).rejects.toThrow(EventValidationError);
      await expect(outbox.add(manager, 'orders.confirmed', ['not', 'an', 'object'], { key: 'ob-2' })).rejects.toThrow(/an array/);
    });
    const relayed = await readTopic(kafka, `${prefix}orders.confirmed`, { until: (r) => r.some((x) => x.headers['message-id'] === 'ob-1'), timeoutMs: 60000 });
    const record = relayed.find((r) => r.headers['message-id'] === 'ob-1')!;
    expect(record.value!.toString('utf8')).toBe('{"orderId":"ob-1","micros":18446744073709551616,"at":"2026-12-05T00:00:00.000Z"}');
    expect(record.headers['event-type']).toBe('json');
  });

  it('reads integers past 2^53 exactly where the handler asks for bigint, and parks a key whose event fails validation', async () => {
    const big = 2n ** 63n - 1n;
    const entry = (accountId: string, seq: number, amount: string) => Buffer.from(`{"accountId":"${accountId}","seq":${seq},"amount":${amount}}`);
    await sendRaw(kafka, `${prefix}ledger`, [
      { key: 'acc-1', value: entry('acc-1', 1, big.toString()), headers: { 'message-id': 'l-1' } },
      { key: 'acc-1', value: entry('acc-1', 2, '9007199254740993'), headers: { 'message-id': 'l-2' } },
      // amount 1.5 is not an integer: zod refuses it, the key parks, and acc-1's later entry waits behind it.
      { key: 'acc-1', value: entry('acc-1', 3, '1.5'), headers: { 'message-id': 'l-3' } },
      { key: 'acc-1', value: entry('acc-1', 4, '7'), headers: { 'message-id': 'l-4' } },
      { key: 'acc-2', value: entry('acc-2', 1, '-9223372036854775808'), headers: { 'message-id': 'l-5' } },
    ]);
    const dlq = await readTopic(kafka, `${prefix}ledger.dlq`, { until: (r) => r.length >= 2, timeoutMs: 60000 });
    expect(dlq.map((r) => [r.headers['message-id'], r.headers[DEAD_LETTER_HEADERS.reason], r.headers[DEAD_LETTER_HEADERS.parkedKey]])).toEqual([
      ['l-3', 'validation-failed', 'acc-1'],
      ['l-4', 'key-parked', 'acc-1'],
    ]);
    expect(dlq[0].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/amount/);

    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      for (let i = 0; i < 100; i++) {
        const { rows } = await db.query('SELECT count(*)::int AS n FROM ledger_seen');
        if (rows[0].n >= 3) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const seen = await db.query('SELECT account_id, seq, amount::text AS amount FROM ledger_seen ORDER BY account_id, seq');
      expect(seen.rows).toEqual([
        { account_id: 'acc-1', seq: 1, amount: big.toString() },
        { account_id: 'acc-1', seq: 2, amount: '9007199254740993' },
        { account_id: 'acc-2', seq: 1, amount: '-9223372036854775808' },
      ]);
    } finally {
      await db.end();
    }
  });

  it('a validator that could not decide is asked again, and the record applied once it can; one that refuses dead-letters validation-failed', async () => {
    customers.away = true;
    await sendRaw(kafka, `${prefix}checked`, [
      { key: 'c', value: Buffer.from(JSON.stringify({ orderId: 'ck-1', customerId: 'c-1' })), headers: { 'message-id': 'ck-1' } },
      { key: 'c', value: Buffer.from(JSON.stringify({ orderId: 'ck-2', customerId: 'c-unknown' })), headers: { 'message-id': 'ck-2' } },
    ]);
    // The service is away for the first two questions; then it answers.
    const deadline = Date.now() + 60000;
    while (customers.asked.filter((a) => a.away).length < 2) {
      if (Date.now() > deadline) throw new Error('the validator was not asked twice');
      await new Promise((r) => setTimeout(r, 20));
    }
    customers.away = false;
    const dlq = await readTopic(kafka, `${prefix}checked.dlq`, { until: (r) => r.length >= 1, timeoutMs: 60000 });
    expect(dlq.map((r) => [r.headers['message-id'], r.headers[DEAD_LETTER_HEADERS.reason], r.headers[DEAD_LETTER_HEADERS.attempts]])).toEqual([['ck-2', 'validation-failed', '1']]);
    expect(dlq[0].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/no such customer/);
    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const applied = async () => (await db.query(`SELECT order_id FROM orders_seen WHERE order_id LIKE 'ck-%' ORDER BY order_id`)).rows.map((r) => r.order_id);
      for (let i = 0; i < 100 && (await applied()).length < 1; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await applied()).toEqual(['ck-1']);
    } finally {
      await db.end();
    }
    // ck-1 was asked while away, then once more when back; it never reached the dead-letter topic.
    expect(customers.asked.filter((a) => a.customerId === 'c-1' && a.away).length).toBeGreaterThanOrEqual(1);
    expect(customers.asked.filter((a) => a.customerId === 'c-1' && !a.away).length).toBeGreaterThanOrEqual(1);
  });

  it('an emitted event the library cannot write dead-letters its input as output-invalid, not validation-failed, without a retry', async () => {
    await sendRaw(kafka, `${prefix}emits`, [
      { key: 'e', value: Buffer.from(JSON.stringify({ orderId: 'em-1', bad: true })), headers: { 'message-id': 'em-1' } },
      { key: 'e', value: Buffer.from(JSON.stringify({ orderId: 'em-2' })), headers: { 'message-id': 'em-2' } },
    ]);
    const [letter, ...more] = await readTopic(kafka, `${prefix}emits.dlq`, { until: (r) => r.length >= 1, timeoutMs: 60000 });
    expect(more).toEqual([]);
    expect(letter.headers).toMatchObject({ 'message-id': 'em-1', [DEAD_LETTER_HEADERS.reason]: 'output-invalid', [DEAD_LETTER_HEADERS.errorClass]: 'OutputInvalidError', [DEAD_LETTER_HEADERS.attempts]: '1' });
    expect(letter.headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/^ctx\.emit\('orders\.confirmed'\): .*NaN/);
    // The handler got an error it can catch as either class.
    const handler = moduleRef.get(OrdersHandler);
    expect(handler.emitErrors.length).toBeGreaterThanOrEqual(1);
    expect(handler.emitErrors.every((e) => e instanceof OutputInvalidError && e instanceof EventValidationError)).toBe(true);
    const confirmed = await readTopic(kafka, `${prefix}orders.confirmed`, { until: (r) => r.some((x) => x.key === 'em-2'), timeoutMs: 60000 });
    expect(confirmed.filter((r) => r.key === 'em-1')).toEqual([]);
  });
});
