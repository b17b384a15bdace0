import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SchemaRegistry as ConfluentClient, SchemaType } from '@kafkajs/confluent-schema-registry';
import { join } from 'path';
import { DEAD_LETTER_HEADERS, EventContext, IdempotentHandler, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { frameForRegistry } from 'kafka-exactly-once/registry/registry-framing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';
import { startTestRegistry } from './support/registry';

const prefix = `${uniqueTopic('peers')}.`;

@Injectable()
class PaymentsHandler {
  @IdempotentHandler({ topic: 'payments', format: 'json' })
  async onPayment(payment: { paymentId: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (payment_id) VALUES ($1)', [payment.paymentId]);
  }
}

/**
 * An application without an optional peer dependency its configuration needs, run as a process of its own (the
 * library's build) whose module resolution answers for the hidden packages as for packages not installed
 * (test/fixtures/hide-packages.js): what its declarations make certain refuses the boot with the package, the range
 * and the install line; what only a record brings waits a bounded time when the topic's subject holds that schema (a
 * JSON Schema writer registered under it after the boot), and is dead-lettered at once, naming the package, when it
 * does not (another team's schema, a hostile record): a partition never waits on a package nothing declares.
 */
describe('library: optional peer dependencies not installed', () => {
  const processes = new ProcessGroup();
  let registry: ReturnType<typeof startTestRegistry>;
  let client: ConfluentClient;
  let databaseUrl: string;
  let moduleRef: TestingModule | undefined;
  let started = 0;

  beforeAll(async () => {
    registry = startTestRegistry();
    client = new ConfluentClient({ host: registry.url });
    databaseUrl = await createSuiteDatabase('optional_peers');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (payment_id text)');
    await createTopics(
      testKafka(),
      ['payments', 'payments.dlq', 'payments.proto', 'payments.proto.dlq', 'receipts.proto', 'receipts.json', 'mixed', 'mixed.dlq', 'bounded', 'bounded.dlq'].map((t) => `${prefix}${t}`),
      1,
    );
  });

  afterAll(async () => {
    await processes.killAll();
    await moduleRef?.close().catch(() => undefined);
    registry?.stop();
  });

  function peersApp(mode: 'declared' | 'json', hide: string[], extra: Record<string, string> = {}): AppProcess {
    started += 1;
    const env = { KAFKA_BROKERS: kafkaBrokers().join(','), DATABASE_URL: databaseUrl, REGISTRY_URL: registry.url, PEERS_APP_PREFIX: prefix, PEERS_APP_MODE: mode, HIDE_PACKAGES: hide.join(','), ...extra };
    return processes.add(new AppProcess(`peers-app-${started}`, 'test/fixtures/peers-app.js', env, join(REPO_ROOT, 'test-logs', `peers-app-${started}.log`)));
  }

  function bootError(app: AppProcess): { name: string; message: string } | undefined {
    const line = app.logs().split('\n').find((l) => l.startsWith('{"bootError"'));
    return line ? (JSON.parse(line) as { bootError: { name: string; message: string } }).bootError : undefined;
  }

  it('refuses to boot when a declared format needs a package that is not installed, naming each, its range and the install line', async () => {
    const app = peersApp('declared', ['protobufjs', 'ajv']);
    expect(await app.waitForExit(60000).finally(() => app.kill())).toBe(1);
    const error = bootError(app);
    expect(error?.name).toBe('MissingPeerError');
    expect(error?.message).toContain('protobufjs is not installed (needed: PeersHandler.onProto reads format protobuf; topics["receipts.proto"] is format protobuf)');
    expect(error?.message).toContain(`ajv is not installed (needed: topics["receipts.json"] is written as JSON Schema (format json in the registry's framing))`);
    expect(error?.message).toContain('npm install "protobufjs@^7.0.0" "ajv@^8.0.0"');
  });

  it('makes the records of a JSON Schema writer its topic\'s subject holds wait without ajv, saying why in health; applies them once ajv is there; refuses the next boot without it', async () => {
    const subject = `${prefix}payments-value`;
    const app = peersApp('json', ['ajv']);
    await app.waitForLog(/peers-app running/, 90000);
    // A writer starts writing JSON Schema to the topic after the application booted.
    const schema = { $schema: 'http://json-schema.org/draft-07/schema#', title: `Payment ${prefix}`, type: 'object', properties: { paymentId: { type: 'string' } }, required: ['paymentId'] };
    const { id } = await client.register({ type: SchemaType.JSON, schema: JSON.stringify(schema) }, { subject });
    await sendRaw(testKafka(), `${prefix}payments`, await Promise.all([1, 2, 3].map(async (n) => ({ key: 'acc', value: await client.encode(id, { paymentId: `p-${n}` }), headers: { 'message-id': `p-${n}` } }))));
    // Its health (printed by the app as JSON) names the package and the install line: an infrastructure fault.
    await app.waitForLog(
      new RegExp(
        `"lastError":\\{"message":"schema id ${id} of the Schema Registry is a JSON Schema, and ajv \\(\\^8\\.0\\.0, an optional peer dependency of kafka-exactly-once\\) is not installed, and ${prefix}payments's subject ${subject} holds it: its records wait up to 600000 ms \\(schemaRegistry\\.missingPeerWaitMs, \\d+ ms so far\\), then are dead-lettered\\. Install it and restart the application: npm install \\\\"ajv@\\^8\\.0\\.0\\\\"","kind":"infrastructure"`,
      ),
      60000,
    );
    const inbox = async () => queryDatabase<{ message_id: string; dlq_reason: string | null }>(databaseUrl, 'SELECT message_id, dlq_reason FROM kafka_eo_inbox WHERE topic = $1 ORDER BY message_id', [`${prefix}payments`]);
    expect((await inbox()).filter((r) => r.dlq_reason !== null)).toEqual([]);
    expect(await queryDatabase(databaseUrl, 'SELECT payment_id FROM applied')).toEqual([]);
    await app.stop();

    // The package installed (this process has it): the records are applied, each once.
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'peers-app', brokers: kafkaBrokers() },
          groupId: `${prefix}json-group`,
          transactionalIdPrefix: `${prefix}json-app`,
          topicPrefix: prefix,
          schemaRegistry: { url: registry.url, requestTimeoutMs: 5000 },
          consumer: { sessionTimeout: 6000, maxRetryDelayMs: 1000 },
        }),
      ],
      providers: [PaymentsHandler],
    })
    class PeersApp {}
    moduleRef = await startLibraryModule(PeersApp);
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT payment_id FROM applied')).length >= 3, 60000, 'the waiting records applied');
    expect(await queryDatabase(databaseUrl, 'SELECT payment_id, count(*)::int AS n FROM applied GROUP BY payment_id ORDER BY payment_id')).toEqual([1, 2, 3].map((n) => ({ payment_id: `p-${n}`, n: 1 })));
    expect((await inbox()).map((r) => [r.message_id, r.dlq_reason])).toEqual([1, 2, 3].map((n) => [expect.stringContaining(`p-${n}`), null]));
    await moduleRef.close();
    moduleRef = undefined;

    // Now the subject's latest schema says the topic carries JSON Schema: without ajv, the boot refuses.
    const again = peersApp('json', ['ajv']);
    expect(await again.waitForExit(60000)).toBe(1);
    const error = bootError(again);
    expect(error?.name).toBe('MissingPeerError');
    expect(error?.message).toContain(`ajv is not installed (needed: PeersHandler.onPayment reads ${prefix}payments, whose subject ${subject} has a JSON Schema as its latest schema (id ${id}))`);
  });

  const applied = async () => (await queryDatabase<{ payment_id: string; n: number }>(databaseUrl, 'SELECT payment_id, count(*)::int AS n FROM applied GROUP BY payment_id ORDER BY payment_id')).map((r) => [r.payment_id, r.n]);
  const deadLetters = async (topic: string, count: number) =>
    (await readTopic(testKafka(), `${prefix}${topic}.dlq`, { until: (r) => r.length >= count, timeoutMs: 60000 })).map((l) => [l.headers['message-id'], l.headers[DEAD_LETTER_HEADERS.reason], l.headers[DEAD_LETTER_HEADERS.errorMessage]]);

  it("dead-letters at once, naming the package and its install line, a record whose Protobuf or JSON Schema writer its topic's subject does not hold, the line moving on", async () => {
    // Another team's schemas in the shared registry, which this JSON-only application never declared.
    // Of this run's own content (a registry gives one content one id, whatever subjects hold it).
    const proto = await client.register({ type: SchemaType.PROTOBUF, schema: `syntax = "proto3"; package ${prefix.replace(/[^A-Za-z0-9]/g, '_')}; message Audit { int32 n = 1; }` }, { subject: `${prefix}other-team-value` });
    const jsonSchema = await client.register(
      { type: SchemaType.JSON, schema: JSON.stringify({ $schema: 'http://json-schema.org/draft-07/schema#', title: `Audit ${prefix}`, type: 'object', properties: { n: { type: 'integer' } } }) },
      { subject: `${prefix}other-team-json-value` },
    );
    const app = peersApp('json', ['protobufjs', 'ajv'], { PEERS_APP_TOPIC: 'mixed', PEERS_APP_GROUP: `${prefix}mixed-group` });
    await app.waitForLog(/peers-app running/, 90000);
    await sendRaw(testKafka(), `${prefix}mixed`, [
      { key: 'acc', value: Buffer.from(JSON.stringify({ paymentId: 'm-1' })), headers: { 'message-id': 'm-1' } },
      { key: 'acc', value: frameForRegistry(proto.id, Buffer.from([0, 8, 1])), headers: { 'message-id': 'other-proto' } },
      { key: 'acc', value: frameForRegistry(jsonSchema.id, Buffer.from('{"n":1}')), headers: { 'message-id': 'other-json' } },
      { key: 'acc', value: Buffer.from(JSON.stringify({ paymentId: 'm-2' })), headers: { 'message-id': 'm-2' } },
    ]);
    // Before, the partition waited for protobufjs for good: m-2 was never applied.
    await waitUntil(async () => (await applied()).some(([p]) => p === 'm-2'), 60000, 'the record behind them applied');
    const letters = await deadLetters('mixed', 2);
    expect(letters.map(([id, reason]) => [id, reason])).toEqual([
      ['other-proto', 'decode-failed'],
      ['other-json', 'decode-failed'],
    ]);
    const notHeld = (peer: string, range: string) =>
      new RegExp(`is not installed, and the subject of ${prefix.replace(/\./g, '\\.')}mixed does not hold that schema \\(not waited for: the registry lists it under subject ${prefix.replace(/\./g, '\\.')}other-team(-json)?-value\\)\\. If .* is to carry such records, install it, restart the application and replay this dead letter: npm install "${peer}@\\${range}"`);
    expect(letters[0][2]).toMatch(new RegExp(`schema id ${proto.id} of the Schema Registry is a Protobuf schema, and protobufjs`));
    expect(letters[0][2]).toMatch(notHeld('protobufjs', '^7.0.0'));
    expect(letters[1][2]).toMatch(new RegExp(`schema id ${jsonSchema.id} of the Schema Registry is a JSON Schema, and ajv`));
    expect(letters[1][2]).toMatch(notHeld('ajv', '^8.0.0'));
    expect((await applied()).filter(([p]) => String(p).startsWith('m-'))).toEqual([
      ['m-1', 1],
      ['m-2', 1],
    ]);
    await app.stop();
  });

  it("waits missingPeerWaitMs for a package its topic's subject declares after the boot, saying why in health, then dead-letters the records naming it, the line moving on", async () => {
    const subject = `${prefix}bounded-value`;
    const app = peersApp('json', ['ajv'], { PEERS_APP_TOPIC: 'bounded', PEERS_APP_GROUP: `${prefix}bounded-group`, PEERS_APP_MISSING_PEER_WAIT_MS: '5000' });
    await app.waitForLog(/peers-app running/, 90000);
    const schema = { $schema: 'http://json-schema.org/draft-07/schema#', title: `Bounded ${prefix}`, type: 'object', properties: { paymentId: { type: 'string' } } };
    const { id } = await client.register({ type: SchemaType.JSON, schema: JSON.stringify(schema) }, { subject });
    const sentAt = Date.now();
    await sendRaw(testKafka(), `${prefix}bounded`, [
      ...(await Promise.all([1, 2].map(async (n) => ({ key: 'acc', value: await client.encode(id, { paymentId: `b-${n}` }), headers: { 'message-id': `b-${n}` } })))),
      { key: 'acc', value: Buffer.from(JSON.stringify({ paymentId: 'b-plain' })), headers: { 'message-id': 'b-plain' } },
    ]);
    await app.waitForLog(new RegExp(`"lastError":\\{"message":"schema id ${id} .* ajv .* is not installed, and ${prefix}bounded's subject ${subject} holds it: its records wait up to 5000 ms \\(schemaRegistry\\.missingPeerWaitMs`), 60000);
    // Before, they waited for good: b-plain was never applied.
    await waitUntil(async () => (await applied()).some(([p]) => p === 'b-plain'), 60000, 'the record behind them applied');
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(5000);
    const letters = await deadLetters('bounded', 2);
    expect(letters.map(([message, reason]) => [message, reason])).toEqual([
      ['b-1', 'decode-failed'],
      ['b-2', 'decode-failed'],
    ]);
    for (const [, , error] of letters) {
      expect(error).toMatch(new RegExp(`\\(the records of ${prefix.replace(/\./g, '\\.')}bounded's subject ${subject.replace(/\./g, '\\.')} waited 5000 ms for it: schemaRegistry\\.missingPeerWaitMs\\)\\. Install it, restart the application and replay this dead letter: npm install "ajv@\\^8\\.0\\.0"`));
    }
    expect((await applied()).filter(([p]) => String(p).startsWith('b-'))).toEqual([['b-plain', 1]]);
    await app.stop();
  });
});
