import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { DEAD_LETTER_HEADERS, EventContext, IdempotentHandler, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { createFaultProxy } = require('../scripts/verify/fault-proxy');

const TASK = { type: 'record', name: 'Task', namespace: 'test.slow', fields: [{ name: 'id', type: 'string' }, { name: 'kind', type: 'string' }] };

/** Timeouts of seconds: a unit of work's session idle 4 s at most, a statement 1.5 s, a handler call 2.5 s. */
const TIMEOUTS = {
  transactionTimeoutMs: 10000,
  inbox: { idleInTransactionTimeoutMs: 4000, statementTimeoutMs: 1500, lockTimeoutMs: 500 },
  consumer: { handlerTimeoutMs: 2500, sessionTimeout: 6000, maxRetryDelayMs: 1000, stallAfterMs: 5000 },
  isolation: { maxFailures: 2, retryDelayMs: 100 },
};

@Injectable()
class TasksHandler {
  readonly calls = new Map<string, number>();
  busySince?: number;
  busyUntil?: number;

  @IdempotentHandler({ topic: 'tasks', schema: 'test.slow.Task', retry: { attempts: 1 } })
  async onTask(task: { id: string; kind: string }, ctx: EventContext): Promise<void> {
    this.calls.set(task.id, (this.calls.get(task.id) ?? 0) + 1);
    // What one record can do to its handler and to PostgreSQL:
    if (task.kind === 'slow') await new Promise((r) => setTimeout(r, 6000)); // outside PostgreSQL, past the idle timeout
    if (task.kind === 'long-statement') await ctx.manager.query('SELECT pg_sleep(600)');
    if (task.kind === 'out-of-memory') await ctx.manager.query(`DO $$ BEGIN RAISE EXCEPTION 'out of memory (this record)' USING ERRCODE = '53200'; END $$`);
    // What node-postgres reports when the backend running the statement dies (a statement that crashes PostgreSQL).
    if (task.kind === 'crashes-backend') throw new Error('Connection terminated unexpectedly');
    if (task.kind === 'own-kafka-client') throw Object.assign(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:1 (the handler\'s own Kafka client)'), { name: 'KafkaJSConnectionError' });
    if (task.kind === 'sql') await ctx.manager.query('SELECT pg_sleep(0.3)');
    if (task.kind === 'busy') {
      this.busySince = Date.now();
      await new Promise((r) => setTimeout(r, 2000)); // long, but within the handler's deadline
      this.busyUntil = Date.now();
    }
    await ctx.manager.query('INSERT INTO applied (id, times) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET times = applied.times + 1', [task.id]);
  }
}

function tasksModule(prefix: string, databaseUrl: string, schemas: string) {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
      KafkaExactlyOnceModule.forRoot({
        kafka: { clientId: 'slow-records', brokers: kafkaBrokers() },
        driver: testDriver(),
        groupId: `${prefix}group`,
        transactionalIdPrefix: 'slow-records',
        schemas: { directory: schemas },
        topicPrefix: prefix,
        ...TIMEOUTS,
      }),
    ],
    providers: [TasksHandler],
  })
  class TasksModule {}
  return TasksModule;
}

/**
 * Nothing loops forever: a record whose handler overruns, whose statement runs long, exhausts PostgreSQL's
 * resources or crashes its backend, or whose handler's own Kafka client fails, ends dead-lettered (naming the
 * handler or the error) after `isolation.maxFailures` failures alone, and the records behind it are handled.
 * Before, each of them was retried without end (the overrun as PostgreSQL's fault, after the idle timeout ended
 * the session; the statement with no limit at all). And a PostgreSQL that stops answering mid-unit (a blackhole)
 * no longer hangs a partition: the library gives up its statements and starts over.
 */
