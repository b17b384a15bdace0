import { Injectable, Module, OnModuleInit } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Kafka } from 'kafkajs';
import { join } from 'path';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, NonRetriableHandlerError, Outbox, OutboxWriteError, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, REPO_ROOT, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { CapturingLogger, queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.cls', fields: [{ name: 'id', type: 'string' }, { name: 'amount', type: 'int' }] };

/** A service written for @nestjs-cls/transactional: its row through TransactionHost, its event through the outbox. */
@Injectable()
class RequestsService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly outbox: Outbox,
  ) {}

  @Transactional()
  async request(id: string, amount: number, rollBack = false): Promise<string> {
    await this.txHost.tx.query('INSERT INTO requests (id, amount) VALUES ($1, $2)', [id, amount]);
    const { messageId } = await this.outbox.add('notes', { id, amount }, { key: id });
    if (rollBack) throw new Error('rolled back on purpose');
    return messageId;
  }

  /** The same write outside any transaction. */
  async outside(id: string): Promise<void> {
    await this.outbox.add('notes', { id, amount: 1 }, { key: id });
  }
}

/**
 * `@nestjs-cls/transactional` (its TypeORM adapter): `Outbox.add` without an EntityManager joins the transaction
 * of `@Transactional()` service code, and a handler's unit of work is what `TransactionHost.tx` gives the services
 * the handler calls, so that their writes are exactly once, across a SIGKILL between the two commits too.
 */
