import { Injectable, Module, type Type } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { join } from 'path';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule, KafkaHealthIndicator, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { partitionTransactionalId } from 'kafka-exactly-once/transaction/transactional-ids';
import { DeliveredOutputs } from 'kafka-exactly-once/engine/delivered-outputs';
import type { OutputRecord } from 'kafka-exactly-once/engine/output-record';
import { runInboxMigrations } from 'kafka-exactly-once/inbox/inbox-migrator';
import { recordDigest } from 'kafka-exactly-once/kafkajs';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { leaveHangingTransaction } from './support/hanging';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { CapturingLogger, queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { filingModule } = require('./fixtures/filing-app.js') as { filingModule(settings: { label: string; prefix: string; schemas: string; brokers: string[]; databaseUrl: string }): unknown };

const NOTE = { type: 'record', name: 'Note', namespace: 'test.hanging', fields: [{ name: 'id', type: 'string' }] };
const FILED = { type: 'record', name: 'NoteFiled', namespace: 'test.hanging', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.hanging.Note' })
  async onNote(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
  }
}

/**
 * A hanging transaction: offsets of the group pending in a transaction its coordinator no longer settles (after a
 * broker SIGKILL, with KafkaJS's transaction protocol v1). The partition cannot start; it must say so in the log
 * and in health, naming the transactional id and the commands an operator runs, and the member must stay in the
 * group while it waits. Here another producer holds the group's offsets in a transaction open for 10 minutes,
 * past the module's transaction timeout, which this group's InitProducerId cannot settle (another id).
 */
describe('library: a hanging transaction holding the committed offset', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('hanging')}.`;
  const group = `${prefix}group`;
  const topic = `${prefix}notes`;
  const dir = schemasDirectory('hanging', { 'note.avsc': NOTE });

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [topic], 1);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('is named in the log and in health with the commands to abort it; the member stays in the group; the partition starts once it is gone', async () => {
    const databaseUrl = await createSuiteDatabase('hanging');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
    const schema = SchemaRegistry.fromDirectory(dir).current('test.hanging.Note');
    await sendRaw(kafka, topic, [{ key: 'k', value: encodeSingleObject(schema, { id: 'n-1' }), headers: { 'message-id': 'n-1' } }]);
    const holderId = `${prefix}holder`;
    const holder = kafka.producer({ transactionalId: holderId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 600000 });
    await holder.connect();
    // On a broker just started, the group's coordinator may still be loading its partition of __consumer_offsets
    // (COORDINATOR_NOT_AVAILABLE, which KafkaJS's TxnOffsetCommit does not retry): the transaction is tried again.
    let txn = await holder.transaction();
    for (let attempt = 1; ; attempt++) {
      try {
        await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '0' }] }] });
        break;
      } catch (err) {
        if (attempt >= 20) throw err;
        await txn.abort().catch(() => undefined);
        await new Promise((r) => setTimeout(r, 500));
        txn = await holder.transaction();
      }
    }

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'hanging-test', brokers: kafkaBrokers() },
          groupId: group,
          transactionalIdPrefix: 'hanging-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          transactionTimeoutMs: 5000,
          inbox: { idleInTransactionTimeoutMs: 5000 },
          consumer: { sessionTimeout: 6000, heartbeatInterval: 1000, stallAfterMs: 8000, maxRetryDelayMs: 2000 },
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}

    try {
      moduleRef = await startLibraryModule(NotesModule);
      const health = moduleRef.get(KafkaHealthIndicator);
      let message = '';
      await waitUntil(
        async () => {
          const result = (await health.isHealthy('kafka')).kafka as { status: string; message?: string };
          message = result.message ?? '';
          return result.status === 'down' && /hanging transaction/.test(message);
        },
        60000,
        'health down, naming the hanging transaction',
      );
      expect(message).toContain(`transactional id ${holderId}`);
      expect(message).toMatch(/kafka-transactions\.sh --bootstrap-server \S+ abort --topic __consumer_offsets --partition \d+ --start-offset \d+/);
      expect(message).toContain(`${topic}[0]`);
      // It waited heartbeating: one member, never kicked out (its id the same before and after the waits).
      const members = async () => withAdmin(kafka, async (admin) => (await admin.describeGroups([group])).groups[0].members.map((m) => m.memberId));
      const before = await members();
      await new Promise((r) => setTimeout(r, 7000)); // past the session timeout (6 s), the partition still waiting
      expect(await members()).toEqual(before);
      expect(before).toHaveLength(1);
      expect(await queryDatabase(databaseUrl, 'SELECT id FROM applied')).toEqual([]);
    } finally {
      await txn.abort();
      await holder.disconnect();
    }
    // The operator's way out (here: the holder aborts): the partition starts, the record is handled, health is up.
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length === 1, 60000, 'the record handled');
    await waitUntil(async () => ((await moduleRef!.get(KafkaHealthIndicator).isHealthy('kafka')).kafka as { status: string }).status === 'up', 30000, 'health up');
  });
});

/**
 * A group whose partition's own producer will be found hanging: its topics, database, the notes `ids` published
 * (each its own message id), and the module of test/fixtures/filing-app.js (each note applied and filed) with a
 * short transaction timeout, so that a hanging transaction is found past it in seconds; `env` runs the same module
 * as a process of its own.
 */
async function filingSetup(label: string, ids: string[]) {
  const kafka = testKafka();
  const prefix = `${uniqueTopic(label)}.`;
  const group = `${prefix}group`;
  const topic = `${prefix}notes`;
  const filed = `${prefix}notes.filed`;
  const archive = `${prefix}notes.archive`;
  const dir = schemasDirectory(label, { 'note.avsc': NOTE, 'filed.avsc': FILED });
  await createTopics(kafka, [topic, filed, archive], 1);
  const databaseUrl = await createSuiteDatabase(label.replace(/-/g, '_'));
  await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
  const schema = SchemaRegistry.fromDirectory(dir).current('test.hanging.Note');
  await sendRaw(kafka, topic, ids.map((id) => ({ key: 'k', value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));
  const FilingModule = filingModule({ label, prefix, schemas: dir, brokers: kafkaBrokers(), databaseUrl }) as Type<unknown>;
  const env = { KAFKA_BROKERS: kafkaBrokers().join(','), DATABASE_URL: databaseUrl, FILING_LABEL: label, FILING_PREFIX: prefix, FILING_SCHEMAS: dir };

  // The partition's own transactional id.
  const own = partitionTransactionalId(label, group, topic, 0);
  return { kafka, group, topic, filed, archive, databaseUrl, own, FilingModule, env };
}

/**
 * The hanging transaction is this partition's own producer's (its transactional id), and its coordinator no
 * longer ends it: the library aborts it on every partition where it is open (the group's offsets and an output
 * partition), past the transaction timeout, and the partition starts. The record is applied once, its output is
 * visible once, the hanging transaction's own record never.
 */
describe('library: a hanging transaction of the partition\'s own producer', () => {
  let moduleRef: TestingModule | undefined;

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('is aborted by the library on every partition where it is open; the record is applied and its output sent once', async () => {
    const { kafka, group, topic, filed, databaseUrl, own, FilingModule } = await filingSetup('hanging-own', ['n-1']);
    // Offset 1 would skip n-1 if the transaction were ever committed.
    const hanging = await leaveHangingTransaction(kafka, own, { groupId: group, topic, partition: 0, offset: '1' }, [{ topic: filed, partition: 0 }]);

    const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
    moduleRef = await startLibraryModule(FilingModule, logger);
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length === 1, 60000, 'the record handled');
    const aborted = logger.lines.find((l) => l.message.startsWith('hanging transaction aborted'));
    expect(aborted?.message).toContain(`"transactionalId":"${own}"`);
    expect(aborted?.message).toContain(`"producerId":"${hanging.producerId}"`);
    expect(aborted?.message).toContain(`${filed}[0]`);
    expect(aborted?.message).toMatch(/__consumer_offsets\[\d+\]/);
    // Read committed: the library's output once, the hanging transaction's record never (it was aborted, and the
    // partition's last stable offset moved past it: the output after it is readable).
    const outputs = await readTopic(kafka, filed, { until: quietAfter(1, 3000), pollIdleMs: 250, timeoutMs: 30000 });
    expect(outputs.map((r) => r.key)).toEqual(['n-1']);
    const raw = await readTopic(kafka, filed, { until: quietAfter(2, 2000), pollIdleMs: 250, readUncommitted: true, timeoutMs: 30000 });
    expect(raw.map((r) => r.key)).toEqual(['hanging', 'n-1']);
    expect(await queryDatabase(databaseUrl, 'SELECT id FROM applied')).toEqual([{ id: 'n-1' }]);
    await waitUntil(async () => ((await moduleRef!.get(KafkaHealthIndicator).isHealthy('kafka')).kafka as { status: string }).status === 'up', 30000, 'health up');
  });
});

/**
 * What a broker crash can leave: both records handled and their outputs committed, with the offsets, by the
 * partition's own producer (their commit marker written on the output partition), then the group's offset behind
 * both and a transaction of that producer holding the offset past them pending on the offsets' partition, which no
 * coordinator ends.
 */
async function handledThenHanging(setup: Awaited<ReturnType<typeof filingSetup>>): Promise<{ producerId: number }> {
  const { kafka, group, topic, filed, own, FilingModule } = setup;
  const moduleRef = await startLibraryModule(FilingModule);
  try {
    await waitForGroupCaughtUp(kafka, group, topic, 60000);
  } finally {
    await moduleRef.close();
  }
  const before = await readTopic(kafka, filed, { until: quietAfter(2, 2000), pollIdleMs: 250, timeoutMs: 30000 });
  expect(before.map((r) => r.key)).toEqual(['n-1', 'n-2']);
  await withAdmin(kafka, (admin) => admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '0' }] }));
  return leaveHangingTransaction(kafka, own, { groupId: group, topic, partition: 0, offset: '2' }, []);
}

/** Each output once, read committed, and each record applied once (their inbox rows replayed, the handler not run again). */
async function expectFiledOnce({ kafka, filed, databaseUrl }: Awaited<ReturnType<typeof filingSetup>>): Promise<void> {
  const after = await readTopic(kafka, filed, { until: quietAfter(2, 3000), pollIdleMs: 250, timeoutMs: 30000 });
  expect(after.map((r) => r.key)).toEqual(['n-1', 'n-2']);
  expect(await queryDatabase(databaseUrl, 'SELECT id FROM applied ORDER BY id')).toEqual([{ id: 'n-1' }, { id: 'n-2' }]);
}

/**
 * The library aborts such a transaction and the records come again: their outputs, already in Kafka, must not be
 * sent a second time.
 */
describe('library: a hanging transaction of the partition\'s own producer, its outputs already committed', () => {
  let moduleRef: TestingModule | undefined;

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('is aborted; the record comes again and its output, committed before, is not sent again', async () => {
    const setup = await filingSetup('hanging-done', ['n-1', 'n-2']);
    const hanging = await handledThenHanging(setup);
    const { kafka, group, topic, databaseUrl, FilingModule } = setup;

    const logger = new CapturingLogger({ logLevels: ['log', 'warn', 'error'] });
    moduleRef = await startLibraryModule(FilingModule, logger);
    await waitUntil(async () => logger.lines.some((l) => / outputs already committed were not sent again/.test(l.message)), 90000, 'the partition past the records that came again');
    await waitForGroupCaughtUp(kafka, group, topic, 60000);
    await expectFiledOnce(setup);
    const aborted = logger.lines.find((l) => l.message.startsWith('hanging transaction aborted'));
    expect(aborted?.message).toContain(`"producerId":"${hanging.producerId}"`);
    expect(logger.lines.map((l) => l.message)).toEqual(expect.arrayContaining([expect.stringMatching(/: 2 records of its own producer found committed since /), expect.stringMatching(/: 2 outputs already committed were not sent again$/)]));
    expect(await queryDatabase(databaseUrl, 'SELECT count(*)::int AS n FROM kafka_eo_committed_outputs')).toEqual([{ n: 0 }]);
  });
});

/**
 * What the abort learnt outlives the member that made it: the member that aborted the hanging transaction is
 * killed (a process of its own, SIGKILL at a fault point) before its replay of the records commits in Kafka, and
 * another member takes the partition and replays them. Whichever point the first died at, the outputs already
 * committed are not sent again.
 */
describe('library: a hanging transaction of the partition\'s own producer, aborted by a member that dies before its replay commits', () => {
  const processes = new ProcessGroup();
  let moduleRef: TestingModule | undefined;

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
    await processes.killAll();
  });

  it.each([
    ['after-hanging-abort', 'the abort written, nothing replayed yet', 'hanging-aborted'],
    ['after-db-commit', 'its replay committed in PostgreSQL, not in Kafka', 'hanging-replayed'],
    ['before-hanging-abort', 'what its producer committed kept, the abort not written: the next member finds the transaction and aborts it', 'hanging-read'],
  ])('killed at %s (%s): the next member sends none of the committed outputs again', async (point, _when, label) => {
    const setup = await filingSetup(label, ['n-1', 'n-2']);
    const hanging = await handledThenHanging(setup);
    const { kafka, group, topic, env, FilingModule } = setup;

    const first = processes.add(new AppProcess(`hanging-${point}`, 'test/fixtures/filing-app.js', { ...env, KAFKA_EO_FAULT: `${point}:1` }, join(REPO_ROOT, 'test-logs', `hanging-moved-${point}.log`)));
    expect(await first.waitForExit(90000)).toBeNull(); // killed by its own SIGKILL
    expect(first.logs()).toContain(`fault injection: SIGKILL at ${point} #1`);
    // What the first member left in PostgreSQL for the next: the two outputs found committed, counted once each
    // (offset -1), and, its replay committed in PostgreSQL, what each replayed record took (at its offset).
    const kept = await queryDatabase<{ offset: number; count: number }>(setup.databaseUrl, `SELECT "offset"::int, count FROM kafka_eo_committed_outputs ORDER BY "offset", count`);
    expect(kept).toEqual(point === 'after-db-commit' ? [{ offset: -1, count: 0 }, { offset: -1, count: 0 }, { offset: 0, count: 1 }, { offset: 1, count: 1 }] : [{ offset: -1, count: 1 }, { offset: -1, count: 1 }]);

    const logger = new CapturingLogger({ logLevels: ['log', 'warn', 'error'] });
    moduleRef = await startLibraryModule(FilingModule, logger);
    await waitForGroupCaughtUp(kafka, group, topic, 90000);
    await expectFiledOnce(setup);
    // The first member read what its producer had committed before its abort; the next one aborted only when the first had not.
    expect(first.logs()).toContain(': 2 records of its own producer found committed since ');
    if (point !== 'before-hanging-abort') expect(first.logs()).toContain(`hanging transaction aborted {"group":"${group}"`);
    const abortedHere = logger.lines.find((l) => l.message.startsWith('hanging transaction aborted'));
    if (point === 'before-hanging-abort') expect(abortedHere?.message).toContain(`"producerId":"${hanging.producerId}"`);
    else expect(abortedHere).toBeUndefined();
    // Past the records they were for, the rows are gone.
    await waitUntil(async () => (await queryDatabase(setup.databaseUrl, 'SELECT 1 FROM kafka_eo_committed_outputs')).length === 0, 10000, 'the rows deleted');
  });
});

