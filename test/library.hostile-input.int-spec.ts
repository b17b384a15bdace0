import { createHash } from 'crypto';
import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { ConfigResourceTypes, IHeaders, Message } from 'kafkajs';
import type { KafkaClient } from 'kafka-exactly-once/kafkajs';
import { Client } from 'pg';
import { DEAD_LETTER_HEADERS, EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { CheckedProducer } from '../libs/kafka-exactly-once/src/kafkajs/producer/checked-producer';
import { createSuiteDatabase } from './support/database';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { createTopics, ReadRecord, readTopic, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { kafkaBrokers, testDriver } from './support/environment';
import { waitUntil } from './support/payments';

const COMMAND = {
  type: 'record',
  name: 'Command',
  namespace: 'test.hostile',
  fields: [
    { name: 'id', type: 'string' },
    { name: 'behaviour', type: 'string' },
    { name: 'size', type: 'int', default: 0 },
  ],
};
const DONE = { type: 'record', name: 'Done', namespace: 'test.hostile', fields: [{ name: 'id', type: 'string' }, { name: 'padding', type: 'string' }] };
/** The output topic's max.message.bytes: an emitted event over it is refused before it reaches Kafka. */
const OUTPUT_LIMIT = 20000;
/** The dead-letter topic's max.message.bytes (made small on purpose). */
const DLQ_LIMIT = 40000;

/** A handler whose failure each command chooses: every way a record's handling can fail in PostgreSQL or Kafka. */
@Injectable()
class CommandsHandler {
  readonly calls: string[] = [];

  @IdempotentHandler({ topic: 'commands', schema: 'test.hostile.Command', retry: { attempts: 2, initialDelayMs: 10 } })
  async onCommand(event: { id: string; behaviour: string; size: number }, ctx: EventContext): Promise<void> {
    this.calls.push(event.id);
    const q = (sql: string, params: unknown[] = []) => ctx.manager.query(sql, params);
    switch (event.behaviour) {
      case 'ok':
        await q('INSERT INTO seen (id) VALUES ($1)', [event.id]);
        ctx.emit('done', { id: event.id, padding: 'x'.repeat(event.size) }, { key: event.id });
        return;
      case 'many': // outputs larger in all than one produce request
        await q('INSERT INTO seen (id) VALUES ($1)', [event.id]);
        for (let i = 0; i < 12; i++) ctx.emit('done', { id: `${event.id}#${i}`, padding: 'm'.repeat(15000) }, { key: event.id });
        return;
      case 'deferred': // violates a deferred foreign key: fails at COMMIT, outside any handler call
        await q('INSERT INTO seen (id) VALUES ($1)', [event.id]);
        await q('INSERT INTO deferred_child (id, parent) VALUES ($1, 999)', [event.id]);
        return;
      case 'swallow': // hides a database error: the transaction is left aborted
        await q('INSERT INTO seen (id) VALUES ($1)', [event.id]);
        await q('SELECT 1 / 0').catch(() => undefined);
        return;
      case 'unique':
        await q('INSERT INTO seen (id) VALUES ($1)', ['taken']);
        return;
      case 'serialization':
        await q(`DO $$ BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END $$`);
        return;
      case 'nul-text': // PostgreSQL text cannot hold NUL
        await q('INSERT INTO seen (id) VALUES ($1)', [`${event.id}\u0000`]);
        return;
      case 'oversized':
        ctx.emit('done', { id: event.id, padding: 'o'.repeat(OUTPUT_LIMIT + 1000) }, { key: event.id });
        return;
      default:
        throw new Error(`broken: ${event.behaviour}`);
    }
  }
}

interface Sent {
  message: Message;
  messageId: Buffer;
  /** What must become of it: handled, or dead-lettered with this reason. */
  expect: 'handled' | 'duplicate' | string;
}

/** The byte values of a header (KafkaJS puts an inherited member first for names like `constructor`). */
function headerBytes(headers: IHeaders | undefined, name: string): Buffer[] {
  if (!headers || !Object.prototype.hasOwnProperty.call(headers, name)) return [];
  const value = headers[name];
  return (Array.isArray(value) ? value : [value]).filter((v) => Buffer.isBuffer(v) || typeof v === 'string').map((v) => (Buffer.isBuffer(v) ? v : Buffer.from(String(v))));
}

/**
 * The library in-process on the real broker and PostgreSQL, fed records that carry every kind of hostile bytes
 * and handlers that fail in every place a unit of work can fail. Each bad record ends dead-lettered with its
 * original bytes and a reason; every other record of the same partition is handled; no connection goes back
 * to the pool inside a transaction.
 */
describe('library: hostile input never stops the line', () => {
  let kafka: KafkaClient;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('hostile')}.`;
  const topic = `${prefix}commands`;
  const dir = schemasDirectory('hostile', { 'command.avsc': COMMAND, 'done.avsc': DONE });
  const schemas = SchemaRegistry.fromDirectory(dir);
  const command = (id: string, behaviour: string, size = 0) => encodeSingleObject(schemas.current('test.hostile.Command'), { id, behaviour, size });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('hostile');
    await queryDatabase(
      databaseUrl,
      `CREATE TABLE seen (id text PRIMARY KEY);
       INSERT INTO seen (id) VALUES ('taken');
       CREATE TABLE deferred_parent (id int PRIMARY KEY);
       CREATE TABLE deferred_child (id text PRIMARY KEY, parent int REFERENCES deferred_parent (id) DEFERRABLE INITIALLY DEFERRED);`,
    );
    await createTopics(kafka, [
      { topic, numPartitions: 1 },
      { topic: `${prefix}done`, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: String(OUTPUT_LIMIT) }] },
      // A dead-letter topic made beforehand with a small limit: a larger dead letter must not block the line.
      { topic: `${topic}.dlq`, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: String(DLQ_LIMIT) }] },
    ]);

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 4 } }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'hostile-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'hostile-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { done: { schema: 'test.hostile.Done' } },
          consumer: { sessionTimeout: 6000 },
          isolation: { maxFailures: 2, retryDelayMs: 50 },
          outputs: { maxRequestBytes: 64 * 1024 },
        }),
      ],
      providers: [CommandsHandler],
    })
    class HostileModule {}

    moduleRef = await startLibraryModule(HostileModule);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  const publish = (sent: Sent[]) => sendRaw(kafka, topic, sent.map((s) => s.message));

  const deadLetters = (until: (r: ReadRecord[]) => boolean) => readTopic(kafka, `${topic}.dlq`, { until, timeoutMs: 90000 });

  it('dead-letters each bad record with its bytes and a reason, and handles every good one around it', async () => {
    const id = (text: string | Buffer) => (Buffer.isBuffer(text) ? text : Buffer.from(text));
    const rec = (messageId: string | Buffer, value: Buffer | null, expect: Sent['expect'], extra: IHeaders = {}): Sent => ({
      messageId: id(messageId),
      expect,
      message: { key: 'k', value, headers: { 'message-id': id(messageId), ...extra } },
    });
    const unknownSchema = Buffer.concat([Buffer.from([0xc3, 0x01]), Buffer.alloc(8, 0x5a), Buffer.from([0x02, 0x61])]);
    const nulId = Buffer.from('nul\u0000id');
    const invalidUtf8Id = Buffer.from([0x69, 0x64, 0xff, 0xfe, 0x00]);
    const hugeId = Buffer.alloc(100_000, 0x68);
    const hostileHeaders: IHeaders = {
      trace: Buffer.from([0x00, 0xff, 0xc3, 0x28]),
      repeated: [Buffer.from('a'), Buffer.from([0x00])],
      constructor: Buffer.from('named like an Object member'),
      ['__proto__']: Buffer.from([0x70]),
    };
    const sent: Sent[] = [
      rec('ok-1', command('ok-1', 'ok'), 'handled'),
      rec(nulId, command('ok-nul-id', 'ok'), 'handled'),
      rec(invalidUtf8Id, command('ok-invalid-id', 'ok'), 'handled'),
      rec(hugeId, command('ok-huge-id', 'ok'), 'handled'),
      rec('ok-hostile-headers', command('ok-hostile-headers', 'ok'), 'handled', hostileHeaders),
      rec(nulId, command('dup-of-nul-id', 'ok'), 'duplicate'),
      rec('null-value', null, 'decode-failed', hostileHeaders),
      rec('not-avro', Buffer.from('{"id":"json"}'), 'decode-failed'),
      rec('truncated', command('truncated', 'ok').subarray(0, 12), 'decode-failed'),
      rec('unknown-schema', unknownSchema, 'unknown-schema'),
      rec('deferred', command('deferred', 'deferred'), 'handler-failed'),
      rec('swallow', command('swallow', 'swallow'), 'handler-failed'),
      rec('unique', command('unique', 'unique'), 'handler-failed'),
      rec('serialization', command('serialization', 'serialization'), 'handler-failed'),
      rec('nul-text', command('nul-text', 'nul-text'), 'handler-failed'),
      rec('oversized', command('oversized', 'oversized'), 'output-too-large'),
      rec('broken-with-headers', command('broken-with-headers', 'broken'), 'handler-failed', hostileHeaders),
      rec('too-big-for-dlq', Buffer.alloc(DLQ_LIMIT + 100, 0x7a), 'decode-failed'),
      rec('many', command('many', 'many'), 'handled'),
      rec('ok-last', command('ok-last', 'ok', 500), 'handled'),
    ];
    await publish(sent);
    const bad = sent.filter((s) => !['handled', 'duplicate'].includes(s.expect));
    const dlq = await deadLetters((r) => r.length >= bad.length);
    const done = await readTopic(kafka, `${prefix}done`, { until: (r) => r.length >= 6 + 12, timeoutMs: 60000 });

    // Every bad record once on the dead-letter topic, in order, with its reason and its original bytes.
    expect(dlq.map((r) => r.headers[DEAD_LETTER_HEADERS.reason])).toEqual(bad.map((s) => s.expect));
    for (const [i, s] of bad.entries()) {
      const letter = dlq[i];
      expect(letter.rawKey?.equals(Buffer.from('k'))).toBe(true);
      if (letter.headers['message-id'] === 'too-big-for-dlq') {
        // Over the dead-letter topic's limit: sent without its value, saying so (the original stays at its offset).
        expect(letter.value).toBeNull();
        expect(letter.headers[DEAD_LETTER_HEADERS.valueOmitted]).toMatch(/^40100 bytes, over max.message.bytes/);
      } else {
        expect(letter.value === null ? null : letter.value.toString('hex')).toEqual(s.message.value === null ? null : (s.message.value as Buffer).toString('hex'));
      }
      for (const name of Object.keys(s.message.headers ?? {})) {
        expect(headerBytes(letter.rawHeaders, name).length).toBeGreaterThan(0);
        expect(headerBytes(letter.rawHeaders, name).map((b) => b.toString('hex'))).toEqual(headerBytes(s.message.headers, name).map((b) => b.toString('hex')));
      }
      expect(letter.headers[DEAD_LETTER_HEADERS.originalTopic]).toBe(topic);
    }
    const byReason = (messageId: string) => dlq.find((r) => r.headers['message-id'] === messageId)?.headers;
    expect(byReason('deferred')?.[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/foreign key/);
    expect(byReason('serialization')?.[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/could not serialize/);
    expect(byReason('oversized')?.[DEAD_LETTER_HEADERS.errorClass]).toBe('OutputTooLargeError');

    // Every good record handled once, outputs included (the 12 large ones went in several requests).
    const outputs = done.map((r) => r.key);
    expect(outputs.filter((k) => k === 'many')).toHaveLength(12);
    expect(new Set(outputs)).toEqual(new Set(['ok-1', 'ok-nul-id', 'ok-invalid-id', 'ok-huge-id', 'ok-hostile-headers', 'many', 'ok-last']));
    expect(done).toHaveLength(6 + 12);
    // The causation id of an output is the input's message id, byte for byte.
    const causation = (key: string) => headerBytes(done.find((r) => r.key === key)?.rawHeaders, 'causation-id')[0];
    expect(causation('ok-nul-id').equals(nulId)).toBe(true);
    expect(causation('ok-invalid-id').equals(invalidUtf8Id)).toBe(true);
    expect(causation('ok-huge-id').toString()).toMatch(/^sha256:[0-9a-f]{64} \(100000 bytes/); // not 100 KB on every output

    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const seen = (await db.query(`SELECT id FROM seen WHERE id <> 'taken' ORDER BY id`)).rows.map((r) => r.id);
      expect(seen).toEqual(['many', 'ok-1', 'ok-hostile-headers', 'ok-huge-id', 'ok-invalid-id', 'ok-last', 'ok-nul-id']);
      const inbox = await db.query(`SELECT message_id, status FROM kafka_eo_inbox ORDER BY "offset"`);
      expect(inbox.rows.find((r) => r.status === 'deferred')?.message_id).toBe('unknown-schema');
      expect(inbox.rows.filter((r) => r.message_id.startsWith('sha256:'))).toHaveLength(3); // the NUL, invalid-UTF-8 and huge ids
      // No connection of this database was handed back inside a transaction.
      const states = await db.query(`SELECT state FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
      expect(states.rows.filter((r) => /in transaction/.test(r.state ?? ''))).toEqual([]);
    } finally {
      await db.end();
    }

    // Every pooled connection of the application's DataSource is usable (none was handed back aborted).
    const dataSource = moduleRef.get<DataSource>(getDataSourceToken());
    expect(await Promise.all(Array.from({ length: 8 }, (_, i) => dataSource.query('SELECT $1::int AS n', [i])))).toEqual(Array.from({ length: 8 }, (_, i) => [{ n: i }]));

    // The partition did not stay stuck: health sees it caught up, with the last isolated failure reported.
    const status = moduleRef.get(KafkaExactlyOnceLifecycle).status();
    const partition = status?.partitions.find((p) => p.topic === topic);
    expect(partition).toMatchObject({ stalled: false, lag: 0 });
  });

  it('keeps null header values (Kafka has them, KafkaJS could not write them): handled, and dead-lettered with them', async () => {
    // KafkaJS's producer throws on a null header value; the library's own produce encoding writes it (length -1).
    const producer = new CheckedProducer(kafka);
    await producer.connect();
    try {
      const headers = (messageId: string): IHeaders => ({ 'message-id': messageId, gone: null as unknown as Buffer, list: [Buffer.from('a'), null as unknown as Buffer, Buffer.from('c')] });
      await producer.send([
        {
          topic,
          messages: [
            { key: 'k', value: command('ok-null-headers', 'ok'), headers: headers('ok-null-headers') },
            { key: 'k', value: Buffer.from('not avro'), headers: headers('dead-null-headers') },
          ],
        },
      ]);
    } finally {
      await producer.disconnect();
    }
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT 1 FROM seen WHERE id = 'ok-null-headers'`)).length === 1, 60000, 'the record with null headers to be handled');
    const dlq = await deadLetters((r) => r.some((l) => l.headers['message-id'] === 'dead-null-headers'));
    const letter = dlq.find((l) => l.headers['message-id'] === 'dead-null-headers')!;
    expect(letter.headers[DEAD_LETTER_HEADERS.reason]).toBe('decode-failed');
    expect(letter.rawHeaders.gone).toBeNull();
    expect(letter.rawHeaders.list).toEqual([Buffer.from('a'), null, Buffer.from('c')]);
  });

  it('calls a record that never failed once, also in the units of work after a handler failed with statements sent', async () => {
    const handler = moduleRef.get(CommandsHandler);
    const calls = (id: string) => handler.calls.filter((c) => c === id).length;
    const rec = (id: string, behaviour: string): Message => ({ key: 'k', value: command(id, behaviour), headers: { 'message-id': id } });
    // A failure after the handler's statements (an INSERT that violates a key): its unit runs again with savepoints.
    await sendRaw(kafka, topic, [...[1, 2, 3, 4].map((n) => rec(`spell-a${n}`, 'ok')), rec('spell-unique-1', 'unique')]);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT 1 FROM seen WHERE id = 'spell-a4'`)).length === 1, 60000, 'the first unit handled');
    // The next units, during the spell of failures: with savepoints from the start, so a failing record costs the
    // records before it no second call.
    await sendRaw(kafka, topic, [...[1, 2, 3, 4].map((n) => rec(`spell-b${n}`, 'ok')), rec('spell-unique-2', 'unique'), ...[1, 2].map((n) => rec(`spell-c${n}`, 'ok'))]);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT 1 FROM seen WHERE id = 'spell-c2'`)).length === 1, 60000, 'the second unit handled');
    expect([1, 2, 3, 4].map((n) => calls(`spell-a${n}`)).every((n) => n === 1 || n === 2)).toBe(true); // 2: before the first failure of a spell
    expect([...[1, 2, 3, 4].map((n) => calls(`spell-b${n}`)), ...[1, 2].map((n) => calls(`spell-c${n}`))]).toEqual([1, 1, 1, 1, 1, 1]);
    // The failing record: its in-place attempts (2), the first one in the optimistic run counted, none more.
    expect(calls('spell-unique-1')).toBe(2);
    expect(calls('spell-unique-2')).toBe(2);
  });

  it('handles a deferred (unknown-schema) message id again when it is republished readable', async () => {
    await publish([{ messageId: Buffer.from('unknown-schema'), expect: 'handled', message: { key: 'k', value: command('republished', 'ok'), headers: { 'message-id': 'unknown-schema' } } }]);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT 1 FROM seen WHERE id = 'republished'`)).length === 1, 60000, 'the republished record to be handled');
    const handler = moduleRef.get(CommandsHandler);
    expect(handler.calls.filter((c) => c === 'republished')).toHaveLength(1);
  });

  it('dead-letters the input of an output the broker refuses (its limit lowered behind the consumer), and goes on', async () => {
    await withAdmin(kafka, (admin) =>
      admin.alterConfigs({
        validateOnly: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: `${prefix}done`, configEntries: [{ name: 'max.message.bytes', value: '4000' }] }],
      }),
    );
    await publish([
      { messageId: Buffer.from('refused'), expect: 'output-too-large', message: { key: 'k', value: command('refused', 'ok', 8000), headers: { 'message-id': 'refused' } } },
      { messageId: Buffer.from('after-refused'), expect: 'handled', message: { key: 'k', value: command('after-refused', 'ok', 10), headers: { 'message-id': 'after-refused' } } },
    ]);
    const dlq = await deadLetters((r) => r.some((x) => x.headers['message-id'] === 'refused'));
    const refused = dlq.find((r) => r.headers['message-id'] === 'refused');
    expect(refused?.headers).toMatchObject({ [DEAD_LETTER_HEADERS.reason]: 'output-too-large', [DEAD_LETTER_HEADERS.attempts]: '2' });
    await readTopic(kafka, `${prefix}done`, { until: (r) => r.some((x) => x.key === 'after-refused'), timeoutMs: 60000 });
  });
});