describe('library: the transaction the application already opened (@nestjs-cls/transactional)', () => {
  const processes = new ProcessGroup();
  let kafka: Kafka;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('cls')}.`;
  const dir = schemasDirectory('cls', { 'note.avsc': NOTE });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('cls');
    await queryDatabase(databaseUrl, 'CREATE TABLE requests (id text PRIMARY KEY, amount int); CREATE TABLE cls_ledger (note_id text, amount int); CREATE TABLE cls_applied (app text, note_id text)');
    await createTopics(kafka, [`${prefix}notes`, `${prefix}early.notes`, `${prefix}other.notes`], 1);
  });

  afterAll(async () => {
    await processes.killAll();
  });

  it('writes the outbox event in the @Transactional() method\'s transaction: both commit, both roll back, and outside one it refuses', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        ClsModule.forRoot({ global: true, plugins: [new ClsPluginTransactional({ imports: [TypeOrmModule], adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }) })] }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'cls-outbox', brokers: kafkaBrokers() },
          driver: testDriver(),
          transactionalIdPrefix: `${prefix}outbox`,
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { notes: { schema: 'test.cls.Note' } },
          outbox: { relay: false },
        }),
      ],
      providers: [RequestsService],
    })
    class OutboxApp {}
    const moduleRef: TestingModule = await startLibraryModule(OutboxApp);
    try {
      const service = moduleRef.get(RequestsService);
      const committed = await service.request('r-1', 10);
      await expect(service.request('r-2', 20, true)).rejects.toThrow('rolled back on purpose');
      const refused = await service.outside('r-3').then(() => undefined, (err: unknown) => err);
      expect(refused).toBeInstanceOf(OutboxWriteError);
      expect(refused).toMatchObject({ refusal: 'not-in-transaction' });
      expect((refused as Error).message).toMatch(/needs a transaction of @nestjs-cls\/transactional open here .* nothing was written/);

      expect(await queryDatabase(databaseUrl, 'SELECT id FROM requests ORDER BY id')).toEqual([{ id: 'r-1' }]);
      expect(await queryDatabase(databaseUrl, 'SELECT id, aggregateid::text AS key FROM kafka_eo_outbox ORDER BY position')).toEqual([{ id: committed, key: '\\x722d31' }]);
    } finally {
      await moduleRef.close();
    }
  });

  it('lends a handler\'s unit of work to TransactionHost: a service\'s write commits with it, once, across a SIGKILL between the PostgreSQL and the Kafka commit', async () => {
    const env = { KAFKA_BROKERS: kafkaBrokers().join(','), DATABASE_URL: databaseUrl, CLS_APP_PREFIX: prefix, SCHEMAS_DIR: dir };
    const note = SchemaRegistry.fromDirectory(dir).current('test.cls.Note');
    await sendRaw(kafka, `${prefix}notes`, [1, 2, 3, 4, 5].map((n) => ({ key: `n-${n}`, value: encodeSingleObject(note, { id: `n-${n}`, amount: n }), headers: { 'message-id': `m-${n}` } })));
    const first = processes.add(new AppProcess('cls-app-1', 'test/fixtures/cls-app.js', { ...env, KAFKA_EO_FAULT: 'after-db-commit:1' }, join(REPO_ROOT, 'test-logs', 'cls-app-1.log')));
    await first.waitForExit(90000);
    expect(first.logs()).toContain('fault injection: SIGKILL at after-db-commit #1');
    // The unit's PostgreSQL transaction committed the service's writes; its Kafka transaction did not.
    const before = await queryDatabase<{ n: number }>(databaseUrl, 'SELECT count(*)::int AS n FROM cls_ledger');
    expect(before[0].n).toBeGreaterThan(0);

    const second = processes.add(new AppProcess('cls-app-2', 'test/fixtures/cls-app.js', env, join(REPO_ROOT, 'test-logs', 'cls-app-2.log')));
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT DISTINCT note_id FROM cls_ledger')).length === 5, 60000, 'every note applied');
    await second.waitForLog(/replayed from the inbox/, 30000);
    expect(await queryDatabase(databaseUrl, 'SELECT note_id, count(*)::int AS n FROM cls_ledger GROUP BY note_id ORDER BY note_id')).toEqual([1, 2, 3, 4, 5].map((n) => ({ note_id: `n-${n}`, n: 1 })));
    expect(second.logs()).toMatch(/@nestjs-cls\/transactional found: handlers lend it their unit of work's transaction/);
    await second.stop();
  });
  /** Notes through a handler that calls a `@Transactional()` service; `app` tells the tests' rows apart. */
  function notesApp(app: string) {
    @Injectable()
    class AppliedService {
      constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

      @Transactional()
      async apply(noteId: string): Promise<void> {
        await this.txHost.tx.query('INSERT INTO cls_applied (app, note_id) VALUES ($1, $2)', [app, noteId]);
      }
    }

    @Injectable()
    class NotesHandler {
      constructor(private readonly applied: AppliedService) {}

      @IdempotentHandler({ topic: 'notes', schema: 'test.cls.Note', retry: { attempts: 3, initialDelayMs: 20 } })
      async onNote(event: { id: string; amount: number }, ctx: EventContext): Promise<void> {
        await this.applied.apply(event.id);
        // After the service's write: a record that fails once (its unit rolls back, then it runs again), and one
        // that is refused for good (dead-lettered: its attempts roll back).
        if (event.amount === 2 && ctx.attempt === 1) throw new Error('fails once on purpose');
        if (event.amount < 0) throw new NonRetriableHandlerError('refused on purpose');
      }
    }
    return { AppliedService, NotesHandler };
  }

  const sendNotes = (topic: string, notes: Array<[string, number]>) => {
    const note = SchemaRegistry.fromDirectory(dir).current('test.cls.Note');
    return sendRaw(kafka, topic, notes.map(([id, amount]) => ({ key: id, value: encodeSingleObject(note, { id, amount }), headers: { 'message-id': `${topic}:${id}` } })));
  };
  const applied = (app: string) => queryDatabase<{ note_id: string; n: number }>(databaseUrl, 'SELECT note_id, count(*)::int AS n FROM cls_applied WHERE app = $1 GROUP BY note_id ORDER BY note_id', [app]);

  it('an Outbox.add tried before the application booted (a provider\'s onModuleInit) does not keep handlers from lending their transaction: a service\'s write rolls back with the unit and applies once', async () => {
    const { AppliedService, NotesHandler } = notesApp('early');

    @Injectable()
    class EarlyWriter implements OnModuleInit {
      early?: unknown;
      constructor(private readonly outbox: Outbox) {}

      async onModuleInit(): Promise<void> {
        this.early = await this.outbox.add('notes', { id: 'early', amount: 0 }, { key: 'early' }).then(
          () => 'written',
          (err: unknown) => err,
        );
      }
    }

    // The set-up docs/outbox.md shows, as it is there.
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        ClsModule.forRoot({
          global: true,
          plugins: [
            new ClsPluginTransactional({
              imports: [TypeOrmModule],
              adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }),
            }),
          ],
        }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'cls-early', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}early.group`,
          transactionalIdPrefix: `${prefix}early`,
          schemas: { directory: dir },
          topicPrefix: `${prefix}early.`,
          topics: { notes: { schema: 'test.cls.Note' } },
          consumer: { sessionTimeout: 6000 },
          outbox: { relay: false },
        }),
      ],
      providers: [AppliedService, NotesHandler, EarlyWriter],
    })
    class EarlyApp {}
    const moduleRef = await startLibraryModule(EarlyApp);
    try {
      // Before the migrations ran, the outbox refuses (nothing written), whatever it found of the application.
      expect(moduleRef.get(EarlyWriter).early).toBeInstanceOf(OutboxWriteError);
      await sendNotes(`${prefix}early.notes`, [['e-1', 1], ['e-2', 2], ['e-3', -3], ['e-4', 4]]);
      await readTopic(kafka, `${prefix}early.notes.dlq`, { until: (r) => r.length >= 1, timeoutMs: 60000 });
      await waitUntil(async () => (await applied('early')).some((r) => r.note_id === 'e-4'), 60000, 'e-4 applied');
      // e-2's first attempt and e-3's attempts were rolled back with the unit; e-1, e-2 and e-4 applied once each.
      expect(await applied('early')).toEqual([
        { note_id: 'e-1', n: 1 },
        { note_id: 'e-2', n: 1 },
        { note_id: 'e-4', n: 1 },
      ]);
    } finally {
      await moduleRef.close();
    }
  });

  it('refuses a unit whose join does not take (the TransactionHost is for another DataSource): the handler does not run, nothing commits outside the unit, and the log names the cause and the fix', async () => {
    const { AppliedService, NotesHandler } = notesApp('other');
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        // The same database through a second DataSource: what the application's TransactionHost is for.
        TypeOrmModule.forRoot({ name: 'ledger', type: 'postgres', url: databaseUrl }),
        ClsModule.forRoot({
          global: true,
          plugins: [new ClsPluginTransactional({ imports: [TypeOrmModule], adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken('ledger') }) })],
        }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'cls-other', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}other.group`,
          transactionalIdPrefix: `${prefix}other`,
          schemas: { directory: dir },
          topicPrefix: `${prefix}other.`,
          consumer: { sessionTimeout: 6000, maxRetryDelayMs: 1000 },
        }),
      ],
      providers: [AppliedService, NotesHandler],
    })
    class OtherApp {}
    const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
    const moduleRef = await startLibraryModule(OtherApp, logger);
    try {
      await sendNotes(`${prefix}other.notes`, [['o-1', 1]]);
      const refusal = () => logger.lines.filter((l) => /infrastructure fault/.test(l.message) && /TransactionHost/.test(l.message));
      await waitUntil(async () => refusal().length >= 2, 60000, 'the unit refused twice');
      expect(refusal()[0].message).toMatch(/another DataSource than the module's.*ambientTransactions/);
      // Health names it on the partition.
      const partition = moduleRef.get(KafkaExactlyOnceLifecycle).status()?.partitions?.find((p) => p.topic === `${prefix}other.notes`);
      expect(partition?.lastError).toMatchObject({ kind: 'infrastructure', message: expect.stringMatching(/cannot be lent to @nestjs-cls\/transactional.*getDataSourceToken\(\)/) });
      // Refused before the handler ran, every time: nothing committed outside the unit, nothing dead-lettered.
      expect(await applied('other')).toEqual([]);
      expect(await queryDatabase(databaseUrl, "SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE topic = $1", [`${prefix}other.notes`])).toEqual([{ n: 0 }]);
    } finally {
      await moduleRef.close();
    }
  });
});
