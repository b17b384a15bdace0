import { ConsoleLogger, INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { AddressInfo } from 'net';
import type { Browser } from 'playwright-core';
import { EventContext, IdempotentHandler, KafkaExactlyOnceAdminModule, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import type { OpenTransactionsDocument, TransactionPartitionView } from 'kafka-exactly-once/admin/open-transactions';
import { partitionTransactionalId } from 'kafka-exactly-once/transaction/transactional-ids';
import { runKafkaEo } from 'kafka-exactly-once/cli/kafka-eo.command';
import { chromiumPath, launchChromium, screenshotDirectory, watchPage } from './support/browser';
import { join } from 'path';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { endOn, leaveHangingTransaction } from './support/hanging';
import { createTopics, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { offsetsPartitionOf } from 'kafka-exactly-once/client/hanging-transactions';
import { queryDatabase, schemasDirectory } from './support/library';
import { waitUntil } from './support/payments';

const TOKEN = 'open-transactions-suite-token-0123456789';
const READ_ONLY = 'open-transactions-suite-read-only-0123456789';
const NOTE = { type: 'record', name: 'Note', namespace: 'test.opentx', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.opentx.Note' })
  async onNote(_event: { id: string }, _ctx: EventContext): Promise<void> {}
}

/**
 * The console's open transactions (GET /kafka-eo/transactions, POST /kafka-eo/transactions/abort) against the real
 * broker and PostgreSQL: a transaction another application keeps open on an output topic (its coordinator tracks
 * it: listed, the abort refused with the time Kafka aborts it), a hanging one of another application (aborted,
 * audited, the partition stable again, once from the API and once from the page in Chromium), and a hanging one of
 * the group's own unit producer (named as such, the abort refused).
 */
describe('open transactions in the admin API and the console', () => {
  let app: INestApplication;
  let origin: string;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('opentx')}.`;
  const group = `${prefix}group`;
  const txPrefix = `${prefix}tx`;
  const notes = `${prefix}notes`;
  const out = `${prefix}out`;
  const kafka = testKafka();

  const request = (method: string, path: string, options: { token?: string | null; body?: unknown } = {}) => {
    const token = options.token === undefined ? TOKEN : options.token;
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
    return fetch(`${origin}/kafka-eo/${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) }).then(async (r) => {
      const text = await r.text();
      return { status: r.status, body: text ? JSON.parse(text) : undefined };
    });
  };
  const read = async (): Promise<OpenTransactionsDocument> => {
    const answer = await request('GET', 'transactions');
    expect(answer.status).toBe(200);
    return answer.body;
  };
  const partitionOf = (doc: OpenTransactionsDocument, topic: string, partition: number): TransactionPartitionView => doc.partitions.find((p) => p.topic === topic && p.partition === partition)!;
  /** kafka-eo in this process, asking the application at `origin`. */
  const cli = async (argv: string[], env: NodeJS.ProcessEnv) => {
    let out = '';
    let err = '';
    const code = await runKafkaEo([...argv, '--url', origin], { USER: 'jane', ...env }, { out: (t) => (out += t), err: (t) => (err += t) });
    return { code, out, err };
  };
  /** Waits until a partition has no transaction open: its last stable offset caught up with its high watermark. */
  const stable = (topic: string, partition: number) =>
    waitUntil(async () => {
      const p = partitionOf(await read(), topic, partition);
      return p.lastStableOffset !== null && p.lastStableOffset === p.highWatermark && p.open.length === 0;
    }, 15000, `${topic}[${partition}] stable`);

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('opentx');
    await createTopics(kafka, [notes, out], 2);
    const directory = schemasDirectory('opentx', { 'note.avsc': NOTE });

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'opentx-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: txPrefix,
          schemas: { directory },
          topicPrefix: prefix,
          topics: { out: { schema: 'test.opentx.Note' } },
          consumer: { sessionTimeout: 6000 },
        }),
        KafkaExactlyOnceAdminModule.forRoot({ token: TOKEN, readOnlyToken: READ_ONLY, tokenName: 'oncall', console: true }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}

    app = await NestFactory.create(NotesModule, { logger: new ConsoleLogger({ logLevels: ['error'] }) });
    await app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    await app.get(KafkaExactlyOnceLifecycle).whenRunning();
  }, 60000);

  afterAll(async () => {
    await app?.close();
  });

  it('lists every input and output partition stable while nothing is open', async () => {
    const doc = await read();
    expect(doc.unreadable).toEqual({});
    const roles = doc.partitions.map((p) => `${p.topic}[${p.partition}] ${p.role}`);
    expect(roles).toEqual(expect.arrayContaining([`${notes}[0] input`, `${notes}[1] input`, `${out}[0] output`, `${out}[1] output`, `${notes}.dlq[0] output`]));
    for (const p of doc.partitions) expect({ p: `${p.topic}[${p.partition}]`, open: p.open, stable: p.lastStableOffset === p.highWatermark }).toEqual({ p: `${p.topic}[${p.partition}]`, open: [], stable: true });
  });

  it("shows another application's open transaction and leaves it to its coordinator: the abort refused (409) with the time Kafka aborts it, 403 for the read-only token, 400 without a reason", async () => {
    const producer = kafka.producer({ transactionalId: `${prefix}billing`, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 60000 });
    await producer.connect();
    const txn = await producer.transaction();
    try {
      const before = Date.now();
      await txn.send({ topic: out, messages: [{ key: 'k', value: 'not committed yet', partition: 0 }] });
      const p = partitionOf(await read(), out, 0);
      expect(BigInt(p.lastStableOffset!)).toBeLessThan(BigInt(p.highWatermark!));
      expect(p.open).toHaveLength(1);
      const open = p.open[0];
      expect(open).toMatchObject({ transactionalId: `${prefix}billing`, coordinatorState: 'Ongoing', startOffset: p.lastStableOffset, owner: { kind: 'other' }, doing: null, abortable: false, sinceFrom: 'record' });
      expect(new Date(open.since!).getTime()).toBeGreaterThanOrEqual(before - 5000);
      // Its coordinator aborts it at its start plus its timeout (60 s).
      expect(new Date(open.timeoutAt!).getTime() - new Date(open.since!).getTime()).toBeGreaterThan(55000);
      expect(open.refusal).toContain('coordinator still tracks');

      const body = { topic: out, partition: 0, producerId: open.producerId, startOffset: open.startOffset, reason: 'stuck' };
      expect((await request('POST', 'transactions/abort', { token: READ_ONLY, body })).status).toBe(403);
      const noReason = await request('POST', 'transactions/abort', { body: { ...body, reason: undefined } });
      expect({ status: noReason.status, field: noReason.body.field }).toEqual({ status: 400, field: 'reason' });
      const refused = await request('POST', 'transactions/abort', { body });
      expect(refused.status).toBe(409);
      expect(refused.body.message).toContain(`its coordinator still tracks transaction ${prefix}billing (state Ongoing)`);
      expect(refused.body.message).toContain(open.timeoutAt);
      // The same from kafka-eo: listed; the abort refused (exit 4), and refused to the read-only token (exit 1).
      const listed = await cli(['transactions', 'list', '--json'], { ADMIN_READ_ONLY_TOKEN: READ_ONLY });
      expect(listed.code).toBe(0);
      expect(partitionOf(JSON.parse(listed.out), out, 0).open).toEqual([expect.objectContaining({ producerId: open.producerId, transactionalId: `${prefix}billing` })]);
      expect((await cli(['transactions', 'list'], { ADMIN_TOKEN: TOKEN })).out).toMatch(new RegExp(`${out.replace(/\./g, '\\.')}\\[0\\]\\s+output`));
      const cliRefused = await cli(['transactions', 'abort', out, '0', open.producerId, open.startOffset, '--reason', 'stuck'], { ADMIN_TOKEN: TOKEN });
      expect({ code: cliRefused.code, err: cliRefused.err }).toEqual({ code: 4, err: expect.stringContaining('coordinator still tracks') });
      expect((await cli(['transactions', 'abort', out, '0', open.producerId, open.startOffset, '--reason', 'stuck'], { ADMIN_TOKEN: READ_ONLY })).code).toBe(1);
      expect((await cli(['transactions', 'abort', out, '0', open.producerId, open.startOffset], { ADMIN_TOKEN: TOKEN })).code).toBe(2);
      // The start offset is part of what names the transaction: without it, 400.
      expect((await request('POST', 'transactions/abort', { body: { ...body, startOffset: undefined } })).body.field).toBe('startOffset');
      // Not a partition of the group: 404.
      expect((await request('POST', 'transactions/abort', { body: { ...body, topic: `${prefix}elsewhere` } })).status).toBe(404);
      expect(await queryDatabase(databaseUrl, `SELECT * FROM kafka_eo_audit WHERE action = 'abort-transaction'`)).toEqual([]);
    } finally {
      await txn.abort();
      await producer.disconnect();
    }
    await stable(out, 0);
  });

  it("refuses to abort a hanging transaction younger than transaction.max.timeout.ms, or one other than the one read", async () => {
    // Written now: its producer may have begun it since its coordinator's state was read.
    const fresh = await leaveHangingTransaction(kafka, `${prefix}fresh`, undefined, [{ topic: out, partition: 0 }]);
    try {
      const [open] = partitionOf(await read(), out, 0).open;
      expect(open).toMatchObject({ producerId: String(fresh.producerId), coordinatorState: 'Empty', abortable: true });
      const young = await request('POST', 'transactions/abort', { body: { topic: out, partition: 0, producerId: open.producerId, startOffset: open.startOffset, reason: 'try' } });
      expect(young.status).toBe(409);
      expect(young.body.message).toContain("less than the brokers' transaction.max.timeout.ms");
      const other = await request('POST', 'transactions/abort', { body: { topic: out, partition: 0, producerId: open.producerId, startOffset: String(BigInt(open.startOffset) + 1n), reason: 'try' } });
      expect(other.status).toBe(409);
      expect(other.body.message).toContain(`now starts at offset ${open.startOffset}`);
      expect(await queryDatabase(databaseUrl, `SELECT * FROM kafka_eo_audit WHERE action = 'abort-transaction'`)).toEqual([]);
    } finally {
      await endOn(kafka, fresh, false, [{ topic: out, partition: 0 }]);
    }
    await stable(out, 0);
  });

  it("aborts another application's hanging transaction, audited with who and why: the partition is stable again", async () => {
    // Its last write an hour ago: past any transaction.max.timeout.ms of the brokers here (15 min by default).
    const gone = await leaveHangingTransaction(kafka, `${prefix}gone`, undefined, [{ topic: out, partition: 1, timestamp: String(Date.now() - 3600000) }]);
    const p = partitionOf(await read(), out, 1);
    expect(p.open).toEqual([expect.objectContaining({ producerId: String(gone.producerId), transactionalId: `${prefix}gone`, coordinatorState: 'Empty', owner: { kind: 'other' }, abortable: true, refusal: null, timeoutAt: null })]);
    const answer = await request('POST', 'transactions/abort', { body: { topic: out, partition: 1, producerId: String(gone.producerId), startOffset: p.open[0].startOffset, reason: 'its application was decommissioned', actor: 'jane' } });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ action: 'abort-transaction', topic: out, state: 'done', actor: 'token:oncall', declaredActor: 'jane', reason: 'its application was decommissioned' });
    expect(answer.body.result).toMatchObject({ partition: 1, producerId: String(gone.producerId), transactionalId: `${prefix}gone`, coordinatorState: 'Empty', aborted: [`${out}[1]`] });
    await stable(out, 1);
    const audit = await request('GET', 'audit?action=abort-transaction');
    expect(audit.body.items).toEqual([expect.objectContaining({ id: answer.body.id, state: 'done' })]);
    // Gone: asked again, 404.
    expect((await request('POST', 'transactions/abort', { body: { topic: out, partition: 1, producerId: String(gone.producerId), startOffset: p.open[0].startOffset, reason: 'again' } })).status).toBe(404);
  });

  it("names a hanging transaction of the group's own unit producer, says what the library does (nothing on an output alone; the consumer's abort when it holds the group's offsets), and refuses to abort it", async () => {
    // The producer id of notes[1]'s unit (no record goes there in this suite: fencing its producer costs nothing).
    const own = await leaveHangingTransaction(kafka, partitionTransactionalId(txPrefix, group, notes, 1), undefined, [{ topic: out, partition: 0 }]);
    try {
      const p = partitionOf(await read(), out, 0);
      expect(p.open).toHaveLength(1);
      expect(p.open[0]).toMatchObject({ owner: { kind: 'unit', topic: notes, partition: 1 }, coordinatorState: 'Empty', abortable: false });
      expect(p.open[0].doing).toContain("not on the group's offsets");
      const refused = await request('POST', 'transactions/abort', { body: { topic: out, partition: 0, producerId: p.open[0].producerId, startOffset: p.open[0].startOffset, reason: 'try' } });
      expect(refused.status).toBe(409);
      expect(refused.body.message).toContain(`this library's own (the producer of ${notes}[1])`);
    } finally {
      await endOn(kafka, own, false, [{ topic: out, partition: 0 }]);
    }
    await stable(out, 0);

    // The same producer's hanging transaction holding the group's offsets of notes[1] too: the consumer ends it at
    // the partition's next start, and the page says so.
    const offsetsPartition = offsetsPartitionOf(group, await withAdmin(kafka, async (admin) => (await admin.fetchTopicMetadata({ topics: ['__consumer_offsets'] })).topics[0].partitions.length));
    const holding = await leaveHangingTransaction(kafka, partitionTransactionalId(txPrefix, group, notes, 1), { groupId: group, topic: notes, partition: 1, offset: '0' }, [{ topic: out, partition: 1 }]);
    try {
      const [open] = partitionOf(await read(), out, 1).open;
      expect(open).toMatchObject({ owner: { kind: 'unit', topic: notes, partition: 1 }, abortable: false });
      expect(open.doing).toContain(`It holds the group's offsets of ${notes}[1], so the partition waits; at its next start`);
    } finally {
      await endOn(kafka, holding, false, [{ topic: out, partition: 1 }, { topic: '__consumer_offsets', partition: offsetsPartition }]);
    }
    await stable(out, 1);
  });

  (chromiumPath() ? it : it.skip)('shows the open transactions on the page and aborts a hanging one from it, asking a reason', async () => {
    const gone = await leaveHangingTransaction(kafka, `${prefix}gone-2`, undefined, [{ topic: notes, partition: 0, timestamp: String(Date.now() - 3600000) }]);
    let browser: Browser | undefined;
    try {
      browser = await launchChromium();
      const page = await browser.newPage();
      const watch = await watchPage(page);
      await page.goto(`${origin}/kafka-eo/#/transactions`);
      await page.fill('input[name=token]', TOKEN);
      await page.fill('input[name=actor]', 'jane');
      await page.click('form.signin button[type=submit]');
      await page.waitForSelector('[data-testid=open-transactions] tbody tr');
      await page.screenshot({ path: join(screenshotDirectory(), 'transactions.png'), fullPage: true });
      const row = page.locator('[data-testid=open-transactions] tbody tr', { hasText: `${prefix}gone-2` });
      expect(await row.count()).toBe(1);
      expect(await page.textContent('[data-testid=transaction-partitions]')).toContain(`${notes}[0]`);
      await row.locator('button:text-is("Abort…")').click();
      await page.waitForSelector('form.modal');
      // A reason is required: without one the dialog stays, and nothing is sent.
      await page.click('form.modal button[type=submit]');
      expect(await page.locator('form.modal textarea[name=reason]:invalid').count()).toBe(1);
      expect(watch.requests.filter((url) => url.endsWith('/transactions/abort'))).toEqual([]);
      await page.fill('form.modal textarea[name=reason]', 'left by a crashed batch job');
      await page.click('form.modal button[type=submit]');
      await page.waitForSelector('[data-testid=operation][data-state=done]');
      const rows = await queryDatabase(databaseUrl, `SELECT reason, actor, declared_actor, state, result FROM kafka_eo_audit WHERE action = 'abort-transaction' AND topic = $1`, [notes]);
      expect(rows).toEqual([expect.objectContaining({ reason: 'left by a crashed batch job', actor: 'token:oncall', declared_actor: 'jane', state: 'done' })]);
      expect(rows[0].result).toMatchObject({ producerId: String(gone.producerId), aborted: [`${notes}[0]`] });
      await stable(notes, 0);
      expect({ dialogs: watch.dialogs, errors: watch.errors, violations: await watch.violations(), foreign: watch.foreign(origin, ['/kafka-eo/']) }).toEqual({ dialogs: [], errors: [], violations: [], foreign: [] });
    } finally {
      await browser?.close();
    }
  });
});
