import { Controller, Inject, INestMicroservice, Module, PipeTransform, ArgumentMetadata, UsePipes, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AsyncMicroserviceOptions, ClientKafka, ClientProxy, ClientsModule, Ctx, EventPattern, KafkaContext, MicroserviceOptions, Payload, Transport } from '@nestjs/microservices';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IsInt, IsNotEmpty, IsString, Min } from 'class-validator';
import { mkdtempSync } from 'fs';
import { Kafka } from 'kafkajs';
import { tmpdir } from 'os';
import { join } from 'path';
import { Pool } from 'pg';
import { lastValueFrom } from 'rxjs';
import { DEAD_LETTER_HEADERS, EventContext, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { clientKafkaExactlyOnce, KafkaExactlyOnceServer } from 'kafka-exactly-once/microservices';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { CapturingLogger } from './support/library';

/*
 * Measured here, of @nestjs/microservices 11.2.6 on KafkaJS 2.2.4 (what matters for moving a group in place):
 *
 * - Group id: ServerKafka joins `consumer.groupId + postfixId`, and postfixId defaults to '-server' (its client
 *   id gets the same postfix). Given `groupId: 'payments'` it commits in the group `payments-server`; the group
 *   `payments` itself holds nothing. ClientKafka joins `<groupId>-client` with a consumer of its own, unless
 *   `producerOnlyMode: true`, which joins no group (the producer here sets it: it only emits).
 * - Offsets: ServerKafka runs `eachMessage` with KafkaJS's autoCommit; after a clean `app.close()` the group's
 *   committed offset of each partition is the next record it never handled (here: the log end).
 * - Writing: `emit(topic, { key, value })` writes `JSON.stringify(value)` for a plain object, the string key as
 *   it is, and no header at all: no message id, no event type. The partitioner is KafkaJS's default (murmur2 of
 *   the key; KafkaJS warns that it changed in 2.0), the one the library uses.
 * - Reading: ServerKafka JSON-parses a value that starts with `{` (the library's JSON events arrive deep-equal),
 *   gives the key as text and every header as a string in `KafkaContext.getMessage().headers`: the library's
 *   `message-id` and `event-type: json` arrive there as text, and nothing in Nest acts on them.
 * - A throwing @EventPattern handler: Nest's RpcExceptionsHandler logs the error and KafkaJS's eachMessage is
 *   rejected with Nest's `{ status: 'error', message: 'Internal server error' }`; the offset is not committed,
 *   KafkaJS fetches the record again at once and the handler runs again, the records after it on the partition
 *   waiting, until it succeeds. Nothing is dead-lettered: a record that always fails holds its partition.
 */

const prefix = `${uniqueTopic('nest-in-place')}.`;
/** The one topic the story moves over: stock Nest writes it before, during and after the move. */
const PAYMENTS = `${prefix}payments`;
const DONE = `${prefix}payments.done`;
const PIPED = `${prefix}payments.piped`;
/** A topic whose records take their identity from the event's own key (messageIdFrom) when they carry no message id. */
const KEYED = `${prefix}payments.keyed`;
const REFUNDS = `${prefix}refunds`;
const THROWING = `${prefix}nest.throwing`;
/** The `consumer.groupId` the Nest application was configured with. */
const NEST_GROUP_ID = `${prefix}payments`;
const N = 40;
const ACCOUNTS = ['acct-0', 'acct-1', 'acct-2', 'acct-3', 'acct-4'];

interface Payment {
  paymentId: string;
  account: string;
  amount: number;
  seq: number;
}

/** The DTO the Nest application already had: the library validates with it as it is. */
class PaymentDto {
  @IsString()
  @IsNotEmpty()
  paymentId!: string;

  @IsString()
  @IsNotEmpty()
  account!: string;

  @IsInt()
  amount!: number;

  @IsInt()
  @Min(0)
  seq!: number;
}

const payment = (seq: number): Payment => ({ paymentId: `p-${String(seq).padStart(4, '0')}`, account: ACCOUNTS[seq % ACCOUNTS.length], amount: 100 + seq, seq });

/** What the handlers of this suite saw, outside of PostgreSQL. */
class Probe {
  readonly nest: Array<{ data: unknown; key: unknown; headers: Record<string, unknown>; partition: number; offset: string }> = [];
  readonly downstream: Array<{ topic: string; data: unknown; key: unknown; headers: Record<string, unknown> }> = [];
  readonly throwing: Array<{ seq: number; failed: boolean }> = [];
  readonly piped: string[] = [];
  /** `ctx.message.messageId` of each payment the library handled. */
  readonly libraryIds = new Map<string, string>();
  readonly pipeRuns: string[] = [];
  /** [paymentId, ctx.message.messageId] of each record of the keyed topic the library handled. */
  readonly keyedIds: Array<[string, string]> = [];
}
const probe = new Probe();

// ---- before: the stock Nest transport ----

/** The consumer as it was on Transport.KAFKA: at-least-once, its own writes in autocommit. */
@Controller()
class NestPaymentsController {
  constructor(@Inject(Pool) private readonly pool: Pool) {}

  @EventPattern(PAYMENTS)
  async onPayment(@Payload() data: Payment, @Ctx() ctx: KafkaContext): Promise<void> {
    const message = ctx.getMessage();
    probe.nest.push({ data, key: message.key, headers: { ...message.headers }, partition: ctx.getPartition(), offset: message.offset });
    await this.pool.query(`INSERT INTO payments_applied (payment_id, account, seq, handled_by) VALUES ($1, $2, $3, 'nest')`, [data.paymentId, data.account, data.seq]);
  }
}

/** A stock Nest consumer that stays on Transport.KAFKA: it reads what the library writes. */
@Controller()
class NestDownstreamController {
  @EventPattern(DONE)
  onDone(@Payload() data: unknown, @Ctx() ctx: KafkaContext): void {
    probe.downstream.push({ topic: ctx.getTopic(), data, key: ctx.getMessage().key, headers: { ...ctx.getMessage().headers } });
  }

  @EventPattern(REFUNDS)
  onRefund(@Payload() data: unknown, @Ctx() ctx: KafkaContext): void {
    probe.downstream.push({ topic: ctx.getTopic(), data, key: ctx.getMessage().key, headers: { ...ctx.getMessage().headers } });
  }

  /** Fails the first three times it sees seq 1, as a handler whose database is away would. */
  @EventPattern(THROWING)
  onThrowing(@Payload() data: { seq: number }): void {
    const failed = data.seq === 1 && probe.throwing.filter((t) => t.seq === 1).length < 3;
    probe.throwing.push({ seq: data.seq, failed });
    if (failed) throw new Error(`seq ${data.seq} failed`);
  }
}

// ---- after: the library, on the same topic and group ----

/** Counts its runs (a retry would show), then validates as Nest's ValidationPipe does. */
class CountingValidationPipe extends ValidationPipe implements PipeTransform {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type !== 'custom') probe.pipeRuns.push((value as Partial<Payment>)?.paymentId ?? '?');
    return super.transform(value, metadata);
  }
}

