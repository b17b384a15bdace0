import { ConsoleLogger, INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { randomUUID } from 'crypto';
import type { AddressInfo } from 'net';
import { Client, Pool } from 'pg';
import { EventContext, IdempotentHandler, KafkaExactlyOnceAdminModule, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, NonRetriableHandlerError, pgPoolSql, SchemaRegistry } from 'kafka-exactly-once';
import { OutboxOperations } from 'kafka-exactly-once/outbox/outbox-operations';
import { OUTBOX_RELAY_LOCK } from 'kafka-exactly-once/kafka-exactly-once.constants';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDatabaseUrl, testDriver } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw } from './support/library';
import { waitUntil } from './support/payments';

const TOKEN = 'admin-api-suite-token-0123456789';
const READ_ONLY = 'admin-api-suite-read-only-0123456789';
const REFUND = { type: 'record', name: 'RefundRequested', namespace: 'test.refunds', fields: [{ name: 'refundId', type: 'string' }] };

@Injectable()
class RefundsHandler {
  @IdempotentHandler({ topic: 'refunds', schema: 'test.refunds.RefundRequested' })
  async onRefund(event: { refundId: string }, _ctx: EventContext): Promise<void> {
    throw new NonRetriableHandlerError(`refund ${event.refundId}: the ledger refused it`);
  }
}

/**
 * The admin REST API with tokens, as an application mounts it, against the real broker and PostgreSQL: the
 * headers of every response, query parameters it does not know, who the audit records as acting, the outbox's
 * relay holder as another role sees it, and the overview while the database is gone.
 */
