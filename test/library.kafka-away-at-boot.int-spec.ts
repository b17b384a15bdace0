import { Body, Controller, Get, HttpCode, INestApplication, INestMicroservice, Injectable, Module, Post, ServiceUnavailableException, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AsyncMicroserviceOptions, ClientProxy, ClientsModule, Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { Inject } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { mkdtempSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { Pool } from 'pg';
import { lastValueFrom } from 'rxjs';
import { EventCodec, EventContext, EventPublisher, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, KafkaHealthIndicator } from 'kafka-exactly-once';
import { clientKafkaExactlyOnce, KafkaExactlyOnceServer } from 'kafka-exactly-once/microservices';
import { kafkaControl, kafkaFreeze } from './support/broker';
import { consumerAppPort, createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { CapturingLogger, schemasDirectory } from './support/library';
import { ENTRY, Entry } from './support/ledger';
import { waitUntil } from './support/payments';
import { processSuite } from './support/suite';

type Kind = 'hybrid' | 'microservice' | 'handler';
const KINDS: Kind[] = ['hybrid', 'microservice', 'handler'];

/**
 * Kafka away when the application starts, in each documented way of starting one: a hybrid application
 * (`connectMicroservice` + `startAllMicroservices` + `listen`, @EventPattern handlers, ClientKafkaExactlyOnce
 * behind HTTP), a microservice (`createMicroservice` + `listen`), and an application with an @IdempotentHandler
 * and the EventPublisher behind HTTP; and consumer-app in both its transports. Each must start while the broker
 * is stopped (the broker is started again only after every one of them started: a start that waited for Kafka
 * would never end), serve HTTP and a health check that is down and names Kafka, spool what it publishes, and,
 * once Kafka is back, join its group and handle each event once. The health check is wired without terminus.
 */
describe('library: Kafka away at boot', () => {
  const { processes } = processSuite();
  const prefix = `${uniqueTopic('away')}.`;
  const dir = schemasDirectory('away', { 'entry.v1.avsc': ENTRY });
  let databaseUrl: string;
  let pool: Pool;
  const apps: Array<INestApplication | INestMicroservice> = [];

  /** The module of one kind of application: its own group, spool and transactional ids; the same topics. */
  function appModule(kind: Kind, label: string = kind): Type<unknown> {
    const topic = `away.${kind}`;

    @Injectable()
    class Handled {
      async record(entry: Entry, ctx: EventContext): Promise<void> {
        await ctx.manager.query('INSERT INTO handled (app, entry_id) VALUES ($1, $2)', [label, entry.entryId]);
      }
    }

    @Controller()
    class EntriesController {
      constructor(private readonly handled: Handled) {}
      @EventPattern(topic)
      async onEntry(@Payload() entry: Entry, @Ctx() ctx: EventContext): Promise<void> {
        await this.handled.record(entry, ctx);
      }
    }

    @Injectable()
    class EntriesHandler {
      constructor(private readonly handled: Handled) {}
      @IdempotentHandler({ topic, schema: 'test.ledger.Entry' })
      async onEntry(entry: Entry, ctx: EventContext): Promise<void> {
        await this.handled.record(entry, ctx);
      }
    }

    /** Health without terminus: the indicator returns `down` (it does not throw); the controller answers 503. */
    @Controller('health')
    class HealthController {
      constructor(private readonly kafka: KafkaHealthIndicator) {}
      @Get()
      async check() {
        const result = await this.kafka.isHealthy('kafka');
        if (result.kafka.status === 'down') throw new ServiceUnavailableException(result);
        return result;
      }
    }

    @Controller('entries')
    class PublishController {
      constructor(
        private readonly publisher: EventPublisher,
        @Inject('ENTRIES') private readonly client: ClientProxy,
      ) {}
      @Post()
      @HttpCode(202)
      async publish(@Body() body: { topic: string; entry: Entry }) {
        const options = { key: body.entry.account, messageId: `msg-${body.entry.entryId}` };
        if (kind === 'hybrid') return lastValueFrom(this.client.emit(body.topic, { value: body.entry, ...options }));
        return this.publisher.publish(body.topic, body.entry, options);
      }
    }

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 6 } }),
        KafkaExactlyOnceModule.forRoot({
          isGlobal: true,
          kafka: { clientId: `away-${kind}`, brokers: kafkaBrokers() },
          groupId: `${prefix}${label}`,
          transactionalIdPrefix: `away-${kind}`,
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: Object.fromEntries(KINDS.map((k) => [`away.${k}`, { schema: 'test.ledger.Entry' }])),
          consumer: { sessionTimeout: 6000 },
          publisher: { spool: { directory: mkdtempSync(join(tmpdir(), `keo-away-${kind}-spool-`)) }, sendTimeoutMs: 2000 },
        }),
        ClientsModule.registerAsync([clientKafkaExactlyOnce('ENTRIES')]),
      ],
      controllers: kind === 'handler' ? [HealthController, PublishController] : kind === 'hybrid' ? [HealthController, PublishController, EntriesController] : [EntriesController],
      providers: [Handled, ...(kind === 'handler' ? [EntriesHandler] : [KafkaExactlyOnceServer])],
    })
    class AwayModule {}
    return AwayModule;
  }

  const loggers = new Map<Kind, CapturingLogger>(KINDS.map((k) => [k, new CapturingLogger({ logLevels: ['warn', 'error'] })]));
  const urls = new Map<Kind, string>();

  /** Starts one kind of application the way the docs show it. */
  async function start(kind: Kind, label: string = kind): Promise<INestApplication | INestMicroservice> {
    const logger = loggers.get(kind)!;
    if (kind === 'microservice') {
      const app = await NestFactory.createMicroservice<AsyncMicroserviceOptions>(appModule(kind) as never, {
        inject: [KafkaExactlyOnceServer],
        useFactory: (server: KafkaExactlyOnceServer) => ({ strategy: server }),
        logger,
      });
      apps.push(app);
      await app.listen();
      return app;
    }
    const app = await NestFactory.create(appModule(kind, label), { logger });
    apps.push(app);
    if (kind === 'hybrid') {
      app.connectMicroservice({ strategy: app.get(KafkaExactlyOnceServer) });
      await app.startAllMicroservices();
    }
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address() as { port: number };
    urls.set(kind, `http://127.0.0.1:${address.port}`);
    return app;
  }

  const handled = async () => (await pool.query('SELECT app, entry_id, count(*)::int AS n FROM handled GROUP BY app, entry_id ORDER BY app, entry_id')).rows as Array<{ app: string; entry_id: string; n: number }>;
  const post = async (kind: Kind, topic: Kind, entryId: string) => {
    const response = await fetch(`${urls.get(kind)}/entries`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ topic: `away.${topic}`, entry: { entryId, account: `acct-${topic}`, amount: 1 } }) });
    return { status: response.status, body: (await response.json()) as { status?: string } };
  };

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('away');
    pool = new Pool({ connectionString: databaseUrl, max: 2 });
    await pool.query('CREATE TABLE handled (seq bigserial PRIMARY KEY, app text NOT NULL, entry_id text NOT NULL)');
    await createTopics(testKafka(), KINDS.map((k) => `${prefix}away.${k}`), 2);
  });

  afterAll(async () => {
    kafkaControl('start');
    for (const app of apps.reverse()) await app.close().catch(() => undefined);
    await pool?.end();
  });

  it('every way of starting starts, serves HTTP and health (down, naming Kafka) and spools; once Kafka is back each consumer joins and handles each event once', async () => {
    const consumerApps = await Promise.all(['default', 'microservice'].map((transport) => createConsumerAppScope(`away-${transport}`)));
    kafkaControl('stop');
    try {
      const started: Partial<Record<Kind, INestApplication | INestMicroservice>> = {};
      for (const kind of KINDS) started[kind] = await start(kind);
      // consumer-app, whose demo topics do not exist yet: it creates them when Kafka is back.
      const children = await Promise.all(
        consumerApps.map((scope, i) => startConsumerApp(processes, scope, i === 1 ? { CONSUMER_APP_TRANSPORT: 'microservice' } : {}, { waitForAssignment: false })),
      );

      for (const kind of ['hybrid', 'handler'] as const) {
        const health = await fetch(`${urls.get(kind)}/health`);
        expect(health.status).toBe(503);
        const body = (await health.json()) as { kafka: { status: string; message: string; consumer: string } };
        expect(body.kafka).toMatchObject({ status: 'down', consumer: 'connecting' });
        expect(body.kafka.message).toMatch(/kafka/i);
      }
      for (const child of children) {
        const health = await fetch(`http://127.0.0.1:${consumerAppPort(child)}/health`);
        expect(health.status).toBe(503);
        expect(JSON.stringify(await health.json())).toMatch(/kafka/i);
      }
      const micro = started.microservice!.get(KafkaExactlyOnceLifecycle).startStatus();
      expect(micro.phase).toBe('connecting');
      expect(micro.lastError).toBeDefined();

      // Publishes while Kafka is away: spooled, through ClientKafkaExactlyOnce (hybrid) and the EventPublisher.
      for (const [via, topic, id] of [['hybrid', 'hybrid', 'h1'], ['hybrid', 'microservice', 'm1'], ['handler', 'handler', 'p1']] as const) {
        const answer = await post(via, topic, id);
        expect(answer).toMatchObject({ status: 202, body: { status: 'spooled' } });
      }
      // Each start said what it waits for, once, as a warning (not an error).
      for (const kind of KINDS) {
        const lines = loggers.get(kind)!.lines.filter((l) => l.context === 'KafkaExactlyOnce');
        expect(lines.filter((l) => l.level === 'warn' && /Kafka is not available .*the consumer of group .* starts when Kafka answers/.test(l.message))).toHaveLength(1);
        expect(lines.filter((l) => l.level === 'error')).toEqual([]);
      }
      expect(await handled()).toEqual([]);

      kafkaControl('start');
      await Promise.all(KINDS.map((kind) => started[kind]!.get(KafkaExactlyOnceLifecycle).whenRunning(120000)));
      await waitUntil(async () => (await handled()).length === 3, 120000, 'the three spooled events handled');
      expect(await handled()).toEqual([
        { app: 'handler', entry_id: 'p1', n: 1 },
        { app: 'hybrid', entry_id: 'h1', n: 1 },
        { app: 'microservice', entry_id: 'm1', n: 1 },
      ]);
      for (const kind of ['hybrid', 'handler'] as const) {
        const health = (await (await fetch(`${urls.get(kind)}/health`)).json()) as { kafka: { status: string; consumer: string } };
        expect(health.kafka).toMatchObject({ status: 'up', consumer: 'running' });
      }
      // consumer-app: its topics created, its consumer joined, its health up.
      for (const child of children) {
        await child.waitForLog(/assigned .*payments\.requested\[/, 120000);
        await waitUntil(async () => (await fetch(`http://127.0.0.1:${consumerAppPort(child)}/health`)).status === 200, 60000, `${child.name} healthy`);
      }
    } finally {
      kafkaControl('start');
    }
  }, 360000);

  it("with Kafka up, HTTP and health do not wait for the consumer's join (held here by a member of the group that is busy)", async () => {
    const kafka = testKafka();
    const topic = `${prefix}away.hybrid`;
    // A record of the topic, written with the library's wire format from outside (EventCodec).
    const codec = EventCodec.fromDirectory(dir);
    const producer = kafka.producer({ idempotent: true });
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: [codec.encode('test.ledger.Entry', { entryId: 'held-1', account: 'acct-held', amount: 1 }, { key: 'acct-held', messageId: 'msg-held-1' })] });
    await producer.disconnect();
    // A member of the group busy with that record: the group's next rebalance waits for it (up to its 60 s
    // rebalance timeout), so a new member's join cannot end before it is released.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let busy!: () => void;
    const isBusy = new Promise<void>((resolve) => (busy = resolve));
    const holder = kafka.consumer({ groupId: `${prefix}held`, sessionTimeout: 30000, rebalanceTimeout: 60000 });
    await holder.connect();
    await holder.subscribe({ topic, fromBeginning: true });
    await holder.run({ eachMessage: async () => { busy(); await released; } });
    try {
      await isBusy;
      const app = await start('hybrid', 'held'); // listen() resolved: the join is still held
      const lifecycle = app.get(KafkaExactlyOnceLifecycle);
      expect(lifecycle.startStatus()).toEqual({ phase: 'starting' });
      const health = await fetch(`${urls.get('hybrid')}/health`);
      expect(health.status).toBe(200);
      expect(((await health.json()) as { kafka: { consumer: string } }).kafka.consumer).toBe('starting');
      release();
      await holder.disconnect();
      await lifecycle.whenRunning(120000);
      await waitUntil(async () => (await handled()).some((r) => r.app === 'held'), 60000, 'the held consumer handling');
      expect((await handled()).filter((r) => r.app === 'held').map((r) => [r.entry_id, r.n])).toContainEqual(['held-1', 1]);
    } finally {
      release();
      await holder.disconnect().catch(() => undefined);
    }
  }, 180000);

  it('a broker that is stalled (accepts connections, answers nothing) does not hold the boot either; the consumer starts when it answers', async () => {
    const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
    @Injectable()
    class StalledHandler {
      @IdempotentHandler({ topic: 'away.handler', schema: 'test.ledger.Entry' })
      async onEntry(entry: Entry, ctx: EventContext): Promise<void> {
        await ctx.manager.query('INSERT INTO handled (app, entry_id) VALUES ($1, $2)', ['stalled', entry.entryId]);
      }
    }
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 2 } }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'away-stalled', brokers: kafkaBrokers() },
          groupId: `${prefix}stalled`,
          transactionalIdPrefix: 'away-stalled',
          schemas: { directory: dir },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000 },
        }),
      ],
      providers: [StalledHandler],
    })
    class StalledModule {}
    const app = await NestFactory.create(StalledModule, { logger });
    apps.push(app);
    kafkaFreeze('SIGSTOP');
    try {
      await app.init(); // resolves while the broker is still frozen
      expect(app.get(KafkaExactlyOnceLifecycle).startStatus().phase).toBe('connecting');
      expect(logger.lines.filter((l) => /Kafka has not answered within 10 s: the application starts without waiting/.test(l.message))).toHaveLength(1);
    } finally {
      kafkaFreeze('SIGCONT');
    }
    await app.get(KafkaExactlyOnceLifecycle).whenRunning(120000);
    // It consumes from the beginning: the handler app's event of the first test is handled by this group too.
    await waitUntil(async () => (await handled()).some((r) => r.app === 'stalled'), 60000, 'the stalled-boot consumer handling');
    expect((await handled()).filter((r) => r.app === 'stalled')).toEqual([{ app: 'stalled', entry_id: 'p1', n: 1 }]);
  }, 180000);

  it('with Kafka up, a wrong configuration still fails the boot: an input topic that does not exist', async () => {
    @Injectable()
    class MissingTopicHandler {
      @IdempotentHandler({ topic: 'away.missing', schema: 'test.ledger.Entry' })
      async onEntry(): Promise<void> {}
    }
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 2 } }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'away-missing', brokers: kafkaBrokers() },
          groupId: `${prefix}missing`,
          transactionalIdPrefix: 'away-missing',
          schemas: { directory: dir },
          topicPrefix: prefix,
        }),
      ],
      providers: [MissingTopicHandler],
    })
    class MissingTopicModule {}
    const app = await NestFactory.create(MissingTopicModule, { logger: false, abortOnError: false });
    await expect(app.init()).rejects.toThrow(`Kafka topic(s) ${prefix}away.missing do not exist`);
    await app.close().catch(() => undefined);
  });
});
