import { ConsoleLogger, INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { AddressInfo } from 'net';
import type { Browser, Page } from 'playwright-core';
import { EventContext, IdempotentHandler, KafkaExactlyOnceAdminModule, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, NonRetriableHandlerError, OrderedEvent, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { runKafkaEo } from 'kafka-exactly-once/cli/kafka-eo.command';
import { chromiumPath, launchChromium, screenshotDirectory, watchPage, type PageWatch } from './support/browser';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw } from './support/library';
import { waitUntil } from './support/payments';
import { join } from 'path';

const TOKEN = 'bulk-actions-suite-token-0123456789';
const READ_ONLY = 'bulk-actions-suite-read-only-0123456789';
const REFUND = { type: 'record', name: 'RefundRequested', namespace: 'test.refunds', fields: [{ name: 'refundId', type: 'string' }] };

/** Refunds the ledger refuses until its cause is fixed (`broken` false): then each applied once, as a row. */
@Injectable()
class RefundsHandler {
  broken = true;

  @IdempotentHandler({ topic: 'refunds', schema: 'test.refunds.RefundRequested' })
  async onRefund(event: { refundId: string }, ctx: EventContext): Promise<void> {
    if (this.broken) throw new NonRetriableHandlerError(`refund ${event.refundId}: ${Number(event.refundId.split('-')[1]) % 3 === 0 ? 'the card expired' : 'the ledger refused it'}`);
    await ctx.manager.query(`INSERT INTO bulk_refunds_applied (refund_id) VALUES ($1)`, [event.refundId]);
  }
}

/** Payments in key order: while the gateway is down, a key's first payment fails for good and parks the key. */
@Injectable()
class PaymentsHandler {
  broken = true;

  @IdempotentHandler({ topic: 'payments', schema: 'test.refunds.RefundRequested', retry: { attempts: 1 } })
  @OrderedEvent()
  async onPayment(event: { refundId: string }, ctx: EventContext): Promise<void> {
    if (this.broken) throw new NonRetriableHandlerError(`payment ${event.refundId}: ${event.refundId.startsWith('p-4') ? 'the bank refused it' : 'the gateway is down'}`);
    await ctx.manager.query(`INSERT INTO bulk_refunds_applied (refund_id) VALUES ($1)`, [event.refundId]);
  }
}

/**
 * Bulk actions on dead letters through the admin API and the console, against the real broker and PostgreSQL:
 * the dry run, one operation however often and from wherever it is started, every matched dead letter replayed
 * once (its effect once, one audit row), those not matched untouched, a lease of a crashed instance taken over
 * without acting twice, the read-only token refused every action, and the console's bulk flow in Chromium.
 */
describe('bulk actions', () => {
  let app: INestApplication;
  let origin: string;
  let databaseUrl: string;
  let handler: RefundsHandler;
  const prefix = `${uniqueTopic('bulk')}.`;
  const topic = `${prefix}refunds`;
  const payments = `${prefix}payments`;
  const kafka = testKafka();
  const db = <T = Record<string, any>>(sql: string, params: unknown[] = []) => queryDatabase<T>(databaseUrl, sql, params);

  const request = (method: string, path: string, options: { token?: string | null; body?: unknown } = {}) => {
    const token = options.token === undefined ? TOKEN : options.token;
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
    return fetch(`${origin}/kafka-eo/${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) }).then(async (r) => {
      const text = await r.text();
      return { status: r.status, body: text ? JSON.parse(text) : undefined };
    });
  };
  const dryRun = (query: Record<string, string>, token?: string) => request('GET', `bulk/dry-run?${new URLSearchParams({ kind: 'dead-letters', action: 'replay', ...query })}`, { token });
  const bulk = async (id: string) => (await request('GET', `bulk/${id}`)).body;
  const finished = (id: string, timeoutMs = 30000) => waitUntil(async () => ['done', 'cancelled', 'failed'].includes((await bulk(id)).state), timeoutMs, `bulk action ${id} finished`);
  const refunds = async (n: number, from = 1) => {
    const schema = SchemaRegistry.fromDirectory(directory).current('test.refunds.RefundRequested');
    const ids = Array.from({ length: n }, (_, i) => `r-${from + i}`);
    await sendRaw(kafka, topic, ids.map((id) => ({ key: `acct-${id}`, value: encodeSingleObject(schema, { refundId: id }), headers: { 'message-id': id } })));
    return ids;
  };
  let directory: string;

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('bulk-actions');
    await db(`CREATE TABLE bulk_refunds_applied (refund_id text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    await createTopics(kafka, [topic, `${topic}.dlq`, payments, `${payments}.dlq`], 1);
    directory = schemasDirectory('bulk-actions', { 'refund.v1.avsc': REFUND });

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'bulk-actions-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: `${prefix}tx`,
          schemas: { directory },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000 },
          operations: { pollIntervalMs: 200 },
        }),
        KafkaExactlyOnceAdminModule.forRoot({ token: TOKEN, readOnlyToken: READ_ONLY, tokenName: 'oncall-team', waitMs: 0, console: true }),
      ],
      providers: [RefundsHandler, PaymentsHandler],
    })
    class RefundsModule {}

    app = await NestFactory.create(RefundsModule, { logger: new ConsoleLogger({ logLevels: ['error'] }) });
    app.enableShutdownHooks();
    await app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    handler = app.get(RefundsHandler);
    await app.get(KafkaExactlyOnceLifecycle).whenRunning();
    await refunds(30);
    await waitUntil(async () => (await db(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL`))[0].n === 30, 60000, '30 refunds dead-lettered');
    // The cause fixed: a replay applies the refund.
    handler.broken = false;
  }, 120000);

  afterAll(async () => {
    await Promise.race([app?.close(), new Promise((resolve) => setTimeout(resolve, 30000))]);
  }, 60000);

  it('dry-runs a filter: how many it matches and the first ten, oldest first, for the read-only token too', async () => {
    const all = await dryRun({});
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ kind: 'dead-letters', action: 'replay', filter: {}, matched: 30, atLeast: false });
    expect(all.body.sample).toHaveLength(10);
    const times = all.body.sample.map((s: { deadLetteredAt: string }) => s.deadLetteredAt);
    expect([...times].sort()).toEqual(times);

    // 1..30: every third refund's card expired (10), the ledger refused the others (20).
    const ledger = await dryRun({ error: 'LEDGER refused', topic }, READ_ONLY);
    expect(ledger.status).toBe(200);
    expect(ledger.body).toMatchObject({ matched: 20, filter: { topic, error: 'LEDGER refused' } });
    expect(ledger.body.sample.every((s: { error: { message: string } }) => s.error.message.includes('the ledger refused it'))).toBe(true);
    expect((await dryRun({ error: 'card expired', reason: 'handler-failed' })).body.matched).toBe(10);
    const one = await dryRun({ key: 'acct-r-7' });
    expect(one.body).toMatchObject({ matched: 1, sample: [{ key: 'acct-r-7', messageId: 'r-7', topic, reason: 'handler-failed' }] });
    expect((await dryRun({ error: '100%_' })).body.matched).toBe(0);
    expect((await dryRun({ to: '2000-01-01T00:00:00Z' })).body.matched).toBe(0);
    expect((await dryRun({ from: new Date(Date.now() - 3_600_000).toISOString() })).body.matched).toBe(30);

    const refusals: Array<[Record<string, string>, string]> = [
      [{ error: 'x'.repeat(201) }, 'error'],
      [{ from: 'yesterday' }, 'from'],
      [{ reason: 'bored' }, 'reason'],
      [{ colour: 'red' }, 'colour'],
      [{ action: 'discard' }, 'action'],
      [{ kind: 'inbox' }, 'kind'],
    ];
    for (const [query, field] of refusals) {
      const answer = await dryRun(query);
      expect({ query, status: answer.status, field: answer.body.field }).toEqual({ query, status: 400, field });
    }
  });

  it('refuses every action to the read-only token (403), and acts on nothing', async () => {
    const body = { kind: 'dead-letters', action: 'replay', filter: {}, reason: 'read-only may not' };
    expect((await request('POST', 'bulk', { token: READ_ONLY, body })).status).toBe(403);
    expect((await request('POST', 'bulk/1/cancel', { token: READ_ONLY, body: {} })).status).toBe(403);
    expect((await request('POST', 'bulk', { token: null, body })).status).toBe(401);
    expect((await request('GET', 'bulk', { token: READ_ONLY })).status).toBe(200);
    expect(await db(`SELECT count(*)::int AS n FROM kafka_eo_bulk_operations`)).toEqual([{ n: 0 }]);
    expect(await db(`SELECT count(*)::int AS n FROM kafka_eo_audit`)).toEqual([{ n: 0 }]);
  });

  it('validates a start: a reason, a rate of 1 to 100, and the dry run\'s count', async () => {
    const base = { kind: 'dead-letters', action: 'replay', filter: { error: 'ledger' } };
    expect(await request('POST', 'bulk', { body: base })).toMatchObject({ status: 400, body: { field: 'reason' } });
    expect(await request('POST', 'bulk', { body: { ...base, reason: 'r', ratePerSecond: 1000 } })).toMatchObject({ status: 400, body: { field: 'ratePerSecond' } });
    expect(await request('POST', 'bulk', { body: { ...base, reason: 'r', filter: { error: 'ledger', when: 'now' } } })).toMatchObject({ status: 400, body: { field: 'when' } });
    const stale = await request('POST', 'bulk', { body: { ...base, reason: 'r', expect: 19 } });
    expect(stale).toMatchObject({ status: 409, body: { message: expect.stringContaining('the dry run counted 19') } });
    expect(await db(`SELECT count(*)::int AS n FROM kafka_eo_bulk_operations`)).toEqual([{ n: 0 }]);
  });

  it('replays every matched dead letter once, one operation however often it is started, those not matched untouched', async () => {
    const start = { kind: 'dead-letters', action: 'replay', filter: { topic, error: 'ledger refused' }, reason: 'ledger fixed (OPS-77)', ratePerSecond: 100, expect: 20, actor: 'jane' };
    // The same bulk action started twice at once, once with the filter's fields in another order and spelling.
    const [a, b] = await Promise.all([request('POST', 'bulk', { body: start }), request('POST', 'bulk', { body: { ...start, filter: { error: 'ledger refused', topic, key: '' } } })]);
    expect([a.status, b.status].sort()).toEqual([200, 201]);
    expect(a.body.id).toBe(b.body.id);
    expect(a.body).toMatchObject({ kind: 'dead-letters', action: 'replay', matched: 20, ratePerSecond: 100, actor: 'token:oncall-team', declaredActor: 'jane', reason: 'ledger fixed (OPS-77)' });
    const id = a.body.id as string;
    await finished(id);
    const done = await bulk(id);
    expect(done).toMatchObject({ state: 'done', matched: 20, acted: 20, skipped: 0, failed: 0, walked: true, outcomes: { pending: 0, running: 0, done: 20, failed: 0 } });
    expect(await db(`SELECT count(*)::int AS n FROM kafka_eo_bulk_operations`)).toEqual([{ n: 1 }]);

    // Each matched refund applied once, the others not at all.
    const applied = await db<{ refund_id: string; n: number }>(`SELECT refund_id, count(*)::int AS n FROM bulk_refunds_applied GROUP BY refund_id ORDER BY refund_id`);
    const ledgerRefunds = Array.from({ length: 30 }, (_, i) => i + 1).filter((i) => i % 3 !== 0).map((i) => `r-${i}`).sort();
    expect(applied).toEqual(ledgerRefunds.map((refund_id) => ({ refund_id, n: 1 })));
    expect(await db(`SELECT status, count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL GROUP BY status ORDER BY status`)).toEqual([
      { status: 'dead-lettered', n: 10 },
      { status: 'replayed', n: 20 },
    ]);
    // One audit row per record, naming the bulk action, who and why.
    const audit = await db(`SELECT message_id, action, state, reason, actor, declared_actor FROM kafka_eo_audit WHERE bulk_id = $1 ORDER BY message_id`, [id]);
    expect(audit.map((r) => r.message_id)).toEqual(ledgerRefunds);
    expect(new Set(audit.map((r) => JSON.stringify([r.action, r.state, r.reason, r.actor, r.declared_actor])))).toEqual(
      new Set([JSON.stringify(['replay', 'done', `bulk #${id}: ledger fixed (OPS-77)`, 'token:oncall-team', 'jane'])]),
    );
    const page = await request('GET', `audit?action=replay&limit=50`);
    expect(page.body.items).toHaveLength(20);

    // Started again now: a new operation that matches nothing and acts on nothing.
    const again = await request('POST', 'bulk', { body: { ...start, expect: 0 } });
    expect(again).toMatchObject({ status: 201, body: { matched: 0 } });
    await finished(again.body.id);
    expect(await bulk(again.body.id)).toMatchObject({ state: 'done', acted: 0 });
    expect((await db(`SELECT count(*)::int AS n FROM bulk_refunds_applied`))[0].n).toBe(20);
    expect((await request('GET', 'bulk')).body.items.map((o: { id: string }) => o.id)).toEqual([again.body.id, id]);
  }, 60000);

  it('stops at a cancel; a crashed instance\'s lease expires and the walk goes on from its cursor, acting on no record twice', async () => {
    const start = { kind: 'dead-letters', action: 'replay', filter: { error: 'card expired' }, reason: 'cards renewed', ratePerSecond: 2 };
    const first = await request('POST', 'bulk', { body: start });
    expect(first).toMatchObject({ status: 201, body: { matched: 10 } });
    const cancelled = await request('POST', `bulk/${first.body.id}/cancel`, { body: { actor: 'jane' } });
    expect(cancelled).toMatchObject({ status: 200, body: { state: 'cancelled', cancelledBy: 'token:oncall-team' } });
    const actedBeforeCancel = cancelled.body.acted as number;
    await new Promise((r) => setTimeout(r, 1200));
    expect((await bulk(first.body.id)).acted).toBe(actedBeforeCancel);
    expect((await request('POST', `bulk/${first.body.id}/cancel`, { body: {} })).status).toBe(409);

    const second = await request('POST', 'bulk', { body: start });
    expect(second.status).toBe(201);
    const id = second.body.id as string;
    await waitUntil(async () => (await bulk(id)).acted >= 2, 20000, 'two dead letters acted on');
    // An instance that acted on items and crashed before its cursor moved (the worst case: the cursor back at the
    // start), its lease still held: nothing moves until the lease expires, then the walk goes on from the cursor.
    await db(`UPDATE kafka_eo_bulk_operations SET lease_owner = 'crashed-instance:1:dead', lease_until = now() + interval '2 seconds', cursor = NULL WHERE id = $1`, [id]);
    const held = await bulk(id);
    expect(held.lease.owner).toBe('crashed-instance:1:dead');
    await new Promise((r) => setTimeout(r, 1000));
    expect((await bulk(id)).acted).toBe(held.acted);
    await finished(id, 30000);
    const done = await bulk(id);
    expect(done).toMatchObject({ state: 'done', failed: 0 });
    expect(done.acted + actedBeforeCancel).toBe(10);
    // Walked again from the start: a dead letter replayed already is no longer among those waiting (the walk reads
    // only those), one whose replay is still queued is skipped; none is queued twice.
    expect(Object.keys(done.skipReasons).every((r) => ['replayed already', 'a replay of it is open'].includes(r))).toBe(true);
    const applied = await db<{ refund_id: string; n: number }>(`SELECT refund_id, count(*)::int AS n FROM bulk_refunds_applied GROUP BY refund_id`);
    expect(applied).toHaveLength(30);
    expect(applied.every((r) => r.n === 1)).toBe(true);
    expect(await db(`SELECT count(*)::int AS n FROM kafka_eo_audit WHERE action = 'replay'`)).toEqual([{ n: 30 }]);
    expect(await db(`SELECT count(DISTINCT message_id)::int AS n FROM kafka_eo_audit WHERE action = 'replay'`)).toEqual([{ n: 30 }]);
  }, 60000);

  it('releases the parked keys a filter matches, each once, their records in order; the others stay parked', async () => {
    const schema = SchemaRegistry.fromDirectory(directory).current('test.refunds.RefundRequested');
    const records = [1, 2, 3, 4].flatMap((k) => ['a', 'b'].map((n) => ({ key: `acct-p${k}`, value: encodeSingleObject(schema, { refundId: `p-${k}${n}` }), headers: { 'message-id': `p-${k}${n}` } })));
    await sendRaw(kafka, payments, records);
    await waitUntil(async () => (await db(`SELECT count(*)::int AS n FROM kafka_eo_parked_records WHERE topic = $1 AND state = 'parked'`, [payments]))[0].n === 8, 60000, 'four keys parked, two records each');
    app.get(PaymentsHandler).broken = false;
    const dry = await request('GET', `bulk/dry-run?${new URLSearchParams({ kind: 'parked-keys', action: 'release', topic: payments, error: 'gateway' })}`);
    expect(dry.body).toMatchObject({ matched: 3, atLeast: false });
    expect(dry.body.sample.map((k: { key: string }) => k.key).sort()).toEqual(['acct-p1', 'acct-p2', 'acct-p3']);
    const start = { kind: 'parked-keys', action: 'release', filter: { topic: payments, error: 'gateway' }, reason: 'gateway back', ratePerSecond: 100, expect: 3 };
    const [a, b] = await Promise.all([request('POST', 'bulk', { body: start }), request('POST', 'bulk', { body: start })]);
    expect([a.status, b.status].sort()).toEqual([200, 201]);
    expect(a.body.id).toBe(b.body.id);
    await finished(a.body.id);
    expect(await bulk(a.body.id)).toMatchObject({ state: 'done', acted: 3, skipped: 0, failed: 0, outcomes: { done: 3, failed: 0, pending: 0, running: 0 } });
    const applied = await db<{ refund_id: string }>(`SELECT refund_id FROM bulk_refunds_applied WHERE refund_id LIKE 'p-%' ORDER BY applied_at`);
    expect(applied.map((r) => r.refund_id).sort()).toEqual(['p-1a', 'p-1b', 'p-2a', 'p-2b', 'p-3a', 'p-3b']);
    for (const k of [1, 2, 3]) expect(applied.map((r) => r.refund_id).filter((r) => r.startsWith(`p-${k}`))).toEqual([`p-${k}a`, `p-${k}b`]);
    expect(await db(`SELECT ordering_key FROM kafka_eo_parked_keys WHERE topic = $1`, [payments])).toEqual([{ ordering_key: 'acct-p4' }]);
    const audit = await db(`SELECT ordering_key, reason FROM kafka_eo_audit WHERE bulk_id = $1 ORDER BY ordering_key`, [a.body.id]);
    expect(audit).toEqual(['acct-p1', 'acct-p2', 'acct-p3'].map((k) => ({ ordering_key: k, reason: `bulk #${a.body.id}: gateway back` })));
  }, 90000);

  it('retries or discards the outbox\'s events set aside that a filter matches, each once, recorded on its row', async () => {
    // Events the relay set aside (as it records them: Kafka refused them for good).
    await db(
      `INSERT INTO kafka_eo_outbox_set_aside (position, id, aggregatetype, aggregateid, type, payload, headers, created_at, reason)
       SELECT 1000 + i, 'evt-' || i, 'orders', convert_to('order-' || i, 'UTF8'), 'test.Order', decode('00', 'hex'), convert_to('{}', 'UTF8'), now(),
              CASE WHEN i <= 2 THEN 'MESSAGE_TOO_LARGE: 2000000 bytes' ELSE 'TOPIC_AUTHORIZATION_FAILED: orders' END
       FROM generate_series(1, 5) AS i`,
    );
    const dry = await request('GET', `bulk/dry-run?${new URLSearchParams({ kind: 'outbox-set-aside', action: 'discard', error: 'too_large' })}`);
    expect(dry.body).toMatchObject({ matched: 2, sample: [{ position: '1001', messageId: 'evt-1', topic: 'orders', key: 'order-1' }, { position: '1002' }] });
    expect((await request('GET', `bulk/dry-run?${new URLSearchParams({ kind: 'outbox-set-aside', action: 'retry', reason: 'handler-failed' })}`)).body.field).toBe('reason');
    const discard = await request('POST', 'bulk', { body: { kind: 'outbox-set-aside', action: 'discard', filter: { error: 'too_large' }, reason: 'too large for good', ratePerSecond: 100, expect: 2 } });
    expect(discard.status).toBe(201);
    await finished(discard.body.id);
    expect(await bulk(discard.body.id)).toMatchObject({ state: 'done', acted: 2, outcomes: null });
    const retry = await request('POST', 'bulk', { body: { kind: 'outbox-set-aside', action: 'retry', filter: {}, reason: 'authorised now', ratePerSecond: 100, expect: 3 } });
    await finished(retry.body.id);
    expect(await bulk(retry.body.id)).toMatchObject({ state: 'done', acted: 3 });
    expect(await db(`SELECT position::int AS position, state, resolved_by, note FROM kafka_eo_outbox_set_aside ORDER BY position`)).toEqual([
      ...[1001, 1002].map((position) => ({ position, state: 'discarded', resolved_by: 'token:oncall-team', note: `bulk #${discard.body.id}: too large for good` })),
      ...[1003, 1004, 1005].map((position) => ({ position, state: 'retried', resolved_by: 'token:oncall-team', note: `bulk #${retry.body.id}: authorised now` })),
    ]);
    expect(await db(`SELECT id FROM kafka_eo_outbox ORDER BY position`)).toEqual([{ id: 'evt-3' }, { id: 'evt-4' }, { id: 'evt-5' }]);
  });

  it('stops as failed on an item that always fails, having acted on the ones before it once; started again, it goes on past none of them twice', async () => {
    await db(
      `INSERT INTO kafka_eo_outbox_set_aside (position, id, aggregatetype, aggregateid, type, payload, headers, created_at, reason)
       SELECT 2000 + i, 'stuck-' || i, 'orders', convert_to('order-' || i, 'UTF8'), 'test.Order', decode('00', 'hex'), convert_to('{}', 'UTF8'), now(), 'POISON: ' || i
       FROM generate_series(1, 3) AS i`,
    );
    // The second event's retry fails whatever is tried (a trigger of the application's refuses it).
    await db(`CREATE FUNCTION refuse_stuck() RETURNS trigger AS $$ BEGIN IF NEW.id = 'stuck-2' THEN RAISE EXCEPTION 'the orders table refuses stuck-2'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await db(`CREATE TRIGGER refuse_stuck BEFORE INSERT ON kafka_eo_outbox FOR EACH ROW EXECUTE FUNCTION refuse_stuck()`);
    try {
      const start = await request('POST', 'bulk', { body: { kind: 'outbox-set-aside', action: 'retry', filter: { error: 'poison' }, reason: 'try them', ratePerSecond: 100, expect: 3 } });
      await finished(start.body.id, 60000);
      const stopped = await bulk(start.body.id);
      expect(stopped).toMatchObject({ state: 'failed', acted: 1 });
      expect(stopped.lastError).toMatch(/stopped after 10 failures in a row on the item after cursor .*the orders table refuses stuck-2/);
      expect(await db(`SELECT id, state FROM kafka_eo_outbox_set_aside WHERE id LIKE 'stuck-%' ORDER BY position`)).toEqual([
        { id: 'stuck-1', state: 'retried' },
        { id: 'stuck-2', state: 'set-aside' },
        { id: 'stuck-3', state: 'set-aside' },
      ]);
    } finally {
      await db(`DROP TRIGGER refuse_stuck ON kafka_eo_outbox`);
      await db(`DROP FUNCTION refuse_stuck()`);
    }
    // Started again: what is left, each once.
    const again = await request('POST', 'bulk', { body: { kind: 'outbox-set-aside', action: 'retry', filter: { error: 'poison' }, reason: 'try them again', ratePerSecond: 100, expect: 2 } });
    expect(again.status).toBe(201);
    await finished(again.body.id);
    expect(await bulk(again.body.id)).toMatchObject({ state: 'done', acted: 2 });
    expect(await db(`SELECT id FROM kafka_eo_outbox WHERE id LIKE 'stuck-%' ORDER BY id`)).toEqual([{ id: 'stuck-1' }, { id: 'stuck-2' }, { id: 'stuck-3' }]);
  }, 90000);

  it('kafka-eo bulk prints the same documents as the API, and refuses what it refuses', async () => {
    const cli = async (...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runKafkaEo([...args, '--group', `${prefix}group`, '--json'], { DATABASE_URL: databaseUrl, USER: 'cli-user' }, { out: (t) => out.push(t), err: (t) => err.push(t) });
      return { code, document: out.length ? JSON.parse(out.join('')) : undefined, err: err.join('') };
    };
    const filter = { topic: payments };
    const dry = await cli('bulk', 'dry-run', '--kind', 'parked-keys', '--action', 'release', '--topic', payments);
    expect(dry.code).toBe(0);
    expect(dry.document).toEqual((await request('GET', `bulk/dry-run?${new URLSearchParams({ kind: 'parked-keys', action: 'release', ...filter })}`)).body);
    const list = await cli('bulk', 'list');
    expect(list.document).toEqual((await request('GET', 'bulk')).body);
    const [last] = list.document.items;
    expect((await cli('bulk', 'status', last.id)).document).toEqual(await bulk(last.id));
    expect(await cli('bulk', 'start', '--kind', 'dead-letters', '--action', 'replay', '--rate', '500', '--reason', 'r')).toMatchObject({ code: 2, document: { statusCode: 400, field: 'ratePerSecond' } });
    expect(await cli('bulk', 'cancel', last.id)).toMatchObject({ code: 4 });
  });

  const inBrowser = chromiumPath() ? it : it.skip;
  inBrowser('the console\'s bulk flow: filter, dry run, confirm, progress, audit; a second start acts on nothing; the read-only token may look, not act', async () => {
    // Five more refunds refused while the ledger is down again.
    handler.broken = true;
    await refunds(5, 31);
    await waitUntil(async () => (await db(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL AND topic = $1`, [topic]))[0].n === 35, 60000, 'five more refunds dead-lettered');
    handler.broken = false;
    const browser: Browser = await launchChromium();
    try {
      const page: Page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
      const watch: PageWatch = await watchPage(page);
      const shots = screenshotDirectory();
      const signIn = async (token: string) => {
        await page.goto(`${origin}/kafka-eo/#/overview`);
        await page.waitForSelector('input[name=token]');
        await page.fill('input[name=token]', token);
        await page.fill('input[name=actor]', 'jane');
        await page.click('form.signin button[type=submit]');
        await page.waitForSelector('[data-testid=partitions]');
      };
      await signIn(TOKEN);
      // The dead letters of a filter, and from there the bulk action on the same filter, its dry run run at once.
      await page.goto(`${origin}/kafka-eo/#/dead-letters?topic=${encodeURIComponent(topic)}&reason=handler-failed`);
      await page.waitForSelector('[data-testid=dead-letters] tbody tr');
      await page.click('.bulk-link a');
      await page.waitForSelector('[data-testid=bulk-matched]');
      expect(await page.textContent('[data-testid=bulk-matched]')).toContain('5 items match now');
      expect(await page.locator('[data-testid=bulk-sample] tbody tr').count()).toBe(5);
      expect(await page.inputValue('input[name=topic]')).toBe(topic);
      // A narrower filter: the error's text.
      await page.fill('input[name=error]', 'card expired');
      await page.click('[data-testid=bulk-dry-run]');
      await page.waitForFunction(() => (globalThis as any).document.querySelector('[data-testid=bulk-matched]')?.textContent.includes('1 item matches'));
      await page.fill('input[name=error]', '');
      await page.fill('input[name=rate]', '50');
      await page.click('[data-testid=bulk-dry-run]');
      await page.waitForFunction(() => (globalThis as any).document.querySelector('[data-testid=bulk-matched]')?.textContent.includes('5 items match'));
      await page.screenshot({ path: join(shots, 'bulk-dry-run.png'), fullPage: true });
      // Confirm: a reason is required.
      await page.click('[data-testid=bulk-start]');
      await page.waitForSelector('[role=dialog]');
      expect(await page.getAttribute('[role=dialog] textarea', 'required')).toBe('');
      expect(await page.textContent('[role=dialog]')).toContain('Replay dead letters: 5 items?');
      await page.fill('[role=dialog] textarea', 'ledger back (OPS-78)');
      await page.screenshot({ path: join(shots, 'bulk-confirmation.png') });
      await page.click('[role=dialog] button[type=submit]');
      // The progress page, refreshed until done.
      await page.waitForSelector('[data-testid=bulk-state]');
      const id = /#\/bulk\/([0-9]+)$/.exec(page.url())![1];
      await page.waitForSelector('[data-testid=bulk-state][data-state=done]', { timeout: 30000 });
      expect(await page.textContent('[data-testid=bulk-acted]')).toBe('5');
      expect(await page.textContent('[data-testid=bulk-outcomes]')).toContain('5 done, 0 failed, 0 waiting');
      await page.screenshot({ path: join(shots, 'bulk-progress.png'), fullPage: true });
      expect(await db(`SELECT count(*)::int AS n FROM bulk_refunds_applied WHERE refund_id IN ('r-31', 'r-32', 'r-33', 'r-34', 'r-35')`)).toEqual([{ n: 5 }]);
      // The audit: one row per record, naming the bulk action and the reason.
      await page.goto(`${origin}/kafka-eo/#/audit?action=replay`);
      await page.waitForSelector('[data-testid=audit] tbody tr');
      const auditText = await page.textContent('[data-testid=audit]');
      expect(auditText!.split(`bulk #${id}: ledger back (OPS-78)`).length - 1).toBe(5);
      // Started again from the page: nothing matches, nothing to start; the list shows the bulk action once.
      await page.goto(`${origin}/kafka-eo/#/bulk?what=dead-letters%3Areplay&dry=1&topic=${encodeURIComponent(topic)}&reason=handler-failed`);
      await page.waitForSelector('[data-testid=bulk-matched]');
      expect(await page.textContent('[data-testid=bulk-matched]')).toContain('0 items match');
      expect(await page.locator('[data-testid=bulk-start]').count()).toBe(0);
      expect(await page.locator(`[data-testid=bulk-list] a[href="#/bulk/${id}"]`).count()).toBe(1);
      expect(await db(`SELECT count(*)::int AS n FROM kafka_eo_audit WHERE bulk_id = $1`, [id])).toEqual([{ n: 5 }]);

      // The read-only token: the dry run shows, the start is refused (403) and nothing is queued.
      await page.evaluate('sessionStorage.clear()');
      await signIn(READ_ONLY);
      const before = (await db(`SELECT count(*)::int AS n FROM kafka_eo_audit`))[0].n;
      await page.goto(`${origin}/kafka-eo/#/bulk?what=dead-letters%3Areplay&dry=1`);
      await page.waitForSelector('[data-testid=bulk-matched]');
      handler.broken = true;
      await refunds(1, 36);
      await waitUntil(async () => (await db(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL AND topic = $1`, [topic]))[0].n === 36, 60000, 'one more refund dead-lettered');
      handler.broken = false;
      await page.click('[data-testid=bulk-dry-run]');
      await page.waitForFunction(() => (globalThis as any).document.querySelector('[data-testid=bulk-matched]')?.textContent.includes('1 item matches'));
      await page.click('[data-testid=bulk-start]');
      await page.fill('[role=dialog] textarea', 'may I?');
      await page.click('[role=dialog] button[type=submit]');
      await page.waitForSelector('[data-testid=bulk-start-progress] .status-error');
      expect(await page.textContent('[data-testid=bulk-start-progress]')).toContain('this token may only read');
      await page.goto(`${origin}/kafka-eo/#/bulk/${id}`);
      await page.waitForSelector('[data-testid=bulk-state]');
      expect((await db(`SELECT count(*)::int AS n FROM kafka_eo_audit`))[0].n).toBe(before);
      expect(await db(`SELECT count(*)::int AS n FROM kafka_eo_bulk_operations WHERE state = 'running'`)).toEqual([{ n: 0 }]);

      expect({ dialogs: watch.dialogs, errors: watch.errors, violations: await watch.violations(), foreign: watch.foreign(origin, ['/kafka-eo/']) }).toEqual({ dialogs: [], errors: [], violations: [], foreign: [] });
    } finally {
      await browser.close();
    }
  }, 90000);
});
