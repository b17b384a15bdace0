import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SchemaRegistry as ConfluentClient, SchemaType } from '@kafkajs/confluent-schema-registry';
import { join } from 'path';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
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
 * and the install line; what only a record brings (a JSON Schema writer on a json topic) waits, never dead-lettered.
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
    await createTopics(testKafka(), ['payments', 'payments.dlq', 'payments.proto', 'payments.proto.dlq', 'receipts.proto', 'receipts.json'].map((t) => `${prefix}${t}`), 1);
  });

  afterAll(async () => {
    await processes.killAll();
    await moduleRef?.close().catch(() => undefined);
    registry?.stop();
  });

  function peersApp(mode: 'declared' | 'json', hide: string[]): AppProcess {
    started += 1;
    const env = { KAFKA_BROKERS: kafkaBrokers().join(','), DATABASE_URL: databaseUrl, REGISTRY_URL: registry.url, PEERS_APP_PREFIX: prefix, PEERS_APP_MODE: mode, HIDE_PACKAGES: hide.join(',') };
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

  it('makes the records of a JSON Schema writer wait without ajv, saying why in health, never dead-lettering them; applies them once ajv is there; refuses the next boot without it', async () => {
    const subject = `${prefix}payments-value`;
    const app = peersApp('json', ['ajv']);
    await app.waitForLog(/peers-app running/, 90000);
    // A writer starts writing JSON Schema to the topic after the application booted.
    const schema = { $schema: 'http://json-schema.org/draft-07/schema#', title: `Payment ${prefix}`, type: 'object', properties: { paymentId: { type: 'string' } }, required: ['paymentId'] };
    const { id } = await client.register({ type: SchemaType.JSON, schema: JSON.stringify(schema) }, { subject });
    await sendRaw(testKafka(), `${prefix}payments`, await Promise.all([1, 2, 3].map(async (n) => ({ key: 'acc', value: await client.encode(id, { paymentId: `p-${n}` }), headers: { 'message-id': `p-${n}` } }))));
    // Its health (printed by the app as JSON) names the package and the install line: an infrastructure fault.
    await app.waitForLog(new RegExp(`"lastError":\\{"message":"schema id ${id} of the Schema Registry is a JSON Schema, and ajv \\(\\^8\\.0\\.0, an optional peer dependency of kafka-exactly-once\\) is not installed: records framed with it wait, none is dead-lettered\\. Install it and restart the application: npm install \\\\"ajv@\\^8\\.0\\.0\\\\"","kind":"infrastructure"`), 60000);
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
});