@Controller()
class LibraryPaymentsController {
  /** The handler of NestPaymentsController, moved: its writes through ctx.manager, its output through ctx.emit. */
  @EventPattern('payments', { format: 'json', validate: PaymentDto })
  async onPayment(@Payload() data: PaymentDto, @Ctx() ctx: EventContext): Promise<void> {
    if (!(data instanceof PaymentDto)) throw new Error('validate gives the DTO instance');
    probe.libraryIds.set(data.paymentId, ctx.message.messageId);
    const [{ balance }] = await ctx.manager.query(
      'INSERT INTO balances (account, balance) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET balance = balances.balance + EXCLUDED.balance RETURNING balance',
      [data.account, data.amount],
    );
    await ctx.manager.query(`INSERT INTO payments_applied (payment_id, account, seq, handled_by) VALUES ($1, $2, $3, 'library')`, [data.paymentId, data.account, data.seq]);
    ctx.emit('payments.done', { paymentId: data.paymentId, account: data.account, balance: Number(balance) }, { key: data.account });
  }

  /** The same handler on a topic whose records are known by their paymentId (the module's topics["payments.keyed"]). */
  @EventPattern('payments.keyed', { format: 'json', validate: PaymentDto })
  async onKeyed(@Payload() data: PaymentDto, @Ctx() ctx: EventContext): Promise<void> {
    probe.keyedIds.push([data.paymentId, ctx.message.messageId]);
    await ctx.manager.query(`INSERT INTO payments_applied (payment_id, account, seq, handled_by) VALUES ($1, $2, $3, 'library-keyed')`, [data.paymentId, data.account, data.seq]);
    ctx.emit('payments.done', { paymentId: data.paymentId, account: data.account, balance: 0 }, { key: data.account });
  }