/**
 * A topic the partition's producer may write, deleted once the member has started (its boot checks passed): no read
 * of what that producer committed is whole while it is gone (its partitions cannot be read).
 */
async function deleteTopic(kafka: Kafka, topic: string): Promise<void> {
  await withAdmin(kafka, (admin) => admin.deleteTopics({ topics: [topic], timeout: 30000 }));
  await waitUntil(async () => !(await withAdmin(kafka, (admin) => admin.listTopics())).includes(topic), 30000, `${topic} deleted`);
}

/**
 * The library reads what the partition's own producer committed before it aborts the producer's hanging
 * transaction; a read that fails or stops short would leave outputs Kafka already holds out of what it keeps, and
 * the replay would send them again. So the abort waits (the partition held, health saying why) and the partition
 * reads again; after COMMITTED_READS_BEFORE_ABORT (3) such reads in a row it aborts anyway, saying so at error level,
 * and what an earlier member read whole is kept.
 */
describe('library: a hanging transaction of the partition\'s own producer, what it committed not readable', () => {
  const processes = new ProcessGroup();
  let moduleRef: TestingModule | undefined;

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
    await processes.killAll();
  });

  const abortedLines = (logger: CapturingLogger) => logger.lines.filter((l) => l.message.startsWith('hanging transaction aborted'));
  const abortedAnyway = (logger: CapturingLogger) => logger.lines.filter((l) => l.level === 'error' && /its hanging transaction is aborted anyway/.test(l.message));

  it('is not aborted while the read fails, health saying why; read whole once the topic is back, aborted, and nothing is sent again', async () => {
    const setup = await filingSetup('hanging-unread', ['n-1', 'n-2']);
    await handledThenHanging(setup);
    const { kafka, group, topic, archive, FilingModule } = setup;
    const logger = new CapturingLogger({ logLevels: ['log', 'warn', 'error'] });
    moduleRef = await startLibraryModule(FilingModule, logger);
    await deleteTopic(kafka, archive);
    const health = moduleRef.get(KafkaHealthIndicator);
    let message = '';
    await waitUntil(
      async () => {
        message = ((await health.isHealthy('kafka')).kafka as { message?: string }).message ?? '';
        return /did not abort it yet/.test(message);
      },
      60000,
      'health naming the read that failed',
    );
    expect(message).toMatch(/the outputs its own producer already committed were not (all )?read \(.*\); it reads them again \(read 1 of 3\)/);
    expect(message).toContain(archive);
    expect(abortedLines(logger)).toEqual([]);
    // The way out: the topic is back (its partitions readable); the next read is whole.
    await createTopics(kafka, [archive], 1);
    await waitForGroupCaughtUp(kafka, group, topic, 90000);
    await expectFiledOnce(setup);
    expect(abortedLines(logger)).toHaveLength(1);
    expect(abortedAnyway(logger)).toEqual([]);
  });

  it('after the last read in a row that fails, aborted anyway at error level; what a member read whole before it died is kept, and nothing is sent again', async () => {
    const setup = await filingSetup('hanging-unread-kept', ['n-1', 'n-2']);
    await handledThenHanging(setup);
    const { kafka, group, topic, env, databaseUrl } = setup;
    // A member reads whole what the producer committed, keeps it in PostgreSQL, and dies before its abort.
    const first = processes.add(new AppProcess('hanging-unread-first', 'test/fixtures/filing-app.js', { ...env, KAFKA_EO_FAULT: 'before-hanging-abort:1' }, join(REPO_ROOT, 'test-logs', 'hanging-unread-first.log')));
    expect(await first.waitForExit(90000)).toBeNull();
    expect(await queryDatabase(databaseUrl, `SELECT "offset"::int, count FROM kafka_eo_committed_outputs`)).toEqual([{ offset: -1, count: 1 }, { offset: -1, count: 1 }]);
    // The next one's reads all fail.
    const next = processes.add(new AppProcess('hanging-unread-next', 'test/fixtures/filing-app.js', { ...env, KAFKA_EO_FAULT: 'hanging-read:1:fail' }, join(REPO_ROOT, 'test-logs', 'hanging-unread-next.log')));
    await waitForGroupCaughtUp(kafka, group, topic, 120000);
    await expectFiledOnce(setup);
    const logs = next.logs();
    expect([...logs.matchAll(/its hanging transaction is not aborted yet: the partition waits and reads them again \(read (\d) of 3;/g)].map((m) => m[1])).toEqual(['1', '2']);
    expect(logs.match(/its hanging transaction is aborted anyway/g)).toHaveLength(1);
    expect(logs).toContain('were not read (fault injection: a failure at hanging-read), 3 reads in a row: its hanging transaction is aborted anyway');
    expect(logs.match(/hanging transaction aborted \{/g)).toHaveLength(1);
  });
});