describe('admin REST API', () => {
  let app: INestApplication;
  let origin: string;
  let databaseUrl: string;
  let directory: string;
  const prefix = `${uniqueTopic('admin-api')}.`;
  const kafka = testKafka();

  const request = (method: string, path: string, options: { token?: string | null; body?: unknown } = {}) => {
    const token = options.token === undefined ? TOKEN : options.token;
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
    return fetch(`${origin}/kafka-eo/${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) }).then(async (r) => {
      const text = await r.text();
      return { status: r.status, headers: r.headers, body: text ? JSON.parse(text) : undefined };
    });
  };

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('admin-api');
    await createTopics(kafka, [`${prefix}refunds`], 1);
    directory = schemasDirectory('admin-api', { 'refund.v1.avsc': REFUND });

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'admin-api-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: `${prefix}tx`,
          schemas: { directory },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000 },
        }),
        KafkaExactlyOnceAdminModule.forRoot({ token: TOKEN, readOnlyToken: READ_ONLY, tokenName: 'oncall-team', waitMs: 0 }),
      ],
      providers: [RefundsHandler],
    })
    class RefundsModule {}

    app = await NestFactory.create(RefundsModule, { logger: new ConsoleLogger({ logLevels: ['error'] }) });
    await app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    await app.get(KafkaExactlyOnceLifecycle).whenRunning();
    const schema = SchemaRegistry.fromDirectory(directory).current('test.refunds.RefundRequested');
    await sendRaw(kafka, `${prefix}refunds`, [{ key: 'r-1', value: encodeSingleObject(schema, { refundId: 'r-1' }), headers: { 'message-id': 'r-1' } }]);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL`))[0].n === 1, 60000, 'the refund dead-lettered');
  }, 120000);

  afterAll(async () => {
    // The last test dropped the database under the application: its close may wait on connections that are gone.
    await Promise.race([app?.close(), new Promise((resolve) => setTimeout(resolve, 30000))]);
  }, 60000);

  it('marks every response, refusals included, nosniff and no-store', async () => {
    const answers = [
      await request('GET', 'overview'),
      await request('GET', 'dead-letters'),
      await request('GET', 'dead-letters', { token: null }),
      await request('POST', `dead-letters/${'0'.repeat(64)}/replay`, { token: READ_ONLY, body: {} }),
      await request('GET', 'dead-letters?limit=abc'),
      await request('GET', `dead-letters/${'0'.repeat(64)}`),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 401, 403, 400, 404]);
    for (const answer of answers) {
      expect({ status: answer.status, nosniff: answer.headers.get('x-content-type-options'), cache: answer.headers.get('cache-control') }).toEqual({ status: answer.status, nosniff: 'nosniff', cache: 'no-store' });
    }
  });

  it('refuses a query parameter a route does not know, naming it (400)', async () => {
    const cases: Array<[string, string, string]> = [
      ['GET', 'overview?colour=red', 'colour'],
      ['GET', 'retries?key=acct-1', 'key'],
      ['GET', 'outbox?verbose=1', 'verbose'],
      ['GET', 'outbox/events?state=all&sort=asc', 'sort'],
      ['GET', 'operations/1?x=1', 'x'],
      ['GET', 'parked-records/1?full=true', 'full'],
      ['GET', `parked-keys/${encodeURIComponent(`${prefix}refunds`)}/r-1?x=1`, 'x'],
      ['GET', `dead-letters/${'0'.repeat(64)}?topic=t&x=1`, 'x'],
      ['POST', 'parked-records/1/discard?reason=x', 'reason'],
    ];
    for (const [method, path, field] of cases) {
      const answer = await request(method, path, method === 'POST' ? { body: { reason: 'r' } } : {});
      expect({ path, status: answer.status, field: answer.body.field }).toEqual({ path, status: 400, field });
      expect(answer.body.message).toContain(`unknown query parameter "${field}"`);
    }
  });

  it('records which token acted as the actor, and the name the caller gives only as declaredActor', async () => {
    const [letter] = (await request('GET', 'dead-letters')).body.items;
    const queued = await request('POST', `dead-letters/${letter.id}/replay`, { body: { actor: 'mallory', wait: false } });
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ action: 'replay', actor: 'token:oncall-team', declaredActor: 'mallory' });
    const rows = await queryDatabase(databaseUrl, 'SELECT actor, declared_actor FROM kafka_eo_audit');
    expect(rows).toEqual([{ actor: 'token:oncall-team', declared_actor: 'mallory' }]);
    const audit = await request('GET', 'audit?actor=token%3Aoncall-team');
    expect(audit.body.items).toEqual([expect.objectContaining({ id: queued.body.id, actor: 'token:oncall-team', declaredActor: 'mallory' })]);
    expect((await request('GET', 'audit?actor=mallory')).body.items).toEqual([]);
  });

  it('records the token that acted beside the name actorOf gives, when an application uses both', async () => {
    // A second application of the same group and database (no handler: it consumes nothing), whose admin module
    // takes the same tokens and names the person from a header its proxy sets.
    await sendRaw(kafka, `${prefix}refunds`, [{ key: 'r-2', value: encodeSingleObject(SchemaRegistry.fromDirectory(directory).current('test.refunds.RefundRequested'), { refundId: 'r-2' }), headers: { 'message-id': 'r-2' } }]);
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL`))[0].n === 2, 60000, 'the second refund dead-lettered');
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({ kafka: { clientId: 'admin-api-test-2', brokers: kafkaBrokers() }, groupId: `${prefix}group`, transactionalIdPrefix: `${prefix}tx2`, topicPrefix: prefix }),
        KafkaExactlyOnceAdminModule.forRoot({ token: TOKEN, readOnlyToken: READ_ONLY, tokenName: 'oncall-team', actorOf: (req: { headers: Record<string, string> }) => req.headers['x-operator'], waitMs: 0 }),
      ],
    })
    class ProxiedAdminModule {}
    const proxied = await NestFactory.create(ProxiedAdminModule, { logger: new ConsoleLogger({ logLevels: ['error'] }) });
    try {
      await proxied.listen(0, '127.0.0.1');
      const at = `http://127.0.0.1:${(proxied.getHttpServer().address() as AddressInfo).port}/kafka-eo`;
      const post = (path: string, headers: Record<string, string>, body: unknown) =>
        fetch(`${at}/${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, body: JSON.parse(await r.text()) }));
      const letters = (await request('GET', 'dead-letters')).body.items as Array<{ id: string; messageId: string }>;
      const letter = letters.find((l) => l.messageId === 'r-2')!;
      const before = (await queryDatabase(databaseUrl, 'SELECT count(*)::int AS n FROM kafka_eo_audit'))[0].n;
      // actorOf names no one (no header): refused, whatever the token; the read-only token may not act at all.
      expect(await post(`dead-letters/${letter.id}/replay`, { authorization: `Bearer ${TOKEN}` }, { actor: 'mallory', wait: false })).toMatchObject({ status: 403, body: { message: expect.stringContaining('actorOf names no one') } });
      expect(await post(`dead-letters/${letter.id}/replay`, { authorization: `Bearer ${READ_ONLY}`, 'x-operator': 'carol' }, { wait: false })).toMatchObject({ status: 403 });
      expect((await queryDatabase(databaseUrl, 'SELECT count(*)::int AS n FROM kafka_eo_audit'))[0].n).toBe(before);

      const queued = await post(`dead-letters/${letter.id}/replay`, { authorization: `Bearer ${TOKEN}`, 'x-operator': 'carol' }, { actor: 'mallory', wait: false });
      expect(queued).toMatchObject({ status: 202, body: { action: 'replay', actor: 'carol (token:oncall-team)', declaredActor: 'mallory' } });
      expect(await queryDatabase(databaseUrl, 'SELECT actor, declared_actor FROM kafka_eo_audit WHERE id = $1', [queued.body.id])).toEqual([{ actor: 'carol (token:oncall-team)', declared_actor: 'mallory' }]);
      const audit = await request('GET', `audit?actor=${encodeURIComponent('carol (token:oncall-team)')}`);
      expect(audit.body.items).toEqual([expect.objectContaining({ id: queued.body.id, messageId: 'r-2' })]);
    } finally {
      await proxied.close();
    }
  }, 90000);

  it("names the outbox relay's holder without a made-up time when PostgreSQL hides it from this role", async () => {
    const role = `keo_viewer_${randomUUID().replace(/-/g, '').slice(0, 10)}`;
    await queryDatabase(databaseUrl, `CREATE ROLE ${role} LOGIN`);
    await queryDatabase(databaseUrl, `GRANT SELECT ON kafka_eo_outbox, kafka_eo_outbox_relay, kafka_eo_outbox_set_aside TO ${role}`);
    const holder = new Client({ connectionString: databaseUrl, application_name: 'relay-of-another-role' });
    await holder.connect();
    const viewerUrl = new URL(databaseUrl);
    viewerUrl.username = role;
    viewerUrl.password = '';
    const viewer = new Pool({ connectionString: viewerUrl.toString(), max: 1 });
    try {
      await holder.query('SELECT pg_advisory_lock($1::bigint)', [OUTBOX_RELAY_LOCK]);
      const { holder: seen } = await new OutboxOperations(pgPoolSql(viewer)).summary();
      expect(seen).toMatchObject({ pid: expect.any(Number), since: null });
      // The application's own role sees when that session began.
      const own = new Pool({ connectionString: databaseUrl, max: 1 });
      try {
        const { holder: full } = await new OutboxOperations(pgPoolSql(own)).summary();
        expect(full).toMatchObject({ pid: seen!.pid, applicationName: 'relay-of-another-role' });
        expect(Date.now() - new Date(full!.since!).getTime()).toBeLessThan(3_600_000);
      } finally {
        await own.end();
      }
    } finally {
      await viewer.end();
      await holder.end();
      await queryDatabase(databaseUrl, `DROP OWNED BY ${role}`);
      await queryDatabase(testDatabaseUrl(), `DROP ROLE ${role}`);
    }
  });

  it('answers the overview while its database is gone: partitions, members and health, and which parts could not be read', async () => {
    const database = new URL(databaseUrl).pathname.slice(1);
    await queryDatabase(testDatabaseUrl(), `DROP DATABASE ${database} WITH (FORCE)`);
    const overview = await request('GET', 'overview');
    expect(overview.status).toBe(200);
    expect(overview.headers.get('cache-control')).toBe('no-store');
    expect(overview.body).toMatchObject({
      group: { id: `${prefix}group` },
      consumer: { state: expect.any(String) },
      partitions: expect.any(Array),
      counts: null,
      outbox: null,
      unreadable: { counts: expect.stringMatching(/^PostgreSQL could not be read: /), outbox: expect.stringMatching(/^PostgreSQL could not be read: /) },
    });
    expect(overview.body.health.inbox).toMatchObject({ status: 'down' });
  }, 60000);
});