  /** Validation by Nest's own ValidationPipe (a 400 before the handler) instead of the `validate` option. */
  @EventPattern('payments.piped', { format: 'json', retry: { attempts: 3, initialDelayMs: 10 } })
  @UsePipes(new CountingValidationPipe())
  async onPiped(@Payload() data: PaymentDto, @Ctx() ctx: EventContext): Promise<void> {
    probe.piped.push(data.paymentId);
    await ctx.manager.query(`INSERT INTO payments_applied (payment_id, account, seq, handled_by) VALUES ($1, $2, $3, 'library-piped')`, [data.paymentId, data.account, data.seq]);
  }
}

describe('library: a group on Nest\'s Kafka transport moved over in place (same topic, same group, JSON)', () => {
  let kafka: Kafka;
  let databaseUrl: string;
  let pool: Pool;
  let producer: TestingModule;
  let nestClient: ClientKafka;
  let library: INestMicroservice | undefined;
  let downstream: INestMicroservice | undefined;
  /** The group Nest really committed in (measured in the first test). */
  let nestGroup: string;
  const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
  const spool = mkdtempSync(join(tmpdir(), 'keo-nest-in-place-spool-'));

  const waitUntil = async (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 60000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const rows = async (where = 'TRUE') =>
    (await pool.query(`SELECT payment_id, account, seq, handled_by FROM payments_applied WHERE ${where} ORDER BY id`)).rows as Array<{ payment_id: string; account: string; seq: number; handled_by: string }>;
  /** The stock producer: ClientKafka.emit as the application calls it, awaited (one record after the other). */
  const emit = async (topic: string, record: { key: string; value: unknown; headers?: Record<string, string> }) => {
    await lastValueFrom(nestClient.emit(topic, record));
  };
  const committed = (groupId: string, topic: string) => withAdmin(kafka, async (admin) => (await admin.fetchOffsets({ groupId, topics: [topic] }))[0].partitions);
  const endOffsets = (topic: string) => withAdmin(kafka, (admin) => admin.fetchTopicOffsets(topic));

  /** A stock Nest microservice on Transport.KAFKA, as `main.ts` makes it. */
  async function startNestConsumer(controllers: unknown[], groupId: string): Promise<INestMicroservice> {
    @Module({ controllers: controllers as never[], providers: [{ provide: Pool, useValue: pool }] })
    class NestConsumerModule {}
    const app = await NestFactory.createMicroservice<MicroserviceOptions>(NestConsumerModule, {
      transport: Transport.KAFKA,
      options: {
        client: { clientId: 'payments', brokers: kafkaBrokers() },
        consumer: { groupId, sessionTimeout: 6000, heartbeatInterval: 500 },
        subscribe: { fromBeginning: true },
      },
      logger,
    });
    await app.listen();
    return app;
  }

  /** The same consumer on the library: KafkaExactlyOnceServer in place of Transport.KAFKA, in the group Nest used. */
  async function startLibrary(groupId: string): Promise<INestMicroservice> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 10 } }),
        KafkaExactlyOnceModule.forRoot({
          isGlobal: true,
          kafka: { clientId: 'payments', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId,
          transactionalIdPrefix: 'nest-in-place',
          topicPrefix: prefix, // this suite's topics; an application names them as they are
          topics: {
            payments: { format: 'json' },
            'payments.piped': { format: 'json' },
            'payments.keyed': { format: 'json', messageIdFrom: 'paymentId' },
            'payments.done': { format: 'json' },
            refunds: { format: 'json', key: (refund: { account: string }) => refund.account },
          },
          consumer: { sessionTimeout: 6000 },
          publisher: { spool: { directory: spool }, sendTimeoutMs: 2000 },
        }),
        ClientsModule.registerAsync([clientKafkaExactlyOnce('REFUNDS')]),
      ],
      controllers: [LibraryPaymentsController],
      providers: [KafkaExactlyOnceServer],
    })
    class PaymentsModule {}
    const app = await NestFactory.createMicroservice<AsyncMicroserviceOptions>(PaymentsModule, {
      inject: [KafkaExactlyOnceServer],
      useFactory: (server: KafkaExactlyOnceServer) => ({ strategy: server }),
      logger,
    });
    await app.listen();
    await app.get(KafkaExactlyOnceLifecycle).whenRunning();
    return app;
  }

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('nest_in_place');
    pool = new Pool({ connectionString: databaseUrl, max: 4 });
    await pool.query('CREATE TABLE payments_applied (id bigserial PRIMARY KEY, payment_id text NOT NULL, account text NOT NULL, seq int NOT NULL, handled_by text NOT NULL)');
    await pool.query('CREATE TABLE balances (account text PRIMARY KEY, balance bigint NOT NULL)');
    await createTopics(kafka, [PAYMENTS, PIPED, KEYED, DONE, REFUNDS, THROWING], 3);
    // The producing application, as it is: ClientKafka registered with ClientsModule, emitting plain objects.
    producer = await Test.createTestingModule({
      imports: [ClientsModule.register([{ name: 'PAYMENTS', transport: Transport.KAFKA, options: { client: { clientId: 'checkout', brokers: kafkaBrokers() }, producerOnlyMode: true } }])],
    })
      .setLogger(logger)
      .compile();
    nestClient = producer.get<ClientKafka>('PAYMENTS');
    await nestClient.connect();
  });

  afterAll(async () => {
    await downstream?.close();
    await library?.close();
    await producer?.close();
    await pool?.end();
  });

  it('before: stock ServerKafka handles what stock ClientKafka writes (JSON, key as text, no message id) and commits it in `<groupId>-server`', async () => {
    const nest = await startNestConsumer([NestPaymentsController], NEST_GROUP_ID);
    try {
      for (let seq = 0; seq < N; seq++) await emit(PAYMENTS, { key: payment(seq).account, value: payment(seq) });
      await waitUntil(`Nest handled ${N}`, () => probe.nest.length >= N, 30000);
    } finally {
      await nest.close(); // a clean stop: KafkaJS commits what was handled
    }
    expect(probe.nest.map((s) => s.data)).toEqual(expect.arrayContaining(Array.from({ length: N }, (_, seq) => payment(seq))));
    expect(probe.nest).toHaveLength(N);
    expect(probe.nest.every((s) => s.key === (s.data as Payment).account)).toBe(true);
    expect(probe.nest.every((s) => Object.keys(s.headers).length === 0)).toBe(true); // no message-id, no event-type
    // The bytes ClientKafka wrote: JSON.stringify of the object, the key as it is, no header.
    const [first] = await readTopic(kafka, PAYMENTS, { until: (rs) => rs.some((r) => r.offset === '0') });
    expect(JSON.parse(first.value!.toString('utf8'))).toEqual(expect.objectContaining({ paymentId: expect.stringMatching(/^p-/) }));
    expect(first.value!.toString('utf8')).toBe(JSON.stringify(probe.nest.find((s) => s.partition === first.partition && s.offset === '0')!.data));
    expect(first.rawHeaders).toEqual({});

    // Which group holds the offsets: the configured id with '-server' appended, not the id itself.
    const groups = await withAdmin(kafka, async (admin) => (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.startsWith(prefix)));
    expect(groups).toEqual([`${NEST_GROUP_ID}-server`]);
    nestGroup = groups[0];
    // The producer (producerOnlyMode) joined no group; a ClientKafka without it joins `<groupId>-client`.
    const withConsumer = new ClientKafka({ client: { clientId: 'checkout', brokers: kafkaBrokers() }, consumer: { groupId: `${prefix}checkout`, sessionTimeout: 6000 } });
    await withConsumer.connect();
    try {
      await waitUntil('the client\'s group', async () => (await withAdmin(kafka, (admin) => admin.listGroups())).groups.some((g) => g.groupId === `${prefix}checkout-client`), 15000);
    } finally {
      await withConsumer.close();
    }
    expect((await committed(NEST_GROUP_ID, PAYMENTS)).map((p) => p.offset)).toEqual(['-1', '-1', '-1']);
    const offsets = await committed(nestGroup, PAYMENTS);
    const ends = await endOffsets(PAYMENTS);
    expect(offsets.map((p) => [p.partition, p.offset]).sort()).toEqual(ends.map((p) => [p.partition, p.offset]).sort());
    expect(offsets.reduce((sum, p) => sum + Number(p.offset), 0)).toBe(N);
    expect((await rows()).map((r) => r.handled_by)).toEqual(Array(N).fill('nest'));
  });

  it('the same group on the library: from the committed offset on, every record once and in order per key, while ClientKafka keeps writing; an invalid one is dead-lettered validation-failed', async () => {
    // Written while no consumer runs (between the old application's stop and the new one's start).
    for (let seq = N; seq < N + 10; seq++) await emit(PAYMENTS, { key: payment(seq).account, value: payment(seq) });
    library = await startLibrary(nestGroup);
    // Written while the library consumes: producers not moved yet go on as they were.
    const bad = { paymentId: 'p-bad', account: 'acct-2', amount: '12.50', seq: N + 20 };
    for (let seq = N + 10; seq < N + 40; seq++) {
      await emit(PAYMENTS, { key: payment(seq).account, value: payment(seq) });
      if (seq === N + 19) await emit(PAYMENTS, { key: bad.account, value: bad }); // the DTO says amount is an integer
    }
    const expected = Array.from({ length: 40 }, (_, i) => payment(N + i));
    await waitUntil('the 40 later payments applied', async () => (await rows(`handled_by = 'library'`)).length >= 40);

    // Each payment applied once: the first N by Nest, the rest by the library; none again, none skipped.
    const all = await rows();
    const counts = new Map<string, number>();
    for (const r of all) counts.set(r.payment_id, (counts.get(r.payment_id) ?? 0) + 1);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(all.filter((r) => r.handled_by === 'nest').map((r) => r.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: N }, (_, i) => i));
    const applied = all.filter((r) => r.handled_by === 'library');
    expect(applied.map((r) => r.seq).sort((a, b) => a - b)).toEqual(expected.map((p) => p.seq));
    // In order per key (the order ClientKafka wrote them in).
    for (const account of ACCOUNTS) {
      expect(applied.filter((r) => r.account === account).map((r) => r.seq)).toEqual(expected.filter((p) => p.account === account).map((p) => p.seq));
    }
    const balances = (await pool.query('SELECT account, balance::int AS balance FROM balances ORDER BY account')).rows;
    expect(balances).toEqual(ACCOUNTS.map((account) => ({ account, balance: expected.filter((p) => p.account === account).reduce((s, p) => s + p.amount, 0) })));

    // The invalid record: dead-lettered with its original bytes and key, not handled, and its key went on.
    const [letter, ...more] = await readTopic(kafka, `${PAYMENTS}.dlq`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
    expect(more).toEqual([]);
    expect(letter.key).toBe('acct-2');
    expect(letter.value!.toString('utf8')).toBe(JSON.stringify(bad));
    expect(letter.headers).toMatchObject({ [DEAD_LETTER_HEADERS.reason]: 'validation-failed', [DEAD_LETTER_HEADERS.originalTopic]: PAYMENTS, [DEAD_LETTER_HEADERS.consumerGroup]: nestGroup, [DEAD_LETTER_HEADERS.attempts]: '1' });
    expect(letter.headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/amount/);
    expect(letter.headers['message-id']).toBeUndefined(); // what Nest wrote, byte for byte: it had none
    const original = (await readTopic(kafka, PAYMENTS, { until: (rs) => rs.length >= N + 41 })).find(
      (r) => String(r.partition) === letter.headers[DEAD_LETTER_HEADERS.originalPartition] && r.offset === letter.headers[DEAD_LETTER_HEADERS.originalOffset],
    )!;
    expect(letter.value!.equals(original.value!)).toBe(true);
    expect(await rows(`payment_id = 'p-bad'`)).toEqual([]);
    expect(applied.filter((r) => r.account === 'acct-2' && r.seq > bad.seq).length).toBeGreaterThan(0);

    // One output per applied payment, JSON as the topic declares, read committed; each names its input.
    const outputs = await readTopic(kafka, DONE, { until: (rs) => rs.length >= 40, timeoutMs: 30000 });
    expect(outputs.map((o) => JSON.parse(o.value!.toString('utf8')).paymentId).sort()).toEqual(expected.map((p) => p.paymentId).sort());
    expect(outputs.every((o) => o.headers['event-type'] === 'json' && !!o.headers['message-id'] && o.key === JSON.parse(o.value!.toString('utf8')).account)).toBe(true);
    expect(new Set(outputs.map((o) => o.headers['message-id'])).size).toBe(40);
    // Without a message-id header a record is known by its coordinates: that is its id in ctx.message and its outputs' causation-id.
    const written = await readTopic(kafka, PAYMENTS, { until: (rs) => rs.length >= N + 41 });
    for (const o of outputs) {
      const { paymentId } = JSON.parse(o.value!.toString('utf8'));
      const input = written.find((r) => JSON.parse(r.value!.toString('utf8')).paymentId === paymentId)!;
      expect([o.headers['causation-id'], probe.libraryIds.get(paymentId)]).toEqual([`${PAYMENTS}/${input.partition}/${input.offset}`, `${PAYMENTS}/${input.partition}/${input.offset}`]);
    }
    // The group moved on past every record: the library commits in the group Nest used.
    await waitUntil('the group committed past every record', async () => (await committed(nestGroup, PAYMENTS)).reduce((sum, p) => sum + Number(p.offset), 0) === N + 41, 15000);
  });

  it('records without a message id: a duplicate publish by ClientKafka is applied twice (two records), one with a message-id header once', async () => {
    const twice = { paymentId: 'p-twice', account: 'acct-0', amount: 1, seq: 900 };
    await emit(PAYMENTS, { key: twice.account, value: twice });
    await emit(PAYMENTS, { key: twice.account, value: twice });
    // The same call with the header the library reads: the application gives its own idempotency key.
    const once = { paymentId: 'p-once', account: 'acct-1', amount: 1, seq: 901 };
    await emit(PAYMENTS, { key: once.account, value: once, headers: { 'message-id': 'checkout-p-once' } });
    await emit(PAYMENTS, { key: once.account, value: once, headers: { 'message-id': 'checkout-p-once' } });
    const marker = { paymentId: 'p-after', account: 'acct-1', amount: 1, seq: 902 };
    await emit(PAYMENTS, { key: marker.account, value: marker }); // same key as p-once: after its duplicate
    await waitUntil('p-twice twice and p-after applied', async () => (await rows(`payment_id IN ('p-twice', 'p-after')`)).length >= 3);
    expect((await rows(`payment_id = 'p-twice'`)).length).toBe(2);
    expect((await rows(`payment_id = 'p-once'`)).length).toBe(1);
  });

  it('records without a message id on a topic with messageIdFrom: ClientKafka\'s duplicate publish is applied once; a header keeps its own identity, in a namespace of its own', async () => {
    const twice = { paymentId: 'k-1', account: 'acct-0', amount: 1, seq: 1 };
    await emit(KEYED, { key: twice.account, value: twice });
    await emit(KEYED, { key: twice.account, value: twice }); // stock ClientKafka, the same event again: no header
    // A record with a message-id header keeps it: its header is another identity than any event's key, even one that
    // spells the key of another event (which must not make that event a duplicate).
    const forged = { paymentId: 'k-2', account: 'acct-1', amount: 1, seq: 2 };
    await emit(KEYED, { key: forged.account, value: { ...forged, paymentId: 'k-forger' }, headers: { 'message-id': 'k-2' } });
    await emit(KEYED, { key: forged.account, value: forged });
    await emit(KEYED, { key: forged.account, value: forged }); // and its own duplicate
    const marker = { paymentId: 'k-after', account: 'acct-0', amount: 1, seq: 3 };
    await emit(KEYED, { key: marker.account, value: marker }); // same key as k-1: after its duplicate
    await emit(KEYED, { key: forged.account, value: { ...marker, account: forged.account, paymentId: 'k-after-1' } }); // after k-2's
    await waitUntil('k-after and k-after-1 applied', async () => (await rows(`payment_id IN ('k-after', 'k-after-1')`)).length >= 2);
    const applied = (await rows(`handled_by = 'library-keyed'`)).map((r) => r.payment_id).sort();
    expect(applied).toEqual(['k-1', 'k-2', 'k-after', 'k-after-1', 'k-forger']);
    // The event's key is the record's id in ctx.message (and its outputs' causation-id); the header one its header.
    expect(Object.fromEntries(probe.keyedIds)).toEqual({ 'k-1': 'k-1', 'k-2': 'k-2', 'k-forger': 'k-2', 'k-after': 'k-after', 'k-after-1': 'k-after-1' });
    const outputs = await readTopic(kafka, DONE, { until: (rs) => rs.filter((o) => JSON.parse(o.value!.toString('utf8')).paymentId.startsWith('k-')).length >= 5, timeoutMs: 30000 });
    const keyedOutputs = outputs.filter((o) => JSON.parse(o.value!.toString('utf8')).paymentId.startsWith('k-'));
    expect(keyedOutputs.map((o) => JSON.parse(o.value!.toString('utf8')).paymentId).sort()).toEqual(applied);
    // Two records named k-2 (the header's and the event key's) have outputs of different ids: neither is dropped downstream.
    expect(new Set(keyedOutputs.map((o) => o.headers['message-id'])).size).toBe(5);
    // Every record, the skipped duplicates included, is committed in the group.
    await waitUntil('the group committed past every keyed record', async () => (await committed(nestGroup, KEYED)).reduce((sum, p) => sum + Math.max(0, Number(p.offset)), 0) === 7, 15000);
  });

  it('Nest\'s ValidationPipe on the library\'s handler: a record the pipe refuses is dead-lettered validation-failed, never retried', async () => {
    const good = { paymentId: 'q-1', account: 'acct-3', amount: 5, seq: 1 };
    const refused = { paymentId: 'q-2', account: 'acct-3', amount: 'five', seq: 2 };
    const after = { paymentId: 'q-3', account: 'acct-3', amount: 7, seq: 3 };
    for (const value of [good, refused, after]) await emit(PIPED, { key: value.account, value });
    await waitUntil('q-3 applied', async () => (await rows(`payment_id = 'q-3'`)).length === 1);
    const [letter, ...more] = await readTopic(kafka, `${PIPED}.dlq`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
    expect(more).toEqual([]);
    expect(letter.value!.toString('utf8')).toBe(JSON.stringify(refused));
    expect(letter.headers).toMatchObject({ [DEAD_LETTER_HEADERS.reason]: 'validation-failed', [DEAD_LETTER_HEADERS.errorClass]: 'BadRequestException', [DEAD_LETTER_HEADERS.attempts]: '1' });
    // The handler never saw it; the pipe refused it in one attempt of three allowed (a retry would run it again).
    expect(probe.piped).toEqual(['q-1', 'q-3']);
    expect(probe.pipeRuns.filter((id) => id === 'q-2').length).toBe(1);
    expect((await rows(`handled_by = 'library-piped'`)).map((r) => r.payment_id)).toEqual(['q-1', 'q-3']);
  });

  it('the other direction: a stock ServerKafka reads what ClientKafkaExactlyOnce emits and what ctx.emit wrote: the same object, the key, the headers as text', async () => {
    downstream = await startNestConsumer([NestDownstreamController], `${prefix}downstream`);
    const refund = { refundId: 'r-1', account: 'acct-4', amount: 250, reason: 'duplicate charge', lines: [{ sku: 'a-1', quantity: 2 }], note: null, nested: { deep: { ok: true } } };
    const client = library!.get<ClientProxy>('REFUNDS');
    const result = await lastValueFrom(client.emit('refunds', refund)); // the key from the topic's key function
    expect(result).toMatchObject({ status: 'sent' });
    await waitUntil('the refund and the 40 outputs reached Nest', () => probe.downstream.filter((d) => d.topic === REFUNDS).length >= 1 && probe.downstream.filter((d) => d.topic === DONE).length >= 40);
    const [seen] = probe.downstream.filter((d) => d.topic === REFUNDS);
    expect(seen.data).toEqual(refund);
    expect(seen.key).toBe('acct-4');
    expect(seen.headers).toEqual({ 'message-id': (result as { messageId: string }).messageId, 'event-type': 'json' });
    // A ClientKafka call site that gives a partition is refused, not written with the wrapper as the event.
    await expect(lastValueFrom(client.emit('refunds', { key: 'acct-4', value: refund, partition: 0 }))).rejects.toThrow(/"partition" of Nest's Kafka record is not supported/);
    const done = probe.downstream.filter((d) => d.topic === DONE);
    expect(done.every((d) => d.key === (d.data as { account: string }).account && d.headers['event-type'] === 'json' && typeof d.headers['causation-id'] === 'string')).toBe(true);
  });

  it('measured: a stock @EventPattern handler that throws is run again by KafkaJS, the records after it waiting, and never dead-lettered', async () => {
    const client = nestClient;
    for (let seq = 0; seq < 3; seq++) await lastValueFrom(client.emit(THROWING, { key: 'k', value: { seq } }));
    await waitUntil('seq 2 handled', () => probe.throwing.some((t) => t.seq === 2), 60000);
    expect(probe.throwing.map((t) => [t.seq, t.failed])).toEqual([
      [0, false],
      [1, true],
      [1, true],
      [1, true],
      [1, false],
      [2, false],
    ]);
    // Nest's RpcExceptionsHandler logs each failure; KafkaJS is given Nest's RPC error object, not the handler's error.
    expect(logger.lines.filter((l) => l.context === 'RpcExceptionsHandler' && l.message.includes('seq 1 failed')).length).toBe(3);
    expect(logger.lines.filter((l) => l.context === 'ServerKafka' && l.message.includes('Error when calling eachMessage') && l.message.includes('"message":"Internal server error"')).length).toBe(3);
    await expect(withAdmin(kafka, (admin) => admin.fetchTopicMetadata({ topics: [`${THROWING}.dlq`] }))).rejects.toThrow();
  });
});