/** An output of a replayed record, `value` its only difference from the others. */
const filedOutput = (value: string): OutputRecord => ({ topic: 'notes.filed', key: Buffer.from('k'), value: Buffer.from(value), headers: [['message-id', Buffer.from(`id-${value}`)]] });
const digestOf = (o: OutputRecord) => recordDigest(o.topic, o.key, o.value, o.headers);
/** What a replay sends, by value. */
const sent = async (outputs: Promise<OutputRecord[]>) => (await outputs).map((o) => o.value!.toString());

/**
 * What the abort found committed, as PostgreSQL keeps it for whichever member replays the records (no Kafka here:
 * DeliveredOutputs on real PostgreSQL sessions): what two members replaying the same record at once leave out, and
 * what a read recorded later keeps of an earlier one.
 */
describe('library: outputs found committed, as kept in PostgreSQL', () => {
  let databaseUrl: string;
  let dataSource: DataSource;
  const clients: Client[] = [];
  let n = 0;

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('committed_outputs');
    dataSource = await new DataSource({ type: 'postgres', url: databaseUrl }).initialize();
    await runInboxMigrations(dataSource);
  });

  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => undefined);
    await dataSource?.destroy();
  });

  /** A session of its own, as a unit of work has (its statements answered with their rows). */
  async function session(): Promise<{ client: Client; db: { query(sql: string, params?: unknown[]): Promise<any> }; pid: number }> {
    const client = new Client({ connectionString: databaseUrl });
    clients.push(client);
    await client.connect();
    const [{ pid }] = (await client.query('SELECT pg_backend_pid() AS pid')).rows;
    return { client, db: { query: async (sql, params) => (await client.query(sql, params)).rows }, pid };
  }

  /** A member's view of a partition of its own (a fresh group per test). */
  const member = (group: string) => new DeliveredOutputs(dataSource, group, 'notes', 0);

  it('two members replaying the same record at once (a zombie and the new owner): the second waits for the first and leaves out what the first took', async () => {
    const group = `race-${++n}`;
    const outputs = [filedOutput('a'), filedOutput('b')];
    const zombie = member(group);
    await zombie.record(10n, new Map(outputs.map((o) => [digestOf(o), 1])));
    const [one, two] = [await session(), await session()];
    await one.client.query('BEGIN');
    await two.client.query('BEGIN');
    // The zombie's unit of work takes both (its PostgreSQL transaction still open)...
    expect(await sent(zombie.undelivered(one.db, '5', outputs))).toEqual([]);
    // ...while the new owner's unit of work replays the same record: it waits for the zombie's transaction.
    const owner = sent(member(group).undelivered(two.db, '5', outputs));
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [two.pid])).length === 1, 10000, 'the second member waiting for the first');
    await one.client.query('COMMIT');
    // Kafka holds both committed: the new owner sends neither again.
    expect(await owner).toEqual([]);
    await two.client.query('COMMIT');
    const rows = await queryDatabase(databaseUrl, `SELECT "offset"::int, count FROM kafka_eo_committed_outputs WHERE consumer_group = $1 ORDER BY "offset", digest`, [group]);
    expect(rows).toEqual([{ offset: -1, count: 0 }, { offset: -1, count: 0 }, { offset: 5, count: 1 }, { offset: 5, count: 1 }]);
  });

  it('a read recorded after a complete one (a member that recorded and died before its abort, read again in part or not at all) keeps what the earlier found', async () => {
    const group = `merge-${++n}`;
    const [a, b, c] = [filedOutput('a'), filedOutput('b'), filedOutput('c')];
    await member(group).record(10n, new Map([[digestOf(a), 1], [digestOf(b), 1]]));
    // The next member's reads: one that failed (nothing found), one cut short (c found, on a partition the first did not read in time).
    await member(group).record(12n, new Map());
    await member(group).record(12n, new Map([[digestOf(a), 1], [digestOf(c), 1]]));
    const { client, db } = await session();
    await client.query('BEGIN');
    expect(await sent(member(group).undelivered(db, '5', [a, b, c, filedOutput('d')]))).toEqual(['d']);
    await client.query('COMMIT');
  });

  it('a read recorded after a replay took its share keeps what the replayed record took: run again, it leaves out the same outputs', async () => {
    const group = `kept-${++n}`;
    const a = filedOutput('a');
    await member(group).record(10n, new Map([[digestOf(a), 1]]));
    const { client, db } = await session();
    await client.query('BEGIN');
    expect(await sent(member(group).undelivered(db, '5', [a]))).toEqual([]);
    await client.query('COMMIT');
    // A later abort's read does not find the output (it looked from a later time): the record still leaves it out.
    await member(group).record(20n, new Map());
    await client.query('BEGIN');
    expect(await sent(member(group).undelivered(db, '5', [a]))).toEqual([]);
    await client.query('COMMIT');
  });
});
