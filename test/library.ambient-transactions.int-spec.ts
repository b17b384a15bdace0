import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ClsModule } from 'nestjs-cls';
import { ClsPluginTransactional, Transactional, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Kafka } from 'kafkajs';
import { join } from 'path';
import { KafkaExactlyOnceModule, Outbox, OutboxWriteError, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
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
    await queryDatabase(databaseUrl, 'CREATE TABLE requests (id text PRIMARY KEY, amount int); CREATE TABLE cls_ledger (note_id text, amount int)');
    await createTopics(kafka, [`${prefix}notes`], 1);
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
});
