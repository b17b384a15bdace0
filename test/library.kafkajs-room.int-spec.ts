import { Injectable, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka, logLevel } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { KAFKA_CLIENT } from 'kafka-exactly-once/kafka-exactly-once.constants';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers } from './support/environment';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.fixes', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.fixes.Note' })
  async onNote(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
  }
}

/** The functions of KafkaJS's modules that the library's corrections change on the objects of its own clients. */
const CORRECTED_FUNCTIONS: Array<[file: string, owner: (exported: any) => any, names: string[]]> = [
  ['kafkajs/src/consumer/consumerGroup', (e) => e.prototype, ['fetch', 'resume', 'joinAndSync', 'leave']],
  ['kafkajs/src/network/requestQueue', (e) => e.prototype, ['scheduleCheckPendingRequests']],
  ['kafkajs/src/broker', (e) => e.prototype, ['fetch']],
  ['kafkajs/src/cluster', (e) => e.prototype, ['findBroker']],
  ['kafkajs/src/cluster/brokerPool', (e) => e.prototype, ['findBroker']],
  ['kafkajs/src/consumer/filterAbortedMessages', (e) => ({ filter: e }), ['filter']],
  ...[4, 5, 6, 7, 8, 9, 10, 11].map((v): [string, (e: any) => any, string[]] => [`kafkajs/src/protocol/requests/fetch/v${v}/response`, (e) => e, ['decode']]),
];

/** Each of CORRECTED_FUNCTIONS as the process has it, and as a fresh load of KafkaJS's files defines it, with the symbols of its owner. */
function correctedFunctions(): Array<{ where: string; now: string; fresh: string; symbols: string[]; freshSymbols: string[] }> {
  const fresh = new Map<string, unknown>();
  jest.isolateModules(() => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    for (const [file] of CORRECTED_FUNCTIONS) fresh.set(file, require(file));
  });
  return CORRECTED_FUNCTIONS.flatMap(([file, owner, names]) => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const now = owner(require(file));
    const then = owner(fresh.get(file));
    const symbols = (owner: object) => Object.getOwnPropertySymbols(owner).map(String);
    return names.map((name) => ({ where: `${file}#${name}`, now: String(now[name]), fresh: String(then[name]), symbols: symbols(now), freshSymbols: symbols(then) }));
  });
}

/**
 * The library builds its own Kafka clients, with its corrections of KafkaJS 2.2.4 on their objects only
 * (src/kafkajs): the module refuses to start on a KafkaJS client put in place of its own, naming what would be
 * missing; on its own client it starts. An application's own KafkaJS clients in the same process, beside the
 * running module, are KafkaJS as installed, with KafkaJS's behaviour.
 */
