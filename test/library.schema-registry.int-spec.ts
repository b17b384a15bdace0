import { Injectable, Module, Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SchemaRegistry as ConfluentClient, SchemaType } from '@kafkajs/confluent-schema-registry';
import { getDataSourceToken } from '@nestjs/typeorm';
import { Kafka, Message } from 'kafkajs';
import { DataSource } from 'typeorm';
import { DEAD_LETTER_HEADERS, EventContext, EventPublisher, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, Outbox, SchemaRegistry, SchemaRegistryError } from 'kafka-exactly-once';
import { runKafkaEo } from 'kafka-exactly-once/cli/kafka-eo.command';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { frameForRegistry } from 'kafka-exactly-once/registry/registry-framing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { CapturingLogger, queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';
import { newSpoolDirectory } from './support/producer-app';
import { registryFreeze, startRegistryProxy, startTestRegistry } from './support/registry';

const ORDER_V1 = { type: 'record', name: 'Order', namespace: 'test.registry', fields: [{ name: 'orderId', type: 'string' }, { name: 'amount', type: 'long' }] };
const ORDER_V2 = { ...ORDER_V1, fields: [...ORDER_V1.fields, { name: 'note', type: 'string', default: '' }] };
const SEEN = { type: 'record', name: 'OrderSeen', namespace: 'test.registry', fields: [{ name: 'orderId', type: 'string' }, { name: 'amount', type: 'long' }, { name: 'note', type: 'string' }] };
const ORDER_INCOMPATIBLE = { ...ORDER_V1, fields: [{ name: 'orderId', type: 'string' }, { name: 'amount', type: 'string' }] };

/** What the handler saw, call by call (calls are what a second handling would show). */
const seen: Array<{ orderId: string; amount: bigint; note: string }> = [];

@Injectable()
class OrdersHandler {
  @IdempotentHandler({ topic: 'orders', schema: 'test.registry.Order' })
  async onOrder(event: { orderId: string; amount: bigint; note: string }, ctx: EventContext): Promise<void> {
    seen.push(event);
    await ctx.manager.query('INSERT INTO orders_seen (order_id, amount) VALUES ($1, $2)', [event.orderId, String(event.amount)]);
    ctx.emit('orders.seen', event, { key: event.orderId });
  }
}

@Injectable()
class IncompatibleHandler {
  @IdempotentHandler({ topic: 'orders-incompatible', schema: 'test.registry.Order' })
  async onOrder(): Promise<void> {}
}

// One registry for the suite's describes (each registers subjects of its own prefix): started once, stopped after
// the last, as scripts/registry/registry.sh keeps its storage across a restart anyway.
let registry: ReturnType<typeof startTestRegistry>;

beforeAll(() => {
  registry = startTestRegistry();
});

afterAll(() => {
  registryFreeze('SIGCONT'); // never leave it frozen
  registry?.stop();
});

/**
 * The library on topics in Confluent's Schema Registry framing, against a real registry (Apicurio's
 * Confluent-compatible API, started by scripts/registry/registry.sh): records another service writes with the
 * maintained registry client are handled exactly once, their outputs are read back by that client, and the
 * registry away loses nothing and dead-letters nothing.
 */
