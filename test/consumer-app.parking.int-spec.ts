import { randomUUID } from 'crypto';
import { Kafka } from 'kafkajs';
import { Client } from 'pg';
import { ConsumerAppScope, consumerAppPort, createConsumerAppScope, runKafkaEoCli, startConsumerApp } from './support/consumer-app';
import { AppProcess } from './support/processes';
import { readTopic } from './support/kafka';
import { processSuite } from './support/suite';
import { checkPaymentInvariants, foldPayments, parkingWorkload, Payment, PublishedPayment, readProcessed, republish, waitForGroupCaughtUp, waitUntil } from './support/payments';

const TOKEN = 'parking-suite-token-0123456789abcdef';


interface Reply {
  status: number;
  body: any;
}

async function call(app: AppProcess, method: 'GET' | 'POST', path: string, options: { body?: unknown; token?: string | null; rawBody?: string } = {}): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const token = options.token === undefined ? TOKEN : options.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const response = await fetch(`http://127.0.0.1:${consumerAppPort(app)}${path}`, {
    method,
    headers,
    body: options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

const cli = runKafkaEoCli;

async function query<T = any>(scope: ConsumerAppScope, sql: string, params: unknown[] = []): Promise<T[]> {
  const db = new Client({ connectionString: scope.databaseUrl });
  await db.connect();
  try {
    return (await db.query(sql, params)).rows;
  } finally {
    await db.end();
  }
}

/** The payments of the workload before the failing one, by account: what may be applied while it is parked. */
function beforeParking(published: PublishedPayment[], target: string, big: Payment): Payment[] {
  const index = published.findIndex((p) => p.payment.paymentId === big.paymentId);
  return published.map((p) => p.payment).filter((p, i) => p.accountId !== target || i < index);
}

async function checkWhileParked(scope: ConsumerAppScope, published: PublishedPayment[], target: string, big: Payment): Promise<number> {
  const expected = foldPayments(beforeParking(published, target, big));
  const accounts = await query(scope, 'SELECT account_id, balance_cents::text AS balance FROM accounts');
  expect(new Map(accounts.map((a) => [a.account_id, BigInt(a.balance)]))).toEqual(expected.balances);
  const ledger = await query(scope, 'SELECT count(*)::int AS n FROM ledger_entries');
  expect(ledger[0].n).toBe(expected.status.size);
  return published.length - expected.status.size;
}

/**
 * consumer-app as a real process with @OrderedEvent by account: a payment that fails for good parks its
 * account, the account's later payments are parked in order while every other account flows; after the cause
 * is fixed, a release (REST with two SIGKILLs, one of them in the middle of the release; and the CLI) applies
 * them in order exactly once; the admin API refuses bad requests clearly.
 */
describe('consumer-app: parked accounts, released by an operator', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('parks the account, keeps it parked across a SIGKILL, and a REST release killed half-way applies its payments in order exactly once', async () => {
    const scope = await createConsumerAppScope('parking-rest');
    const topic = scope.topic('payments.requested');
    let app = await startConsumerApp(processes, scope, { ADMIN_TOKEN: TOKEN });
    const { published, target, big } = parkingWorkload(3000, 25, 71);
    await republish(kafka, topic, published);
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 180000);

    const parkedCount = await checkWhileParked(scope, published, target, big);
    expect(parkedCount).toBeGreaterThan(4);
    const list = await call(app, 'GET', `/kafka-eo/parked-keys?topic=${encodeURIComponent(topic)}`);
    expect(list.status).toBe(200);
    expect(list.body.items).toEqual([expect.objectContaining({ topic, key: target, reason: 'handler-failed', parkedRecords: parkedCount, messageId: published.find((p) => p.payment === big)!.messageId })]);
    expect(list.body.items[0].error.message).toContain('needs an approval');
    const health = await call(app, 'GET', '/health', { token: null });
    expect(health.body.details.database).toMatchObject({ status: 'up', parkedKeys: 1, parked: [`${topic} ${target}`] });
    expect(app.logs()).toMatch(new RegExp(`key parked .*"key":"${target}"`));

    // SIGKILL while the account is parked: nothing of it moves, and it is still parked after the restart.
    await app.kill();
    app = await startConsumerApp(processes, scope, { ADMIN_TOKEN: TOKEN });
    await republish(kafka, topic, published.slice(0, 50)); // duplicates after the restart change nothing either
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 60000);
    expect(await checkWhileParked(scope, published, target, big)).toBe(parkedCount);
    // The key's records come a page at a time (50 unless asked), with a cursor to the rest.
    const keyPath = `/kafka-eo/parked-keys/${encodeURIComponent(topic)}/${encodeURIComponent(target)}`;
    const firstPage = (await call(app, 'GET', keyPath)).body;
    expect(firstPage.parkedRecords).toBe(parkedCount);
    expect(firstPage.records).toHaveLength(Math.min(parkedCount, 50));
    expect(firstPage.next === null).toBe(parkedCount <= 50);
    expect((await call(app, 'GET', `${keyPath}?limit=500`)).body.records).toHaveLength(parkedCount);

    // The fix: the deposit is approved. The release is killed after its second replay's PostgreSQL commit.
    await query(scope, `INSERT INTO payment_approvals (payment_id, approved_by) VALUES ($1, 'test')`, [big.paymentId]);
    await app.kill();
    app = await startConsumerApp(processes, scope, { ADMIN_TOKEN: TOKEN, KAFKA_EO_FAULT: 'after-replay-db-commit:2' });
    const queued = await call(app, 'POST', `/kafka-eo/parked-keys/${encodeURIComponent(topic)}/${encodeURIComponent(target)}/release`, { body: { wait: false, actor: 'oncall' } });
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ action: 'release', key: target, actor: 'token:admin', declaredActor: 'oncall', state: 'pending' });
    expect(await app.waitForExit(60000)).toBeNull(); // SIGKILLed by the fault
    app = await startConsumerApp(processes, scope, { ADMIN_TOKEN: TOKEN });
    await waitUntil(async () => (await call(app, 'GET', `/kafka-eo/operations/${queued.body.id}`)).body.state === 'done', 60000, 'the release done');
    expect((await call(app, 'GET', `/kafka-eo/operations/${queued.body.id}`)).body.result).toEqual({ replayed: parkedCount });
    expect(app.logs()).toMatch(/sending the outputs of 1 replay\(s\) whose Kafka transaction did not commit/);

    // Every account, the released one too, equals the in-order fold; one output per payment, in input order.
    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
    expect(summary).toMatchObject({ ledgerRows: published.length, outputs: published.length });
    const spends = await query(scope, `SELECT status FROM ledger_entries WHERE account_id = $1 AND amount_cents <= -600000`, [target]);
    expect(spends.map((s) => s.status)).toEqual(['ACCEPTED', 'ACCEPTED', 'ACCEPTED']);
    expect((await call(app, 'GET', '/kafka-eo/parked-keys')).body.items).toEqual([]);
    expect((await call(app, 'GET', '/health', { token: null })).body.details.database.parkedKeys).toBe(0);
  }, 600000);

  it('releases through the CLI (its --json matches the REST answers) and the admin API refuses bad requests clearly', async () => {
    const scope = await createConsumerAppScope('parking-cli');
    const topic = scope.topic('payments.requested');
    const app = await startConsumerApp(processes, scope, { ADMIN_TOKEN: TOKEN });
    const { published, target, big } = parkingWorkload(800, 10, 72);
    await republish(kafka, topic, published);
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 120000);
    const parkedCount = await checkWhileParked(scope, published, target, big);

    // The CLI and REST give the same documents.
    const listed = await cli(scope, ['parked', 'list', '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual((await call(app, 'GET', '/kafka-eo/parked-keys')).body);
    const shown = await cli(scope, ['parked', 'show', topic, target, '--json']);
    expect(JSON.parse(shown.stdout)).toEqual((await call(app, 'GET', `/kafka-eo/parked-keys/${encodeURIComponent(topic)}/${encodeURIComponent(target)}`)).body);
    const table = await cli(scope, ['parked', 'list']);
    expect(table.stdout).toMatch(new RegExp(`TOPIC +KEY +REASON +PARKEDRECORDS[^\\n]*\\n${topic.replace(/\./g, '\\.')} +${target} +handler-failed +${parkedCount} `));

    // Auth: no token, a wrong token, a token of another length, a non-Bearer scheme: 401, nothing done.
    const path = `/kafka-eo/parked-keys/${encodeURIComponent(topic)}/${encodeURIComponent(target)}/release`;
    for (const token of [null, 'parking-suite-token-0123456789abcdeX', 'short', '']) {
      const denied = await call(app, 'POST', path, { token, body: {} });
      expect({ token, status: denied.status }).toEqual({ token, status: 401 });
    }
    expect((await call(app, 'GET', '/kafka-eo/dead-letters', { token: 'x'.repeat(10000) })).status).toBe(401);
    expect((await query(scope, 'SELECT count(*)::int AS n FROM kafka_eo_audit'))[0].n).toBe(0);
    // Malformed input: 400 naming the field.
    const badBodies: Array<[string, string, unknown, string]> = [
      ['POST', path, { wait: 'yes' }, 'wait'],
      ['POST', path, { actor: 'a', force: true }, 'force'],
      ['POST', '/kafka-eo/parked-records/1/discard', { reason: 42 }, 'reason'],
      ['POST', '/kafka-eo/parked-records/1/discard', {}, 'reason'],
      ['POST', '/kafka-eo/parked-records/abc/discard', { reason: 'x' }, 'seq'],
      ['GET', '/kafka-eo/dead-letters?limit=abc', undefined, 'limit'],
      ['GET', '/kafka-eo/dead-letters?limit=501', undefined, 'limit'],
      ['GET', '/kafka-eo/dead-letters?reason=bogus', undefined, 'reason'],
      ['GET', '/kafka-eo/parked-keys?colour=red', undefined, 'colour'],
      ['POST', '/kafka-eo/dead-letters/not-an-id/replay', {}, 'id'],
    ];
    for (const [method, url, body, field] of badBodies) {
      const reply = await call(app, method as 'GET' | 'POST', url, { body });
      expect({ url, status: reply.status, field: reply.body.field }).toEqual({ url, status: 400, field });
      expect(reply.body.message).toContain(field);
    }
    const notJson = await call(app, 'POST', path, { rawBody: '{"wait": fa' });
    expect(notJson.status).toBe(400);
    // A key that is not parked: a clear 404 (REST) and exit code 3 (CLI).
    const missing = await call(app, 'POST', `/kafka-eo/parked-keys/${encodeURIComponent(topic)}/no-such-account/release`, { body: {} });
    expect(missing.status).toBe(404);
    expect(missing.body.message).toContain('no-such-account');
    expect((await cli(scope, ['parked', 'release', topic, 'no-such-account'])).code).toBe(3);
    expect((await cli(scope, ['parked', 'frobnicate'])).code).toBe(2);

    // The release, through the CLI, before the fix: it fails (exit 1) and the account stays parked.
    const failed = await cli(scope, ['parked', 'release', topic, target, '--json']);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ state: 'failed', result: { replayed: 0, error: { name: 'NonRetriableHandlerError' } } });
    expect(await checkWhileParked(scope, published, target, big)).toBe(parkedCount);
    // After the fix: done (exit 0), every payment applied once and in order.
    await query(scope, `INSERT INTO payment_approvals (payment_id, approved_by) VALUES ($1, 'test')`, [big.paymentId]);
    const released = await cli(scope, ['parked', 'release', topic, target, '--json', '--actor', 'cli-test']);
    expect({ code: released.code, stderr: released.stderr }).toEqual({ code: 0, stderr: '' });
    const entry = JSON.parse(released.stdout);
    expect(entry).toMatchObject({ state: 'done', actor: 'cli-test', result: { replayed: parkedCount } });
    expect(entry).toEqual((await call(app, 'GET', `/kafka-eo/operations/${entry.id}`)).body);
    await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);

    // A dead letter that parks nothing (no ordering key: an account id of blanks) is replayed once: twice is one effect.
    const orphan: PublishedPayment = { payment: { paymentId: randomUUID(), accountId: '  ', amountCents: 500n, requestedAt: new Date().toISOString() }, messageId: randomUUID() };
    await republish(kafka, topic, [orphan]);
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 60000);
    const letters = await call(app, 'GET', '/kafka-eo/dead-letters?reason=key-unresolved');
    expect(letters.body.items).toEqual([expect.objectContaining({ messageId: orphan.messageId, status: 'dead-lettered', reason: 'key-unresolved' })]);
    const dlqJson = await cli(scope, ['dlq', 'list', '--reason', 'key-unresolved', '--json']);
    expect(JSON.parse(dlqJson.stdout)).toEqual(letters.body);
    const id = letters.body.items[0].id;
    const first = await call(app, 'POST', `/kafka-eo/dead-letters/${id}/replay`, { body: { actor: 'oncall' } });
    expect({ status: first.status, state: first.body.state, result: first.body.result }).toEqual({ status: 200, state: 'done', result: { replayed: 1, outputs: 1 } });
    const second = await call(app, 'POST', `/kafka-eo/dead-letters/${id}/replay`, { body: {} });
    expect(second.status).toBe(409);
    expect(second.body.message).toContain('replayed already');
    expect((await cli(scope, ['dlq', 'replay', id])).code).toBe(4);
    expect(await query(scope, `SELECT status FROM ledger_entries WHERE payment_id = $1`, [orphan.payment.paymentId])).toEqual([{ status: 'ACCEPTED' }]);
    const outputs = await readProcessed(kafka, scope.topic('payments.processed'), published.length + 1);
    expect(outputs.filter((o) => o.event.paymentId === orphan.payment.paymentId)).toHaveLength(1);
    const shownLetter = await call(app, 'GET', `/kafka-eo/dead-letters/${id}`);
    expect(shownLetter.body).toMatchObject({ status: 'replayed', history: [expect.objectContaining({ action: 'replay', state: 'done', actor: 'token:admin', declaredActor: 'oncall' })] });
    const dlq = await readTopic(kafka, `${topic}.dlq`, { until: (rs) => rs.length >= parkedCount + 1, timeoutMs: 30000 });
    expect(dlq.filter((r) => r.headers['dlq-reason'] === 'key-parked')).toHaveLength(parkedCount - 1);
  }, 600000);
});