describe('library: the Kafka client room (its own clients, corrected; the application\'s KafkaJS left as it is)', () => {
  const dir = schemasDirectory('fixes', { 'note.avsc': NOTE });
  let databaseUrl: string;

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('fixes');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
  });

  /**
   * A module consuming `{prefix}notes` in the group `{prefix}group`, its topic made just before (a topic of its own
   * per test, made when it is needed: concurrent runs on the same broker delete the test topics of earlier suites).
   */
  async function notesModule(prefix: string) {
    await createTopics(testKafka(), [`${prefix}notes`], 1);
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'fixes-test', brokers: kafkaBrokers() },
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'fixes-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}
    return NotesModule;
  }

  /** Boots the module on `client` (in place of the one it builds): the boot's error, or undefined when it started. */
  async function bootOn(prefix: string, client: Kafka): Promise<Error | undefined> {
    const moduleRef = await Test.createTestingModule({ imports: [await notesModule(prefix)] })
      .overrideProvider(KAFKA_CLIENT)
      .useValue(client)
      .compile();
    try {
      await moduleRef.init();
      return undefined;
    } catch (err) {
      return err as Error;
    } finally {
      await moduleRef.close().catch(() => undefined);
    }
  }

  const members = (groupId: string) => withAdmin(testKafka(), async (admin) => (await admin.describeGroups([groupId])).groups[0]?.members.length ?? 0);

  it("refuses to start on KafkaJS's own client put in place of its own, naming the corrections and what to do", async () => {
    const prefix = `${uniqueTopic('room-foreign')}.`;
    const err = await bootOn(prefix, new Kafka({ clientId: 'fixes-test', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING }));
    expect(err?.name).toBe('KafkaJsFixesNotInForceError');
    expect(err?.message).toContain('partition-workers (');
    expect(err?.message).toContain('aborted-transactions (');
    expect(err?.message).toContain('request-queue (');
    expect(err?.message).toContain('the client it was given is not one of them');
    expect(err?.message).toContain('leave KAFKA_CLIENT to the module');
    // Nothing consumed: the group never had a member.
    expect(await members(`${prefix}group`)).toBe(0);
  });

  it('starts on its own client, the check passed, and handles a record', async () => {
    const prefix = `${uniqueTopic('room-own')}.`;
    let moduleRef: TestingModule | undefined;
    try {
      moduleRef = await startLibraryModule(await notesModule(prefix));
      await sendRaw(testKafka(), `${prefix}notes`, [{ key: 'k', value: encodeSingleObject(SchemaRegistry.fromDirectory(dir).current('test.fixes.Note'), { id: 'n-1' }), headers: { 'message-id': 'n-1' } }]);
      await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length === 1, 60000);
      expect(await queryDatabase(databaseUrl, 'SELECT id FROM applied')).toEqual([{ id: 'n-1' }]);
    } finally {
      await moduleRef?.close();
    }
  });

  it("leaves the application's own KafkaJS consumer and producer, beside the running module, as KafkaJS is", async () => {
    const prefix = `${uniqueTopic('room-beside')}.`;
    const overlap = `${prefix}overlap`;
    await createTopics(testKafka(), [overlap], 1);
    const application = new Kafka({ clientId: 'application', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING });
    let moduleRef: TestingModule | undefined;
    try {
      moduleRef = await startLibraryModule(await notesModule(prefix));

      // The application's producer, KafkaJS's own, writes to the module's topic: the module handles what it wrote.
      const producer = application.producer({ idempotent: true, maxInFlightRequests: 1 });
      await producer.connect();
      try {
        await producer.send({ topic: `${prefix}notes`, acks: -1, messages: [{ key: 'k', value: encodeSingleObject(SchemaRegistry.fromDirectory(dir).current('test.fixes.Note'), { id: 'beside-1' }), headers: { 'message-id': 'beside-1' } }] });
      } finally {
        await producer.disconnect();
      }
      await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT id FROM applied WHERE id = 'beside-1'`)).length === 1, 60000, "the application producer's record handled");

      // Two aborted transactions that overlap (A then B writing, B then A aborting), then a committed record: the
      // application's read-committed consumer, KafkaJS's own, is handed A's aborted record, as KafkaJS 2.2.4 hands
      // it; a consumer of a client the library built is not.
      const writers = ['a', 'b', 'c'].map((name) => application.producer({ transactionalId: `${prefix}${name}`, idempotent: true, maxInFlightRequests: 1 }));
      await Promise.all(writers.map((w) => w.connect()));
      try {
        const [a, b, c] = writers;
        const ta = await a.transaction();
        await ta.send({ topic: overlap, acks: -1, messages: [{ key: 'k', value: 'x', headers: { 'message-id': 'aborted-by-a' } }] });
        const tb = await b.transaction();
        await tb.send({ topic: overlap, acks: -1, messages: [{ key: 'k', value: 'x', headers: { 'message-id': 'aborted-by-b' } }] });
        await tb.abort();
        await ta.abort();
        const tc = await c.transaction();
        await tc.send({ topic: overlap, acks: -1, messages: [{ key: 'k', value: 'x', headers: { 'message-id': 'committed' } }] });
        await tc.commit();
      } finally {
        await Promise.all(writers.map((w) => w.disconnect()));
      }
      const byApplication = await readTopic(application, overlap, { until: quietAfter(2, 2000), pollIdleMs: 500, kafkaJsOwnFilter: true });
      expect(byApplication.map((r) => r.headers['message-id'])).toEqual(['aborted-by-a', 'committed']);
      const byLibraryClient = await readTopic(testKafka(), overlap, { until: quietAfter(1, 2000), pollIdleMs: 500 });
      expect(byLibraryClient.map((r) => r.headers['message-id'])).toEqual(['committed']);

      // And KafkaJS's modules are as its files define them, with the module running: nothing of theirs was replaced.
      const functions = correctedFunctions();
      expect(functions.length).toBe(17);
      // (no mark left on them either: the symbols they carry are KafkaJS's own)
      for (const f of functions) expect({ where: f.where, same: f.now === f.fresh, symbols: f.symbols }).toEqual({ where: f.where, same: true, symbols: f.freshSymbols });
    } finally {
      await moduleRef?.close();
    }
  });
});
