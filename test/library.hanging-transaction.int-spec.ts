import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule, KafkaHealthIndicator, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { DeliveredOutputs } from 'kafka-exactly-once/engine/delivered-outputs';
import type { OutputRecord } from 'kafka-exactly-once/engine/output-record';
import { runInboxMigrations } from 'kafka-exactly-once/inbox/inbox-migrator';
import { recordDigest } from 'kafka-exactly-once/kafkajs';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { expectFiledOnce, filingSetup, handledThenHanging, NOTE } from './support/filing';
import { leaveHangingTransaction } from './support/hanging';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { CapturingLogger, queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';


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
          driver: testDriver(),
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