describe('library: Schema Registry framing', () => {
  let kafka: Kafka;
  let independent: ConfluentClient;
  let databaseUrl: string;
  const modules: TestingModule[] = [];
  const prefix = `${uniqueTopic('registry')}.`;
  const input = `${prefix}orders`;
  const output = `${prefix}orders.seen`;
  const dir = schemasDirectory('registry', { 'order.v1.avsc': ORDER_V1, 'order.v2.avsc': ORDER_V2, 'order-seen.avsc': SEEN });
  const local = SchemaRegistry.fromDirectory(dir);

  beforeAll(async () => {
    kafka = testKafka();
    // Another service's client, used the way that service would: its own encode and decode.
    independent = new ConfluentClient({ host: registry.url });
    databaseUrl = await createSuiteDatabase('registry');
    await queryDatabase(databaseUrl, 'CREATE TABLE orders_seen (order_id text, amount bigint)');
    await createTopics(kafka, [input, output, `${input}.dlq`, `${prefix}orders-incompatible`, `${prefix}unregistered`], 1);
  });

  afterAll(async () => {
    for (const moduleRef of modules) await moduleRef.close().catch(() => undefined);
    registryFreeze('SIGCONT');
  });

  function app(name: string, handlers: Array<Type<unknown>>, extra: object = {}): Type<unknown> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: name, brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}${name}`,
          transactionalIdPrefix: `${prefix}${name}`,
          schemas: { directory: dir },
          topicPrefix: prefix,
          wireFormat: 'schema-registry',
          // An id the registry does not know waits this long (not the default 30 s) before its record is dead-lettered.
          schemaRegistry: { url: registry.url, requestTimeoutMs: 2000, unknownIdWaitMs: 3000 },
          topics: {
            orders: { schema: 'test.registry.Order' },
            'orders-incompatible': { schema: 'test.registry.Order' },
            'orders.seen': { schema: 'test.registry.OrderSeen', key: (e: { orderId: string }) => e.orderId },
            unregistered: { schema: 'test.registry.OrderSeen', key: (e: { orderId: string }) => e.orderId },
          },
          consumer: { sessionTimeout: 6000, maxRetryDelayMs: 1000 },
          ...extra,
        }),
      ],
      providers: handlers,
    })
    class RegistryApp {}
    return RegistryApp;
  }

  const order = (n: number) => ({ orderId: `order-${n}`, amount: BigInt(n) * 100n });
  const written = async (id: number, n: number, messageId: string): Promise<Message> => ({ key: `order-${n}`, value: await independent.encode(id, { orderId: `order-${n}`, amount: n * 100 }), headers: { 'message-id': messageId } });
  const rows = async () => (await queryDatabase<{ order_id: string; n: number }>(databaseUrl, 'SELECT order_id, count(*)::int AS n FROM orders_seen GROUP BY order_id ORDER BY order_id')).map((r) => [r.order_id, r.n]);

  it('fails the boot when a handler\'s reader schema cannot read its subject\'s latest writer schema, naming both', async () => {
    await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_INCOMPATIBLE) }, { subject: `${prefix}orders-incompatible-value` });
    const moduleRef = await Test.createTestingModule({ imports: [app('incompatible', [IncompatibleHandler], { topics: { 'orders-incompatible': { schema: 'test.registry.Order' } } })] }).compile();
    const failure = await moduleRef.init().then(() => undefined, (err: unknown) => err);
    await moduleRef.close().catch(() => undefined);
    expect(failure).toBeInstanceOf(SchemaRegistryError);
    expect(failure).toMatchObject({ failure: 'incompatible', subject: `${prefix}orders-incompatible-value` });
    expect((failure as Error).message).toMatch(/IncompatibleHandler\.onOrder reads .*orders-incompatible with test\.registry\.Order \(order\.v2\.avsc\), which cannot read the latest writer schema of subject .*orders-incompatible-value/);
  });

  it('handles records another service writes in the registry\'s framing exactly once, beside single-object ones, and writes outputs that service reads', async () => {
    const { id: v1 } = await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V1) }, { subject: `${prefix}orders-value` });
    // The output's schema registered at deploy time, as the docs say (autoRegister is off).
    const out: string[] = [];
    const code = await runKafkaEo(['schemas', 'register', '--topic', output, '--schema', 'test.registry.OrderSeen', '--schemas-dir', dir, '--registry', registry.url, '--json'], process.env, { out: (t) => out.push(t), err: (t) => out.push(t) });
    expect(code).toBe(0);
    expect(JSON.parse(out.join('\n'))).toMatchObject({ subject: `${output}-value`, schema: 'test.registry.OrderSeen' });

    const records = [
      ...(await Promise.all([1, 2, 3, 4, 5].map((n) => written(v1, n, `m-${n}`)))),
      await written(v1, 3, 'm-3'), // a duplicate publish
      // The same topic in the other framing (a topic migrating from one to the other).
      { key: 'order-6', value: encodeSingleObject(local.current('test.registry.Order'), { ...order(6), note: 'single-object' }), headers: { 'message-id': 'm-6' } },
      // An id the registry does not have: dead-lettered as a decode failure, after unknownIdWaitMs.
      { key: 'order-7', value: Buffer.concat([Buffer.from([0, 0, 0x0f, 0x42, 0x3f]), Buffer.from([2, 0x61])]), headers: { 'message-id': 'm-unknown-id' } },
      await written(v1, 8, 'm-8'),
    ];
    await sendRaw(kafka, input, records);
    modules.push(await startLibraryModule(app('orders', [OrdersHandler])));
    await waitUntil(async () => (await rows()).length >= 7, 60000, 'the orders handled');
    expect(await rows()).toEqual([1, 2, 3, 4, 5, 6, 8].map((n) => [`order-${n}`, 1]));
    expect(seen.find((e) => e.orderId === 'order-1')).toEqual({ orderId: 'order-1', amount: 100n, note: '' }); // v1 read as v2
    const letters = await readTopic(kafka, `${input}.dlq`, { until: (r) => r.length >= 1, timeoutMs: 30000 });
    expect(letters.map((l) => [l.headers['message-id'], l.headers[DEAD_LETTER_HEADERS.reason]])).toEqual([['m-unknown-id', 'decode-failed']]);
    expect(letters[0].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/schema id 999999, which the registry says does not exist/);

    // Every output in the registry's framing, read by the other service's own decoder.
    const outputs = await readTopic(kafka, output, { until: (r) => r.length >= 7, timeoutMs: 30000 });
    expect(outputs.every((r) => r.value?.[0] === 0)).toBe(true);
    const decoded = await Promise.all(outputs.map((r) => independent.decode(r.value!)));
    expect(decoded.map((d) => d.orderId)).toEqual([1, 2, 3, 4, 5, 6, 8].map((n) => `order-${n}`));
    expect(decoded.find((d) => d.orderId === 'order-6')?.note).toBe('single-object');
  });

  it('goes on with cached schemas while the registry does not answer, waits (nothing dead-lettered, nothing committed) on a schema it has not fetched, and handles it once the registry is back', async () => {
    const moduleRef = modules[0];
    const lifecycle = moduleRef.get(KafkaExactlyOnceLifecycle);
    const { id: v1 } = await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V1) }, { subject: `${prefix}orders-value` });
    const { id: v2 } = await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(ORDER_V2) }, { subject: `${prefix}orders-value` });
    const cached = await written(v1, 10, 'm-10');
    const fresh: Message = { key: 'order-11', value: await independent.encode(v2, { orderId: 'order-11', amount: 1100, note: 'v2' }), headers: { 'message-id': 'm-11' } };
    registryFreeze('SIGSTOP');
    try {
      await sendRaw(kafka, input, [cached]);
      await waitUntil(async () => (await rows()).some(([id]) => id === 'order-10'), 30000, 'a record of a cached schema handled while the registry is away');
      await sendRaw(kafka, input, [fresh]);
      // The partition waits on the registry: health names it, nothing is dead-lettered or handled.
      await waitUntil(async () => /Schema Registry/.test(lifecycle.status()?.partitions.find((p) => p.topic === input)?.lastError?.message ?? ''), 30000, 'health showing the registry');
      expect(lifecycle.status()?.partitions.find((p) => p.topic === input)).toMatchObject({ lastError: { kind: 'infrastructure' } });
      expect((await rows()).some(([id]) => id === 'order-11')).toBe(false);
    } finally {
      registryFreeze('SIGCONT');
    }
    await waitUntil(async () => (await rows()).some(([id]) => id === 'order-11'), 60000, 'the record handled once the registry is back');
    expect((await rows()).filter(([id]) => id === 'order-10' || id === 'order-11')).toEqual([['order-10', 1], ['order-11', 1]]);
    expect(seen.find((e) => e.orderId === 'order-11')?.note).toBe('v2');
    expect(await readTopic(kafka, `${input}.dlq`, { until: (r) => r.length >= 1, timeoutMs: 10000 })).toHaveLength(1); // the unknown id's only
  });

  it('publishes with a cached id while the registry is away, and says clearly when it has no id for a schema not registered', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [app('publisher', [], { publisher: { spool: { directory: newSpoolDirectory() }, sendTimeoutMs: 3000 } })] }).compile();
    await moduleRef.init();
    modules.push(moduleRef);
    const publisher = moduleRef.get(EventPublisher);
    await waitUntil(async () => (await publisher.publish('orders.seen', { ...order(20), note: 'published' }).then(() => true, () => false)), 30000, 'the output id looked up');
    registryFreeze('SIGSTOP');
    try {
      expect((await publisher.publish('orders.seen', { ...order(21), note: 'while away' })).status).toBe('sent');
    } finally {
      registryFreeze('SIGCONT');
    }
    const refused = await publisher.publish('unregistered', { ...order(22), note: 'x' }).then(() => undefined, (err: unknown) => err);
    expect(refused).toBeInstanceOf(SchemaRegistryError);
    expect((refused as Error).message).toMatch(/no (id of test\.registry\.OrderSeen under subject .*unregistered-value has come|version of test\.registry\.OrderSeen as this application writes it)/);
    const outputs = await readTopic(kafka, output, { until: (r) => r.some((x) => x.key === 'order-21'), timeoutMs: 30000 });
    expect(await independent.decode(outputs.find((r) => r.key === 'order-21')!.value!)).toMatchObject({ orderId: 'order-21', note: 'while away' });
  });
});

const ORDER_V3 = { ...ORDER_V2, fields: [...ORDER_V2.fields, { name: 'channel', type: 'string', default: 'web' }] };
const ORDER_V4 = { ...ORDER_V3, fields: [...ORDER_V3.fields, { name: 'region', type: 'string', default: 'eu' }] };
/** Valid Avro that avsc can hold only as wrapped unions (`["int","double"]` is ambiguous as a plain JS number). */
const ORDER_AMBIGUOUS = { ...ORDER_V1, fields: [...ORDER_V1.fields, { name: 'weight', type: ['int', 'double'], default: 0 }] };

@Injectable()
class EvolvingHandler {
  @IdempotentHandler({ topic: 'evolving', schema: 'test.registry.Order' })
  async onOrder(event: { orderId: string; amount: bigint; note: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO evolving_seen (order_id, note) VALUES ($1, $2)', [event.orderId, event.note]);
  }
}

/**
 * Schema evolution and the registry's failure classes in a running consumer: any number of writer versions of a
 * record side by side for the life of the process, a writer schema avsc holds only with wrapped unions, a 404 that
 * is not the registry's, a flood of ids the registry does not know, bad framing, and a wrong base URL.
 */
describe('library: Schema Registry framing, evolution and failure classes', () => {
  let kafka: Kafka;
  let proxy: Awaited<ReturnType<typeof startRegistryProxy>>;
  let independent: ConfluentClient;
  let databaseUrl: string;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('evolution')}.`;
  const input = `${prefix}evolving`;
  const subject = `${input}-value`;
  const dir = schemasDirectory('evolution', { 'order.v1.avsc': ORDER_V1, 'order.v2.avsc': ORDER_V2 });

  beforeAll(async () => {
    kafka = testKafka();
    proxy = await startRegistryProxy(registry.url);
    independent = new ConfluentClient({ host: registry.url });
    databaseUrl = await createSuiteDatabase('evolution');
    await queryDatabase(databaseUrl, 'CREATE TABLE evolving_seen (order_id text, note text)');
    await createTopics(kafka, [input, `${input}.dlq`], 2);
  });

  afterAll(async () => {
    await moduleRef?.close().catch(() => undefined);
    await proxy?.close();
  });

  function app(url: string): Type<unknown> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'evolution', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}evolution`,
          transactionalIdPrefix: `${prefix}evolution`,
          schemas: { directory: dir },
          topicPrefix: prefix,
          wireFormat: 'schema-registry',
          schemaRegistry: { url, requestTimeoutMs: 2000, unknownIdWaitMs: 3000 },
          // The handler's own topic declared, as a user may: the module reads it, and never writes it here.
          topics: { evolving: { schema: 'test.registry.Order' } },
          consumer: { sessionTimeout: 6000, maxRetryDelayMs: 1000 },
        }),
      ],
      providers: [EvolvingHandler],
    })
    class EvolutionApp {}
    return EvolutionApp;
  }

  const register = async (schema: object) => (await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(schema) }, { subject })).id;
  const record = async (id: number, n: number, extra: object = {}): Promise<Message> => ({
    key: `order-${n % 7}`,
    value: await independent.encode(id, { orderId: `order-${n}`, amount: n, ...extra }),
    headers: { 'message-id': `e-${n}` },
  });
  const seenRows = async () => queryDatabase<{ order_id: string; note: string; n: number }>(databaseUrl, 'SELECT order_id, note, count(*)::int AS n FROM evolving_seen GROUP BY order_id, note ORDER BY order_id');
  const handled = async (ids: string[]) => (await seenRows()).filter((r) => ids.includes(r.order_id));
  const deadLettered = async () => queryDatabase(databaseUrl, 'SELECT message_id, dlq_reason FROM kafka_eo_inbox WHERE topic = $1 AND dlq_reason IS NOT NULL', [input]);

  it('refuses to boot on a URL that answers, but not as a registry (Apicurio without its ccompat path)', async () => {
    const root = registry.url.replace(/\/apis\/ccompat\/v7$/, '');
    const refused = await Test.createTestingModule({ imports: [app(root)] }).compile();
    const failure = await refused.init().then(() => undefined, (err: unknown) => err);
    await refused.close().catch(() => undefined);
    expect(failure).toBeInstanceOf(SchemaRegistryError);
    expect(failure).toMatchObject({ failure: 'not-a-registry' });
    expect((failure as Error).message).toContain(`schemaRegistry.url ${root} answers, but not as a Confluent-compatible Schema Registry`);
    expect((failure as Error).message).toContain('/apis/ccompat/v7');
  });

  it('reads v1, then v2 and v3 registered while it runs, interleaved with v1 again, on two partitions at once, each record once', async () => {
    const v1 = await register(ORDER_V1);
    moduleRef = await startLibraryModule(app(proxy.url));
    await sendRaw(kafka, input, await Promise.all([1, 2, 3, 4].map((n) => record(v1, n))));
    await waitUntil(async () => (await seenRows()).length >= 4, 60000, 'the v1 records handled');
    // A writer deploys v2 then v3 while old v1 writers still run: every version interleaved, new ids on both partitions.
    const v2 = await register(ORDER_V2);
    const v3 = await register(ORDER_V3);
    const mixed: Message[] = [];
    for (let n = 10; n < 40; n++) {
      const version = [v2, v1, v3][n % 3];
      mixed.push(await record(version, n, version === v1 ? {} : version === v2 ? { note: `v2-${n}` } : { note: `v3-${n}`, channel: 'app' }));
    }
    await sendRaw(kafka, input, mixed);
    await waitUntil(async () => (await seenRows()).length >= 34, 60000, 'every version read');
    const rows = await seenRows();
    expect(rows.every((r) => r.n === 1)).toBe(true);
    for (let n = 10; n < 40; n++) {
      const expected = n % 3 === 1 ? '' : n % 3 === 0 ? `v2-${n}` : `v3-${n}`;
      expect(rows.find((r) => r.order_id === `order-${n}`)?.note).toBe(expected);
    }
    expect(await deadLettered()).toEqual([]);
  });

  it('reads a writer schema avsc holds only as wrapped unions (["int","double"])', async () => {
    const id = await register(ORDER_AMBIGUOUS);
    await sendRaw(kafka, input, [await record(id, 50, { weight: { double: 2.5 } }), await record(id, 51, { weight: { int: 3 } })]);
    await waitUntil(async () => (await handled(['order-50', 'order-51'])).length === 2, 60000, 'the records of the ambiguous union read');
    expect(await handled(['order-50', 'order-51'])).toEqual([{ order_id: 'order-50', note: '', n: 1 }, { order_id: 'order-51', note: '', n: 1 }]);
  });

  it('looks up the id of the handler\'s own topic, declared in topics, once at boot (the module may write it): never registered, never polled', () => {
    const escaped = subject.replace(/\./g, '\\.');
    // At boot the subject had v1 only, not the local v2: the lookup found none, and left it to a first write.
    expect(proxy.count(new RegExp(`^POST /subjects/${escaped}$`))).toBe(1);
    expect(proxy.count(new RegExp(`^POST /subjects/${escaped}/versions$`))).toBe(0);
  });

  it('waits on a 404 that is not the registry\'s (a proxy whose upstream is away), and reads the record once the registry answers', async () => {
    const lifecycle = moduleRef!.get(KafkaExactlyOnceLifecycle);
    const v4 = await register(ORDER_V4);
    proxy.away = true;
    try {
      await sendRaw(kafka, input, [await record(v4, 60, { note: 'v4', channel: 'x', region: 'us' })]);
      await waitUntil(async () => lifecycle.status()?.partitions.some((p) => p.topic === input && /a 404 that is not a registry's answer/.test(p.lastError?.message ?? '')) ?? false, 30000, 'health naming the 404');
      expect(await handled(['order-60'])).toEqual([]);
    } finally {
      proxy.away = false;
    }
    await waitUntil(async () => (await handled(['order-60'])).length === 1, 60000, 'the record read once the registry answers');
    expect(await handled(['order-60'])).toEqual([{ order_id: 'order-60', note: 'v4', n: 1 }]);
    expect(await deadLettered()).toEqual([]);
  });

  it('dead-letters a flood of unknown ids a few lookups per unit of work, the partition waiting unknownIdWaitMs once, and says what framings a bad record lacks', async () => {
    const v1 = await register(ORDER_V1);
    const flood: Message[] = Array.from({ length: 120 }, (_, i) => ({ key: 'flood', value: frameForRegistry(70_000_000 + i, Buffer.from([2, 0x61])), headers: { 'message-id': `flood-${i}` } }));
    const badFraming: Message = { key: 'flood', value: Buffer.from([0x01, 0x02, 0x03]), headers: { 'message-id': 'bad-framing' } };
    const after = { ...(await record(v1, 80)), key: 'flood' };
    await sendRaw(kafka, input, [...flood, badFraming, after]);
    await waitUntil(async () => (await handled(['order-80'])).length === 1, 120000, 'the valid record behind the flood handled');
    const letters = await readTopic(kafka, `${input}.dlq`, { until: (r) => r.length >= 121, timeoutMs: 30000 });
    expect(letters.map((l) => l.headers[DEAD_LETTER_HEADERS.reason])).toEqual(Array(121).fill('decode-failed'));
    expect(letters.find((l) => l.headers['message-id'] === 'bad-framing')?.headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(
      /neither framing this topic reads: Avro single-object encoding \(C3 01.*or a Schema Registry's \(00, then a 4-byte schema id.*starts with 01 02 03 \(3 bytes\)/,
    );
    // Each unknown id asked (the first unit's again while they waited: never final on one answer), a bounded number
    // of times; the partition's wait for unknown ids spent, the others were dead-lettered on their first answers; no
    // unit of work looked up more than its bound (rows a transaction wrote share its xmin).
    for (let i = 0; i < 16; i++) expect(proxy.count(new RegExp(`^GET /schemas/ids/${70_000_000 + i}$`))).toBeGreaterThan(1);
    for (let i = 0; i < 120; i++) expect(proxy.count(new RegExp(`^GET /schemas/ids/${70_000_000 + i}$`))).toBeGreaterThanOrEqual(1);
    for (let i = 0; i < 120; i++) expect(proxy.count(new RegExp(`^GET /schemas/ids/${70_000_000 + i}$`))).toBeLessThan(30);
    expect(letters.find((l) => l.headers['message-id'] === 'flood-119')?.headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/not waited for: this partition already waited 3000 ms for ids the registry does not know within 30000 ms/);
    const perUnit = await queryDatabase<{ n: number }>(databaseUrl, "SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE topic = $1 AND message_id LIKE '%flood-%' GROUP BY xmin::text", [input]);
    expect(perUnit.reduce((sum, r) => sum + r.n, 0)).toBe(120);
    expect(Math.max(...perUnit.map((r) => r.n))).toBeLessThanOrEqual(16);
  });
});

const NOTE = { type: 'record', name: 'Note', namespace: 'test.registry', fields: [{ name: 'noteId', type: 'string' }, { name: 'text', type: 'string' }] };

/** How often the echo handler was called for each order (a second call is a unit of work rolled back and run again). */
const echoCalls = new Map<string, number>();

@Injectable()
class EchoHandler {
  @IdempotentHandler({ topic: 'events', schema: 'test.registry.Order' })
  async onOrder(event: { orderId: string }, ctx: EventContext): Promise<void> {
    echoCalls.set(event.orderId, (echoCalls.get(event.orderId) ?? 0) + 1);
    ctx.emit('notes', { noteId: event.orderId, text: 'emitted' });
  }
}

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.registry.Note' })
  async onNote(event: { noteId: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO notes_seen (topic, note_id) VALUES ($1, $2)', ['notes', event.noteId]);
  }

  @IdempotentHandler({ topic: 'published', schema: 'test.registry.Note' })
  async onPublished(event: { noteId: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO notes_seen (topic, note_id) VALUES ($1, $2)', ['published', event.noteId]);
  }

  @IdempotentHandler({ topic: 'outboxed', schema: 'test.registry.Note' })
  async onOutboxed(event: { noteId: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO notes_seen (topic, note_id) VALUES ($1, $2)', ['outboxed', event.noteId]);
  }
}

/**
 * Topics the module both reads (a handler's) and writes (declared in `topics`), as the demo's welcome emails are:
 * their ids are looked up at boot like those of any topic the module writes, and a write that comes while the
 * lookup is still under way (a slow registry) waits for it: no caller sees an error, no unit of work is rolled back.
 */
describe('library: Schema Registry framing, topics the module reads and writes', () => {
  let kafka: Kafka;
  let proxy: Awaited<ReturnType<typeof startRegistryProxy>>;
  let independent: ConfluentClient;
  let databaseUrl: string;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('readwrite')}.`;
  const dir = schemasDirectory('readwrite', { 'order.v1.avsc': ORDER_V1, 'note.avsc': NOTE });
  const local = SchemaRegistry.fromDirectory(dir);
  const written = ['notes', 'published', 'outboxed'];
  const order = (n: number) => ({ orderId: `order-${n}`, amount: BigInt(n) * 100n });

  beforeAll(async () => {
    kafka = testKafka();
    proxy = await startRegistryProxy(registry.url);
    independent = new ConfluentClient({ host: registry.url });
    databaseUrl = await createSuiteDatabase('readwrite');
    await queryDatabase(databaseUrl, 'CREATE TABLE notes_seen (topic text, note_id text)');
    await createTopics(kafka, [`${prefix}events`, ...written.map((t) => `${prefix}${t}`), ...[`events`, ...written].map((t) => `${prefix}${t}.dlq`)], 1);
  });

  afterAll(async () => {
    await moduleRef?.close().catch(() => undefined);
    await proxy?.close();
  });

  function app(logger: CapturingLogger): Promise<TestingModule> {
    const note = { schema: 'test.registry.Note', key: (e: { noteId: string }) => e.noteId };
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'readwrite', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}readwrite`,
          transactionalIdPrefix: `${prefix}readwrite`,
          schemas: { directory: dir },
          topicPrefix: prefix,
          wireFormat: 'schema-registry',
          schemaRegistry: { url: proxy.url, requestTimeoutMs: 10000 },
          // Written by the module (ctx.emit, EventPublisher, Outbox) and read by its own handlers.
          topics: { notes: note, published: note, outboxed: note },
          publisher: { spool: { directory: newSpoolDirectory() } },
          outbox: { relay: true, checkpointTopic: `${prefix}checkpoints`, pollIntervalMs: 200 },
          consumer: { sessionTimeout: 6000, maxRetryDelayMs: 1000 },
        }),
      ],
      providers: [EchoHandler, NotesHandler],
    })
    class ReadWriteApp {}
    return Test.createTestingModule({ imports: [ReadWriteApp] }).setLogger(logger).compile();
  }

  it('writes each such topic at once from boot on (ctx.emit, EventPublisher.publish, Outbox.add), while its id is still being looked up', async () => {
    // Registered at deploy time (autoRegister is off), as the docs say.
    for (const topic of written) await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(NOTE) }, { subject: `${prefix}${topic}-value` });
    await sendRaw(kafka, `${prefix}events`, [1, 2, 3].map((n) => ({ key: `order-${n}`, value: encodeSingleObject(local.current('test.registry.Order'), order(n)), headers: { 'message-id': `rw-${n}` } })));
    // A registry that answers, slowly: each id is still being looked up when the first writes come.
    proxy.slow = { pattern: /^POST \/subjects\/[^/]+$/, ms: 2500 };
    const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
    moduleRef = await app(logger);
    await moduleRef.init();
    const publisher = moduleRef.get(EventPublisher);
    const outbox = moduleRef.get(Outbox);
    const dataSource = moduleRef.get<DataSource>(getDataSourceToken());
    // The first writes, right after boot: neither throws.
    expect((await publisher.publish('published', { noteId: 'p-1', text: 'published' })).status).toBe('sent');
    await dataSource.transaction((manager) => outbox.add(manager, 'outboxed', { noteId: 'o-1', text: 'outboxed' }));
    await moduleRef.get(KafkaExactlyOnceLifecycle).whenRunning();
    const rows = async () => queryDatabase<{ topic: string; note_id: string; n: number }>(databaseUrl, 'SELECT topic, note_id, count(*)::int AS n FROM notes_seen GROUP BY topic, note_id ORDER BY topic, note_id');
    await waitUntil(async () => (await rows()).length >= 5, 60000, 'every note read back');
    expect(await rows()).toEqual([
      { topic: 'notes', note_id: 'order-1', n: 1 },
      { topic: 'notes', note_id: 'order-2', n: 1 },
      { topic: 'notes', note_id: 'order-3', n: 1 },
      { topic: 'outboxed', note_id: 'o-1', n: 1 },
      { topic: 'published', note_id: 'p-1', n: 1 },
    ]);
    // Each order's handler called once: its emit did not roll its unit of work back.
    expect(Object.fromEntries(echoCalls)).toEqual({ 'order-1': 1, 'order-2': 1, 'order-3': 1 });
    expect(logger.lines.filter((l) => /try again shortly|rolled back|Schema Registry/.test(l.message))).toEqual([]);
    // Every write in the registry's framing with the subject's id, as another service's client reads it.
    for (const topic of written) {
      const records = await readTopic(kafka, `${prefix}${topic}`, { until: (r) => r.length >= 1, timeoutMs: 30000 });
      expect(records.every((r) => r.value?.[0] === 0)).toBe(true);
      for (const r of records) expect(await independent.decode(r.value!)).toMatchObject({ text: topic === 'notes' ? 'emitted' : topic });
    }
    // Each id looked up once per subject at boot or by a write sharing it, never polled.
    for (const topic of written) expect(proxy.count(new RegExp(`^POST /subjects/${`${prefix}${topic}-value`.replace(/\./g, '\\.')}$`))).toBeLessThanOrEqual(2);
  });
});

/** The records each topic's handler applied, by topic. */
@Injectable()
class EarlyLateHandler {
  @IdempotentHandler({ topic: 'early', schema: 'test.registry.Order' })
  async onEarly(event: { orderId: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (topic, order_id) VALUES ($1, $2)', ['early', event.orderId]);
  }

  @IdempotentHandler({ topic: 'late', schema: 'test.registry.Order' })
  async onLate(event: { orderId: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (topic, order_id) VALUES ($1, $2)', ['late', event.orderId]);
  }

  @IdempotentHandler({ topic: 'flood', schema: 'test.registry.Order' })
  async onFlood(event: { orderId: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (topic, order_id) VALUES ($1, $2)', ['flood', event.orderId]);
  }
}

/**
 * A record that names a schema id before the registry has it: not final at once, nor remembered as final for the
 * records that follow. A hostile value framed with the next id arrives on one topic before a writer registers that
 * id and writes valid records with it to another topic: every valid record is applied once; a value of an id that
 * never comes is dead-lettered after `unknownIdWaitMs`, its id asked again meanwhile.
 */
describe('library: Schema Registry framing, ids not registered yet', () => {
  let kafka: Kafka;
  let proxy: Awaited<ReturnType<typeof startRegistryProxy>>;
  let independent: ConfluentClient;
  let databaseUrl: string;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('unknown-ids')}.`;
  const dir = schemasDirectory('unknown-ids', { 'order.v1.avsc': ORDER_V1, 'order.v2.avsc': ORDER_V2 });
  const WAIT_MS = 15000;

  beforeAll(async () => {
    kafka = testKafka();
    proxy = await startRegistryProxy(registry.url);
    independent = new ConfluentClient({ host: registry.url });
    databaseUrl = await createSuiteDatabase('unknown_ids');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (topic text, order_id text)');
    await createTopics(kafka, ['early', 'late', 'flood', 'early.dlq', 'late.dlq', 'flood.dlq'].map((t) => `${prefix}${t}`), 1);
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'unknown-ids', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}unknown-ids`,
          transactionalIdPrefix: `${prefix}unknown-ids`,
          schemas: { directory: dir },
          topicPrefix: prefix,
          schemaRegistry: { url: proxy.url, requestTimeoutMs: 2000, unknownIdWaitMs: WAIT_MS },
          consumer: { sessionTimeout: 6000, maxRetryDelayMs: 1000 },
        }),
      ],
      providers: [EarlyLateHandler],
    })
    class UnknownIdsApp {}
    moduleRef = await startLibraryModule(UnknownIdsApp);
  });

  afterAll(async () => {
    await moduleRef?.close().catch(() => undefined);
    await proxy?.close();
  });

  const applied = async (topic: string) => queryDatabase<{ order_id: string; n: number }>(databaseUrl, 'SELECT order_id, count(*)::int AS n FROM applied WHERE topic = $1 GROUP BY order_id ORDER BY order_id', [topic]);
  // A schema of its own content (the registry gives one content one id), so that this run registers new ids.
  const unique = (label: string) => ({ ...ORDER_V1, doc: `${prefix}${label}` });

  it('applies every valid record of an id registered after a hostile record named it, and dead-letters a never-registered id only after the wait', async () => {
    const lifecycle = moduleRef!.get(KafkaExactlyOnceLifecycle);
    // The registry's ids are a sequence: the next one is the id a writer registering now gets.
    const { id: last } = await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(unique('probe')) }, { subject: `${prefix}probe-value` });
    const next = last + 1;
    const never = 2_000_000_000 + (last % 1000);
    const sentAt = Date.now();
    await sendRaw(kafka, `${prefix}early`, [
      { key: 'hostile', value: frameForRegistry(next, Buffer.from([0xff, 0xff])), headers: { 'message-id': 'hostile-next' } },
      { key: 'hostile', value: frameForRegistry(never, Buffer.from([2, 0x61])), headers: { 'message-id': 'hostile-never' } },
    ]);
    // The partition waits on the ids, and says so in health; nothing is dead-lettered meanwhile.
    await waitUntil(
      async () => new RegExp(`no schema of id (${next}|${never}) \\(yet\\)`).test(lifecycle.status()?.partitions.find((p) => p.topic === `${prefix}early`)?.lastError?.message ?? ''),
      30000,
      'health naming the id the registry does not have yet',
    );
    expect(lifecycle.status()?.partitions.find((p) => p.topic === `${prefix}early`)?.lastError?.kind).toBe('infrastructure');
    // A writer registers its v1, which gets that very id, and writes 120 valid records to another topic.
    const { id } = await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(unique('v1')) }, { subject: `${prefix}late-value` });
    if (id !== next) throw new Error(`the registry gave the writer's v1 id ${id}, not ${next}: another client registered meanwhile; run the test again`);
    const valid: Message[] = [];
    for (let n = 0; n < 120; n++) valid.push({ key: `order-${n % 7}`, value: await independent.encode(id, { orderId: `order-${n}`, amount: n }), headers: { 'message-id': `late-${n}` } });
    await sendRaw(kafka, `${prefix}late`, valid);
    await waitUntil(async () => (await applied('late')).length >= 120, 90000, 'the 120 valid records applied');
    expect(await applied('late')).toEqual(Array.from({ length: 120 }, (_, n) => ({ order_id: `order-${n}`, n: 1 })).sort((a, b) => a.order_id.localeCompare(b.order_id)));
    // The hostile records: the first now reads against the real v1 and fails as what it is; the other waited its
    // unknownIdWaitMs, its id asked again meanwhile, and is dead-lettered as unknown.
    const letters = await readTopic(kafka, `${prefix}early.dlq`, { until: (r) => r.length >= 2, timeoutMs: 60000 });
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(WAIT_MS);
    expect(letters.map((l) => [l.headers['message-id'], l.headers[DEAD_LETTER_HEADERS.reason]])).toEqual([
      ['hostile-next', 'decode-failed'],
      ['hostile-never', 'decode-failed'],
    ]);
    expect(letters[0].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(new RegExp(`cannot be read as test\\.registry\\.Order from the registry's schema id ${next}`));
    expect(letters[1].headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(new RegExp(`schema id ${never}, which the registry says does not exist \\(asked again for ${WAIT_MS} ms: schemaRegistry\\.unknownIdWaitMs\\)`));
    expect(proxy.count(new RegExp(`^GET /schemas/ids/${never}$`))).toBeGreaterThan(1);
    expect(await queryDatabase(databaseUrl, 'SELECT message_id FROM kafka_eo_inbox WHERE topic = $1 AND dlq_reason IS NOT NULL', [`${prefix}late`])).toEqual([]);
    expect(await applied('early')).toEqual([]);
  });

  it('dead-letters a flood of distinct unknown ids within a bounded time, valid records flowing: ids below one the registry gave are not waited for, those above cost the partition one wait', async () => {
    const lifecycle = moduleRef!.get(KafkaExactlyOnceLifecycle);
    // Holes: 200 ids the registry gave and has deleted for good (a registry never gives an id again).
    const holes: number[] = [];
    for (let i = 0; i < 200; i++) holes.push((await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(unique(`hole-${i}`)) }, { subject: `${prefix}holes-value` })).id);
    for (const permanent of ['', '?permanent=true']) expect((await fetch(`${registry.url}/subjects/${prefix}holes-value${permanent}`, { method: 'DELETE' })).status).toBe(200);
    expect((await fetch(`${registry.url}/schemas/ids/${holes[0]}`)).status).toBe(404);
    // A writer's schema above them, which the process reads (and so has been given) before the flood.
    const { id } = await independent.register({ type: SchemaType.AVRO, schema: JSON.stringify(unique('flood-v1')) }, { subject: `${prefix}flood-value` });
    const valid = async (n: number): Promise<Message> => ({ key: `order-${n % 7}`, value: await independent.encode(id, { orderId: `flood-${n}`, amount: n }), headers: { 'message-id': `valid-${n}` } });
    await sendRaw(kafka, `${prefix}flood`, [await valid(0)]);
    await waitUntil(async () => (await applied('flood')).length === 1, 60000, 'the first valid record applied');
    // The registry may lag on a replica for up to unknownIdWaitMs: an id is settled once given that long ago.
    await new Promise((resolve) => setTimeout(resolve, WAIT_MS + 1000));
    const above = Array.from({ length: 20 }, (_, i) => 2_100_000_000 + i);
    const hostile = [...holes.map((hole) => ({ kind: 'hole', id: hole })), ...above.map((a) => ({ kind: 'above', id: a }))];
    const records: Message[] = [];
    let n = 1;
    for (const [i, { kind, id: framed }] of hostile.sort(() => Math.random() - 0.5).entries()) {
      records.push({ key: `hostile-${i % 7}`, value: frameForRegistry(framed, Buffer.from([2, 0x61])), headers: { 'message-id': `${kind}-${framed}` } });
      if (i % 4 === 0) records.push(await valid(n++));
    }
    const sentAt = Date.now();
    await sendRaw(kafka, `${prefix}flood`, records);
    // Before, each 16 distinct ids cost the partition unknownIdWaitMs: 14 waits of 15 s, some 210 s. A loose bound.
    await waitUntil(async () => (await applied('flood')).length === n, 100000, 'every valid record applied');
    const letters = await readTopic(kafka, `${prefix}flood.dlq`, { until: (r) => r.length >= hostile.length, timeoutMs: 100000 - (Date.now() - sentAt) });
    expect(Date.now() - sentAt).toBeLessThan(100000);
    expect(await applied('flood')).toEqual(Array.from({ length: n }, (_, k) => ({ order_id: `flood-${k}`, n: 1 })).sort((a, b) => a.order_id.localeCompare(b.order_id)));
    expect(letters.length).toBe(hostile.length);
    expect(new Set(letters.map((l) => l.headers[DEAD_LETTER_HEADERS.reason]))).toEqual(new Set(['decode-failed']));
    for (const letter of letters) {
      const messageId = letter.headers['message-id'];
      const error = letter.headers[DEAD_LETTER_HEADERS.errorMessage];
      if (messageId.startsWith('hole-')) expect([messageId, error]).toEqual([messageId, expect.stringMatching(/which the registry says does not exist \(not waited for: the registry gave id \d+ more than 15000 ms ago, and gives ids in increasing order\)/)]);
      else expect([messageId, error]).toEqual([messageId, expect.stringMatching(/which the registry says does not exist \((asked again for 15000 ms|not waited for: this partition already waited 15000 ms)/)]);
    }
    // Each id asked a bounded number of times; the partition said why it waited while it did.
    for (const framed of [...holes, ...above]) expect(proxy.count(new RegExp(`^GET /schemas/ids/${framed}$`))).toBeLessThan(30);
    expect(lifecycle.status()?.partitions.find((p) => p.topic === `${prefix}flood`)?.lastError?.message).toMatch(/no schema of id 21000000\d\d \(yet\)/);
  });
});