describe('library: records that are slow or bring their own faults', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule | undefined;
  const dir = schemasDirectory('slow', { 'task.avsc': TASK });
  const schema = SchemaRegistry.fromDirectory(dir).current('test.slow.Task');
  const task = (id: string, kind: string) => ({ key: 'one-key', value: encodeSingleObject(schema, { id, kind }), headers: { 'message-id': id } });

  beforeAll(() => {
    kafka = testKafka();
  });

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
  });

  it('dead-letters each after its failures alone and handles the records behind it, once', async () => {
    const prefix = `${uniqueTopic('slow')}.`;
    await createTopics(kafka, [`${prefix}tasks`], 1);
    const databaseUrl = await createSuiteDatabase('slow_records');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY, times int NOT NULL)');
    const bad = ['slow', 'long-statement', 'out-of-memory', 'crashes-backend', 'own-kafka-client'];
    // One key, one partition: each bad record stands in front of a good one.
    await sendRaw(kafka, `${prefix}tasks`, bad.flatMap((kind, i) => [task(`ok-${i}`, 'ok'), task(kind, kind)]).concat([task('ok-last', 'ok')]));
    moduleRef = await startLibraryModule(tasksModule(prefix, databaseUrl, dir));
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT 1 FROM applied WHERE id = 'ok-last'`)).length === 1, 150000, 'the last record handled');
    const dlq = await readTopic(kafka, `${prefix}tasks.dlq`, { until: (r) => r.length >= bad.length, timeoutMs: 30000 });
    expect(dlq.map((r) => r.headers['message-id'])).toEqual(bad);
    expect(dlq.every((r) => r.headers[DEAD_LETTER_HEADERS.reason] === 'handler-failed')).toBe(true);
    const errors = Object.fromEntries(dlq.map((r) => [r.headers['message-id'], `${r.headers[DEAD_LETTER_HEADERS.errorClass]}: ${r.headers[DEAD_LETTER_HEADERS.errorMessage]}`]));
    expect(errors.slow).toMatch(/^HandlerTimeoutError: TasksHandler\.onTask did not finish within 2500 ms on .*tasks\[0\]@1 \(message slow\)/);
    expect(errors['long-statement']).toMatch(/statement timeout/);
    expect(errors['out-of-memory']).toMatch(/out of memory \(this record\)/);
    expect(errors['crashes-backend']).toMatch(/Connection terminated unexpectedly/);
    expect(errors['own-kafka-client']).toMatch(/^KafkaJSConnectionError: /);
    // Every good record once; nothing the overrunning call wrote late was kept.
    const applied = await queryDatabase(databaseUrl, 'SELECT id, times FROM applied ORDER BY id');
    expect(applied).toEqual([...bad.map((_, i) => ({ id: `ok-${i}`, times: 1 })), { id: 'ok-last', times: 1 }]);
    await new Promise((r) => setTimeout(r, 4000)); // the overrunning calls end meanwhile
    expect(await queryDatabase(databaseUrl, `SELECT id FROM applied WHERE id = 'slow'`)).toEqual([]);
    // The overrunning handler ran at most once per unit of work: with its chunk, then alone once per failure.
    expect(moduleRef.get(TasksHandler).calls.get('slow')).toBeLessThanOrEqual(1 + TIMEOUTS.isolation.maxFailures);
  });

  it("does not hold other partitions' next records while one partition's unit of work runs long", async () => {
    const prefix = `${uniqueTopic('busy')}.`;
    await createTopics(kafka, [`${prefix}tasks`], 2);
    const databaseUrl = await createSuiteDatabase('busy_partition');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY, times int NOT NULL)');
    moduleRef = await startLibraryModule(tasksModule(prefix, databaseUrl, dir));
    const on = (partition: number, id: string, kind: string) => ({ ...task(id, kind), key: `key-${partition}`, partition });
    const applied = async (id: string) => (await queryDatabase(databaseUrl, 'SELECT 1 FROM applied WHERE id = $1', [id])).length === 1;
    await sendRaw(kafka, `${prefix}tasks`, [on(0, 'warm-0', 'ok'), on(1, 'warm-1', 'ok')]);
    await waitUntil(async () => (await applied('warm-0')) && (await applied('warm-1')), 60000, 'both partitions handled a record');
    const handler = moduleRef.get(TasksHandler);
    await sendRaw(kafka, `${prefix}tasks`, [on(0, 'busy', 'busy')]);
    await waitUntil(async () => handler.busySince !== undefined, 30000, "partition 0's long call started");
    // Published while partition 0's unit runs: fetched, handled and committed before it ends, one after the other.
    for (const id of ['p1-a', 'p1-b', 'p1-c']) {
      await sendRaw(kafka, `${prefix}tasks`, [on(1, id, 'ok')]);
      await waitUntil(() => applied(id), 30000, `${id} handled`);
    }
    const p1Done = Date.now();
    await waitUntil(() => applied('busy'), 30000, "partition 0's long record handled");
    expect(handler.busyUntil).toBeDefined();
    expect(p1Done).toBeLessThan(handler.busyUntil!);
    expect(await queryDatabase(databaseUrl, 'SELECT DISTINCT times FROM applied')).toEqual([{ times: 1 }]);
  });

  it('gives up statements to a PostgreSQL that stops answering (a blackhole), and handles every record once after', async () => {
    const prefix = `${uniqueTopic('blackhole')}.`;
    await createTopics(kafka, [`${prefix}tasks`], 1);
    const databaseUrl = await createSuiteDatabase('blackhole');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY, times int NOT NULL)');
    const target = new URL(databaseUrl);
    const proxy = await createFaultProxy({ listenPort: 0, targetHost: target.hostname, targetPort: Number(target.port || 5432) });
    try {
      const viaProxy = new URL(databaseUrl);
      viaProxy.port = String(proxy.port);
      moduleRef = await startLibraryModule(tasksModule(prefix, viaProxy.toString(), dir));
      const ids = Array.from({ length: 12 }, (_, i) => `t-${i}`);
      await sendRaw(kafka, `${prefix}tasks`, ids.map((id) => task(id, 'sql')));
      await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length >= 1, 60000, 'a first record handled');
      // Mid-unit: the connections stay open, nothing comes back. They are dead for good afterwards.
      proxy.setMode('blackhole');
      await new Promise((r) => setTimeout(r, 5000));
      proxy.setMode('pass');
      await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length === ids.length, 90000, 'every record handled');
      expect(await queryDatabase(databaseUrl, 'SELECT DISTINCT times FROM applied')).toEqual([{ times: 1 }]);
    } finally {
      await moduleRef?.close();
      moduleRef = undefined;
      await proxy.close();
    }
  });
});