/**
 * A record without a message id is known by its coordinates, in a namespace no header can reach: a producer that
 * writes another record's coordinates as its own `message-id` cannot make that record a duplicate (skipped, its
 * offset committed: lost). (Rows of versions before 0.5: library.inbox, the CoordinateIdentities migration.)
 */
describe('library: a message id cannot forge another record\'s identity', () => {
  let kafka: KafkaClient;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('forged-id')}.`;
  const topic = `${prefix}commands`;
  const other = `${prefix}other-commands`;
  const group = `${prefix}group`;
  const dir = schemasDirectory('forged-id', { 'command.avsc': COMMAND, 'done.avsc': DONE });
  const schemas = SchemaRegistry.fromDirectory(dir);
  const command = (id: string) => encodeSingleObject(schemas.current('test.hostile.Command'), { id, behaviour: 'ok', size: 0 });

  @Injectable()
  class ForgedIdHandlers {
    readonly calls: string[] = [];

    @IdempotentHandler({ topic: 'commands', schema: 'test.hostile.Command' })
    async onCommand(event: { id: string }, ctx: EventContext): Promise<void> {
      this.calls.push(event.id);
      await ctx.manager.query('INSERT INTO seen (id) VALUES ($1)', [event.id]);
      ctx.emit('done', { id: event.id, padding: '' }, { key: event.id });
    }

    @IdempotentHandler({ topic: 'other-commands', schema: 'test.hostile.Command' })
    async onOther(event: { id: string }, ctx: EventContext): Promise<void> {
      this.calls.push(event.id);
      await ctx.manager.query('INSERT INTO seen (id) VALUES ($1)', [event.id]);
    }
  }

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('forged_id');
    await queryDatabase(databaseUrl, `CREATE TABLE seen (id text PRIMARY KEY)`);
    await createTopics(kafka, [
      { topic, numPartitions: 1 },
      { topic: other, numPartitions: 1 },
      { topic: `${prefix}done`, numPartitions: 1 },
    ]);

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 4 } }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'forged-id-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: 'forged-id-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { done: { schema: 'test.hostile.Done' } },
          // Any topic of the group can reach any other's ids: the widest a forger can aim.
          inbox: { deduplicationScope: 'group' },
          consumer: { sessionTimeout: 6000 },
        }),
      ],
      providers: [ForgedIdHandlers],
    })
    class ForgedIdModule {}

    moduleRef = await startLibraryModule(ForgedIdModule);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  const endOffset = async (name: string) => withAdmin(kafka, async (admin) => Number((await admin.fetchTopicOffsets(name))[0].high));
  const seen = async (id: string) => (await queryDatabase(databaseUrl, `SELECT 1 FROM seen WHERE id = $1`, [id])).length === 1;

  it('handles a record without a message id although another record, on its topic or another, carries its coordinates as message id', async () => {
    const next = await endOffset(topic);
    const target = `${topic}/0/${next + 1}`;
    await sendRaw(kafka, topic, [
      { key: 'k', value: command('forger'), headers: { 'message-id': target } }, // offset next: names the record after it
      { key: 'k', value: command('victim') }, // offset next + 1: no message id
    ]);
    // And from another topic of the group (deduplicationScope 'group'), aimed at the record after those.
    await sendRaw(kafka, other, [{ key: 'k', value: command('forger-elsewhere'), headers: { 'message-id': `${topic}/0/${next + 2}` } }]);
    await waitUntil(() => seen('forger-elsewhere'), 60000, 'the record of the other topic to be handled');
    await sendRaw(kafka, topic, [{ key: 'k', value: command('victim-2') }]); // offset next + 2: no message id

    await waitUntil(async () => (await seen('victim')) && (await seen('victim-2')), 60000, 'both records without a message id to be handled');
    const handler = moduleRef.get(ForgedIdHandlers);
    expect(['forger', 'victim', 'forger-elsewhere', 'victim-2'].map((id) => handler.calls.filter((c) => c === id).length)).toEqual([1, 1, 1, 1]);
    // Their outputs carry different message ids too: a downstream consumer keeps both.
    const done = await readTopic(kafka, `${prefix}done`, { until: (r) => ['forger', 'victim', 'victim-2'].every((k) => r.some((x) => x.key === k)), timeoutMs: 60000 });
    const outputIds = ['forger', 'victim'].map((k) => done.find((r) => r.key === k)?.headers['message-id']);
    expect(new Set(outputIds).size).toBe(2);
    // The inbox tells the two kinds of identity apart: the forged header by its SHA-256, the coordinates by another digest.
    const rows = await queryDatabase(databaseUrl, `SELECT message_id, encode(id_digest, 'hex') AS digest FROM kafka_eo_inbox WHERE message_id = $1 ORDER BY "offset"`, [target]);
    expect(rows).toHaveLength(2);
    expect(rows[0].digest).toBe(createHash('sha256').update(target).digest('hex'));
    expect(rows[1].digest).not.toBe(rows[0].digest);
  });
});
