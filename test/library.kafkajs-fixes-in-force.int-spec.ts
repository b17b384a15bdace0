import { Injectable, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'fs';
import { Kafka, logLevel } from 'kafkajs';
import { tmpdir } from 'os';
import { dirname, join } from 'path';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { KAFKA_CLIENT } from 'kafka-exactly-once/kafka-exactly-once.constants';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers } from './support/environment';
import { createTopics, testKafka, uniqueTopic, withAdmin } from './support/kafka';
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

/** A copy of this repository's kafkajs in a folder of its own (its package.json's version set to `version`), and its Kafka class. */
function kafkaJsCopy(label: string, version?: string): { path: string; Kafka: typeof Kafka; remove: () => void } {
  const root = mkdtempSync(join(tmpdir(), `keo-kafkajs-${label}-`));
  const path = join(root, 'node_modules', 'kafkajs');
  cpSync(dirname(require.resolve('kafkajs/package.json')), path, { recursive: true });
  if (version) {
    const manifest = JSON.parse(readFileSync(join(path, 'package.json'), 'utf8')) as { version: string };
    writeFileSync(join(path, 'package.json'), JSON.stringify({ ...manifest, version }));
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const copy = require(path) as typeof import('kafkajs');
  return { path, Kafka: copy.Kafka, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/**
 * The library corrects KafkaJS 2.2.4 by patching the copy of kafkajs it resolves. A Kafka client built from another
 * copy (a second kafkajs in the application's tree) would run the consumer uncorrected: its group would not wait
 * for the partitions' units of work before a rebalance, and it would hand handlers records of aborted
 * transactions. The module refuses to start on such a client, naming what is missing, the copy and what to do;
 * on its own client it starts as always.
 */
describe('library: the KafkaJS corrections in force on the client it runs', () => {
  const dir = schemasDirectory('fixes', { 'note.avsc': NOTE });
  const copies: Array<{ remove: () => void }> = [];
  let databaseUrl: string;

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('fixes');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
  });

  afterAll(() => {
    for (const copy of copies) copy.remove();
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

  it('refuses to start on a client built from a second copy of KafkaJS, naming the fixes, the copy and what to do', async () => {
    const second = kafkaJsCopy('second');
    copies.push(second);
    const prefix = `${uniqueTopic('fixes-second')}.`;
    const err = await bootOn(prefix, new second.Kafka({ clientId: 'fixes-test', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING }));
    expect(err?.name).toBe('KafkaJsFixesNotInForceError');
    expect(err?.message).toContain('partition-workers (');
    expect(err?.message).toContain('aborted-transactions (');
    expect(err?.message).toContain('request-queue (');
    expect(err?.message).toContain(`built from kafkajs 2.2.4 at ${second.path}`);
    expect(err?.message).toContain(`applied to kafkajs 2.2.4 at ${dirname(require.resolve('kafkajs/package.json'))}: the application has two copies of KafkaJS`);
    expect(err?.message).toContain('`npm ls kafkajs`');
    expect(err?.message).toContain('`npm dedupe`');
    expect(err?.message).toContain('"kafkajs": "2.2.4"');
    // Nothing consumed: the group never had a member.
    expect(await members(`${prefix}group`)).toBe(0);
  });

  it('refuses to start on a client of a KafkaJS other than 2.2.4, naming its version and path', async () => {
    const newer = kafkaJsCopy('newer', '2.2.5');
    copies.push(newer);
    const err = await bootOn(`${uniqueTopic('fixes-newer')}.`, new newer.Kafka({ clientId: 'fixes-test', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING }));
    expect(err?.name).toBe('KafkaJsFixesNotInForceError');
    expect(err?.message).toContain(`corrects KafkaJS 2.2.4 and runs on no other version, and its Kafka client is built from kafkajs 2.2.5 at ${newer.path}`);
    expect(err?.message).toContain('`npm ls kafkajs`');
  });

  it('starts on its own client, the check passed, and handles a record', async () => {
    const prefix = `${uniqueTopic('fixes-own')}.`;
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
});
