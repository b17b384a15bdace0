import { Injectable, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { readFileSync } from 'fs';
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import { EventContext, EventPublisher, IdempotentHandler, KafkaAuthenticationError, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { saslListener, tlsListener, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.secure', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.secure.Note' })
  async onNote(note: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO secure_notes (id) VALUES ($1)', [note.id]);
    ctx.emit('notes.seen', note, { key: note.id });
  }
}

/**
 * Secure connections against the local broker's SASL listener (scripts/kafka/kafka.sh formats its storage
 * with the SCRAM user and configures the same user for PLAIN) and its TLS listener (a certificate signed by a
 * local CA): the handler's unit of work (transactions, offsets, the group) and EventPublisher work over
 * SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and TLS, and a wrong password or an untrusted certificate fails the boot
 * at once with an error that names what was refused, not a hang or a spool that never drains.
 */
describe('library: secure connections (SASL SCRAM and PLAIN, TLS)', () => {
  const prefix = `${uniqueTopic('secure')}.`;
  const dir = schemasDirectory('secure', { 'note.avsc': NOTE });
  const sasl = saslListener();
  const tls = tlsListener();
  let databaseUrl: string;

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('secure');
    await queryDatabase(databaseUrl, 'CREATE TABLE secure_notes (id text PRIMARY KEY)');
    await createTopics(testKafka(), [`${prefix}notes`, `${prefix}notes.seen`], 2);
  });

  function notesModule(connection: Pick<KafkaConfig, 'brokers' | 'sasl' | 'ssl'>, { consume = true, publish = true } = {}) {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'secure-test', ...connection, retry: { retries: 2 } },
          driver: testDriver(),
          ...(consume ? { groupId: `${prefix}group` } : {}),
          transactionalIdPrefix: 'secure-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { notes: { schema: 'test.secure.Note', key: (n: { id: string }) => n.id }, 'notes.seen': { schema: 'test.secure.Note' } },
          ...(publish ? { publisher: { spool: { directory: schemasDirectory('secure-spool', {}) }, sendTimeoutMs: 5000 } } : {}),
        }),
      ],
      providers: consume ? [NotesHandler] : [],
    })
    class NotesModule {}
    return NotesModule;
  }

  const connections: Array<[string, Pick<KafkaConfig, 'brokers' | 'sasl' | 'ssl'>]> = [
    ...(['scram-sha-256', 'scram-sha-512', 'plain'] as const).map((mechanism): [string, Pick<KafkaConfig, 'brokers' | 'sasl' | 'ssl'>] => [
      mechanism,
      { brokers: sasl.brokers, sasl: { mechanism, username: sasl.username, password: sasl.password } as SASLOptions },
    ]),
    ['tls', { brokers: tls.brokers, ssl: { ca: [readFileSync(tls.caFile, 'utf8')] } }],
  ];

  it.each(connections)('publishes and handles exactly once over %s', async (name, connection) => {
    const moduleRef = await startLibraryModule(notesModule(connection));
    try {
      const publisher = moduleRef.get(EventPublisher);
      const ids = Array.from({ length: 10 }, (_, i) => `${name}-${i}`);
      for (const id of ids) expect((await publisher.publish('notes', { id }, { messageId: id })).status).toBe('sent');
      await publisher.publish('notes', { id: ids[0] }, { messageId: ids[0] }); // a duplicate publish
      await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT count(*)::int AS n FROM secure_notes WHERE id LIKE $1', [`${name}-%`]))[0].n === ids.length, 60000, 'notes applied');
      // The duplicate publish was skipped, not handled again (a second insert would have dead-lettered it).
      const inbox = await queryDatabase(databaseUrl, 'SELECT status, count(*)::int AS n FROM kafka_eo_inbox WHERE message_id LIKE $1 GROUP BY status', [`${name}-%`]);
      expect(inbox).toEqual([{ status: 'processed', n: ids.length }]);
      const seen = await readTopic(testKafka(), `${prefix}notes.seen`, { until: (rs) => rs.filter((r) => r.key?.startsWith(`${name}-`)).length >= ids.length, pollIdleMs: 1500, timeoutMs: 30000 });
      expect(seen.filter((r) => r.key?.startsWith(`${name}-`)).map((r) => r.key).sort()).toEqual([...ids].sort());
    } finally {
      await moduleRef.close();
    }
  });

  async function bootError(module: unknown): Promise<{ error: unknown; ms: number }> {
    const started = Date.now();
    const moduleRef: TestingModule = await Test.createTestingModule({ imports: [module as never] }).compile();
    try {
      await moduleRef.init();
      return { error: undefined, ms: Date.now() - started };
    } catch (error) {
      return { error, ms: Date.now() - started };
    } finally {
      await moduleRef.close().catch(() => undefined);
    }
  }

  it.each([
    ['a consumer alone', 'scram-sha-512', { consume: true, publish: false }],
    ['a publisher alone', 'scram-sha-512', { consume: false, publish: true }],
    ['a consumer alone', 'plain', { consume: true, publish: false }],
  ] as const)('fails the boot of %s over %s at once when the password is wrong, naming mechanism and user', async (_what, mechanism, options) => {
    const { error, ms } = await bootError(notesModule({ brokers: sasl.brokers, sasl: { mechanism, username: sasl.username, password: 'not-the-password' } as SASLOptions }, options));
    expect(error).toBeInstanceOf(KafkaAuthenticationError);
    expect((error as Error).message).toContain(`refused SASL ${mechanism} as user "kafka-eo"`);
    expect((error as Error).message).toMatch(/authentication failed|invalid username or password/i);
    expect((error as Error).message).not.toMatch(/not-the-password/);
    expect(ms).toBeLessThan(15000); // not the 60 s of retries a broker that is down gets
  });

  it.each([
    ['a consumer alone', { consume: true, publish: false }],
    ['a publisher alone', { consume: false, publish: true }],
  ])("fails the boot of %s at once when the broker's certificate is not trusted", async (_what, options) => {
    // ssl: true trusts only the system's CAs, not the local CA that signed the broker's certificate.
    const { error, ms } = await bootError(notesModule({ brokers: tls.brokers, ssl: true }, options));
    expect(error).toBeInstanceOf(KafkaAuthenticationError);
    expect((error as Error).message).toContain(`Kafka at ${tls.brokers[0]} refused TLS:`);
    expect((error as Error).message).toMatch(/self-signed certificate in certificate chain/);
    expect(ms).toBeLessThan(15000);
  });
});
