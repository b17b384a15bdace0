import { Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { randomUUID } from 'crypto';
import { ConfigResourceTypes, Kafka } from 'kafkajs';
import { join } from 'path';
import type { Browser, Page, Request } from 'playwright-core';
import { DataSource } from 'typeorm';
import { KafkaExactlyOnceModule, Outbox } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { chromiumPath, launchChromium, screenshotDirectory, watchPage, type PageWatch } from './support/browser';
import { ConsumerAppScope, consumerAppPort, createConsumerAppScope, KAFKA_EO_CLI as CLI, runKafkaEoCli, startConsumerApp } from './support/consumer-app';
import { kafkaBrokers, REPO_ROOT, testDriver } from './support/environment';
import { createTopics, readTopic, withAdmin } from './support/kafka';
import { queryDatabase, sendRaw, startLibraryModule } from './support/library';
import { checkPaymentInvariants, demoSchemas, parkingWorkload, republish, waitForGroupCaughtUp, waitUntil, type Payment, type PublishedPayment } from './support/payments';
import { AppProcess } from './support/processes';
import { processSuite } from './support/suite';

const TOKEN = 'console-suite-token-0123456789abcdef';
const READ_ONLY = 'console-suite-read-only-0123456789';
const OPERATOR = 'oncall-jane';

/** Records whose every field attacks the page that shows them. */
const HOSTILE = {
  key: `<script>alert('key')</script>`,
  messageId: `<img src=x onerror=alert('id')>`,
  rtlKey: 'acct-\u202Egnp.exe\u202C',
  value: Buffer.from(`<svg onload=alert('value')><a href="javascript:alert('link')">x</a>`),
  headers: { 'x-link': `javascript:alert('header')`, '<b onmouseover=alert(1)>': `"><iframe src=//example.invalid>`, 'x-rtl': '\u202Etxt.exe' },
  invalidUtf8Key: Buffer.from([0xff, 0xfe, 0x3c, 0x73, 0x63, 0x72]),
  largeValue: Buffer.alloc(1_000_000, '<'.charCodeAt(0)),
};

// The suite needs a Chromium: CI installs Debian's (.ci/run) and sets KEO_REQUIRE_BROWSER, so that a missing one
// fails there; a machine without one skips it, saying so.
const browserFound = chromiumPath() !== undefined;
if (!browserFound && !process.env.KEO_REQUIRE_BROWSER) {
  // eslint-disable-next-line no-console
  console.warn('console.browser: skipped, no Chromium here (apt-get install chromium, or KEO_CHROMIUM=<path>)');
}

/**
 * The operator console, served by consumer-app with the real broker and PostgreSQL, driven in headless Chromium
 * as an operator would: a parked account found, its payments read decoded, released from the page once its
 * deposit is approved (the ledger then equals the in-order fold); a dead letter of a retry-topic handler
 * replayed; an outbox event Kafka refused set aside, retried from the page and delivered; the message's story and
 * the audit of who did it. Hostile records (HTML, script, event handlers, javascript: URLs, right-to-left
 * overrides, invalid UTF-8, a 1 MB value) are shown inert: no dialog, no request elsewhere, no element of theirs,
 * no CSP violation, their text escaped. Actions are refused without the token (401) and with the read-only one
 * (403). Takes the screenshots of docs/console.md (KEO_CONSOLE_SCREENSHOTS=docs/console).
 */
(browserFound || process.env.KEO_REQUIRE_BROWSER ? describe : describe.skip)('operator console in a real browser', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;
  let scope: ConsumerAppScope;
  let app: AppProcess;
  let browser: Browser;
  let page: Page;
  let watch: PageWatch;
  let origin: string;
  let work: { published: PublishedPayment[]; target: string; big: Payment };
  const shots = screenshotDirectory();
  const modules: TestingModule[] = [];

  // Long pages (a key's 27 parked records) as the operator first sees them; the others whole.
  const shot = (name: string, whole = !['parked-key', 'release-confirmation', 'released', 'dead-letter'].includes(name)) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: whole });
  const query = <T = any>(sql: string, params: unknown[] = []) => queryDatabase<T>(scope.databaseUrl, sql, params);
  const go = async (hash: string, ready: string) => {
    await page.goto(`${origin}/kafka-eo/${hash}`);
    await page.waitForSelector(ready);
  };
  /** Signed in as the tests before left it, or now when a test runs alone. */
  const signedIn = async () => {
    await page.goto(`${origin}/kafka-eo/#/overview`);
    await page.waitForSelector('input[name=token], [data-testid=partitions]');
    if (await page.locator('input[name=token]').count()) {
      await page.fill('input[name=token]', TOKEN);
      await page.fill('input[name=actor]', OPERATOR);
      await page.click('form.signin button[type=submit]');
      await page.waitForSelector('[data-testid=partitions]');
    }
  };
  const call = async (method: string, path: string, token: string | null, body?: unknown) => {
    const response = await fetch(`${origin}/kafka-eo/${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: await response.text() };
  };

  beforeAll(async () => {
    kafka = client();
    scope = await createConsumerAppScope('console');
    // Welcome emails fail while the gateway is down, wait on tier 2 for 25 s, then are dead-lettered.
    app = await startConsumerApp(processes, scope, { ADMIN_TOKEN: TOKEN, ADMIN_READ_ONLY_TOKEN: READ_ONLY, WELCOME_EMAIL_RETRY_DELAYS: '1s,25s' });
    origin = `http://127.0.0.1:${consumerAppPort(app)}`;
    await query(`INSERT INTO demo_mailer_outages (down_until, every_nth_user) VALUES (now() + interval '1 hour', 1)`);
    const schemas = demoSchemas();
    await sendRaw(
      kafka,
      scope.topic('users.signed-up'),
      [1, 2].map((id) => ({
        key: `user-${id}`,
        value: encodeSingleObject(schemas.current('com.example.UserSignedUp'), { userId: id, userEmail: `user-${id}@example.com`, timestamp: new Date().toISOString() }),
        headers: { 'message-id': `signup-${id}` },
      })),
    );
    work = parkingWorkload(400, 8, 81);
    await republish(kafka, scope.topic('payments.requested'), work.published);
    // Hostile records on the payments topic: none decodes, so each is dead-lettered and parks its record key.
    await sendRaw(kafka, scope.topic('payments.requested'), [
      { key: HOSTILE.key, value: HOSTILE.value, headers: { 'message-id': HOSTILE.messageId, ...HOSTILE.headers } },
      { key: HOSTILE.rtlKey, value: Buffer.from([0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 9]), headers: { 'message-id': 'rtl-\u202Eid' } },
      { key: HOSTILE.invalidUtf8Key, value: HOSTILE.largeValue, headers: { 'message-id': Buffer.from([0xc3, 0x28, 0x3c, 0x62]) } },
    ]);
    await waitForGroupCaughtUp(kafka, scope.groupId, scope.topic('payments.requested'), 120000);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    watch = await watchPage(page);
  }, 240000);

  // What the page showed when a test ended, for a failure's report.
  let ended = 0;
  afterEach(async () => {
    await page?.screenshot({ path: join(screenshotDirectory('last-pages'), `last-page-of-test-${++ended}.png`), fullPage: true }).catch(() => undefined);
  });

  afterAll(async () => {
    await browser?.close();
    for (const m of modules) await m.close().catch(() => undefined);
  });

  it('finds the parked account, reads its payments decoded, and releases it from the page: the ledger then equals the in-order fold', async () => {
    const topic = scope.topic('payments.requested');
    // Signing in: the token goes into the tab's storage, never into an address.
    await page.goto(`${origin}/kafka-eo/`);
    await page.waitForSelector('input[name=token]');
    await shot('sign-in');
    await page.fill('input[name=token]', TOKEN);
    await page.fill('input[name=actor]', OPERATOR);
    await page.click('form.signin button[type=submit]');
    await page.waitForSelector('[data-testid=partitions] tbody tr');
    // The overview: this member's partitions, the parked keys counted, the welcome emails waiting on tier 2.
    await waitUntil(async () => (await query(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE status = 'retrying' AND outputs->0->>'topic' LIKE '%.retry.2'`))[0].n === 2, 30000, 'both welcome emails on tier 2');
    await page.reload();
    await page.waitForSelector('[data-testid=partitions] tbody tr');
    expect(await page.textContent('[data-testid=partitions]')).toContain(`${topic}[0]`);
    expect(await page.textContent('[data-testid=tile-parked-keys]')).toBe('4'); // the account and the hostile records' three keys
    await shot('overview');
    await go('#/retries', '[data-testid=retrying] tbody tr');
    expect(await page.locator('[data-testid=retrying] tbody tr').count()).toBe(2);
    expect(await page.textContent('[data-testid=retrying]')).toContain('mail gateway unavailable');
    await shot('retry-tiers');

    // The parked keys: the account is there, beside the hostile records' keys.
    await page.click('nav a:has-text("Parked keys")');
    await page.waitForSelector('[data-testid=parked-keys] tbody tr');
    await shot('parked-keys');
    await page.click(`[data-testid=parked-keys] a:text-is("${work.target}")`);
    await page.waitForSelector('[data-testid=parked-records] tbody tr');
    const parked = await query<{ n: number }>(`SELECT count(*)::int AS n FROM kafka_eo_parked_records WHERE topic = $1 AND state = 'parked' AND message_id = ANY($2)`, [topic, work.published.map((p) => p.messageId)]);
    const rows = page.locator('[data-testid=parked-records] > tbody > tr:not(.detail-row)');
    expect(await rows.count()).toBe(parked[0].n);
    expect(parked[0].n).toBeGreaterThan(3);
    // Its first parked record, decoded with its schema: the deposit that needs an approval.
    await rows.first().locator('button:text-is("Record")').click();
    await page.waitForSelector('[data-testid=decoded-value]');
    const decoded = JSON.parse((await page.textContent('[data-testid=decoded-value]'))!);
    expect(decoded).toEqual({ paymentId: work.big.paymentId, accountId: work.target, amountCents: '2000000', requestedAt: work.big.requestedAt });
    expect(await page.textContent('main')).toContain('needs an approval');
    await shot('parked-key');

    // The fix, then the release from the page, with a confirmation that says what will happen.
    await query(`INSERT INTO payment_approvals (payment_id, approved_by) VALUES ($1, 'console-suite')`, [work.big.paymentId]);
    await page.click('[data-testid=release]');
    await page.waitForSelector('[role=dialog]');
    expect(await page.textContent('[role=dialog]')).toContain(`replays the ${parked[0].n} parked record(s) of this key through the handler, in order, exactly once`);
    await shot('release-confirmation');
    await page.click('[role=dialog] button:text-is("Release the key")');
    await page.waitForSelector('[data-testid=operation][data-state=done]', { timeout: 60000 });
    expect(await page.textContent('[data-testid=operation]')).toContain(`"replayed": ${parked[0].n}`);
    await shot('released');

    // Every account equals the in-order fold, the released one too; its withdrawals, covered only by the deposit, accepted.
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 60000);
    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), work.published);
    expect(summary).toMatchObject({ ledgerRows: work.published.length, outputs: work.published.length });
    const spends = await query(`SELECT status FROM ledger_entries WHERE account_id = $1 AND amount_cents <= -600000`, [work.target]);
    expect(spends.map((s) => s.status)).toEqual(['ACCEPTED', 'ACCEPTED', 'ACCEPTED']);
    // The audit's actor is the token that acted; the name given at sign-in is kept apart, as the caller's own word.
    const [audit] = await query(`SELECT action, actor, declared_actor, state FROM kafka_eo_audit WHERE ordering_key = $1`, [work.target]);
    expect(audit).toEqual({ action: 'release', actor: 'token:admin', declared_actor: OPERATOR, state: 'done' });
  }, 300000);

  it('replays a dead letter and retries an outbox event Kafka refused, from the page; the story and the audit say who did what', async () => {
    const welcome = scope.topic('notifications.welcome-email');
    await waitUntil(async () => (await query(`SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason = 'handler-failed' AND topic LIKE $1`, [`${welcome}%`]))[0].n === 2, 90000, 'both welcome emails dead-lettered after the last tier');
    await query('DELETE FROM demo_mailer_outages'); // the gateway is back
    // Filtered by the handler's topic: its dead letters, whichever tier they ended on.
    await go(`#/dead-letters?topic=${encodeURIComponent(welcome)}&reason=handler-failed`, '[data-testid=dead-letters] tbody tr');
    expect(await page.locator('[data-testid=dead-letters] tbody tr').count()).toBe(2);
    await shot('dead-letters');
    await page.click('[data-testid=dead-letters] tbody tr:first-child a');
    await page.waitForSelector('[data-testid=replay]');
    // The attempts, stage by stage: the topic and both tiers, each failing on the gateway.
    expect(await page.textContent('main')).toContain(`${welcome}.retry.2`);
    expect(await page.textContent('[data-testid=decoded-value]')).toMatch(/"userId": [12]/);
    await shot('dead-letter');
    const messageId = (await page.textContent('h1 .mono'))!;
    await page.click('[data-testid=replay]');
    await page.waitForSelector('[role=dialog]');
    expect(await page.textContent('[role=dialog]')).toContain('runs the handler of');
    await page.click('[role=dialog] button:text-is("Replay it")');
    await page.waitForSelector('[data-testid=operation][data-state=done]', { timeout: 60000 });
    const sent = await query(`SELECT e.user_id FROM welcome_emails_sent e WHERE e.message_id = $1`, [messageId]);
    expect(sent).toHaveLength(1);

    // The outbox: an application writes two events; the topic's limit is lowered before a relay runs, so that
    // Kafka refuses them for good and they are set aside.
    const outboxTopic = scope.topic('console-outbox');
    await createTopics(kafka, [outboxTopic], 1);
    const { outbox, dataSource } = await outboxApp(scope);
    const ids: string[] = [];
    // Events of some 3 KB; the limit goes to 2,000 bytes (a limit below a transaction marker's ~80 bytes would
    // wedge every transaction on the topic: its abort marker could never be written).
    for (const account of ['ob-1', 'ob-2'].map((a) => `${a}-${'x'.repeat(3000)}`)) {
      await dataSource.transaction(async (manager) => {
        ids.push((await outbox.add(manager, 'console-outbox', { paymentId: randomUUID(), accountId: account, amountCents: 700n, requestedAt: new Date().toISOString() }, { key: account })).messageId);
      });
    }
    const limit = (bytes: number) =>
      withAdmin(kafka, (admin) => admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: outboxTopic, configEntries: [{ name: 'max.message.bytes', value: String(bytes) }] }] }));
    await limit(2000);
    const relay = processes.add(
      new AppProcess('console-relay', CLI, { DATABASE_URL: scope.databaseUrl, KAFKA_BROKERS: kafkaBrokers().join(',') }, join(REPO_ROOT, '.test-logs', 'console-relay.log'), {
        args: ['outbox', 'relay', '--prefix', `${scope.topicPrefix}outbox`, '--checkpoint-topic', scope.topic('outbox-checkpoints')],
      }),
    );
    await waitUntil(async () => (await query(`SELECT count(*)::int AS n FROM kafka_eo_outbox_set_aside WHERE state = 'set-aside'`))[0].n === 2, 60000, 'both outbox events set aside');
    await go('#/outbox', '[data-testid=outbox-events] tbody tr');
    expect(await page.locator('[data-testid=outbox-events] tbody tr').count()).toBe(2);
    expect(await page.textContent('main')).toMatch(/Relay lock held by\s*pid \d+ \(kafka-eo outbox relay/);
    await shot('outbox');
    await limit(1000000);
    const row = page.locator('[data-testid=outbox-events] > tbody > tr', { hasText: ids[0] });
    await row.locator('button:text-is("Retry…")').click();
    await page.fill('[role=dialog] textarea', 'topic limit raised again');
    await page.click('[role=dialog] button:text-is("Retry it")');
    await waitUntil(async () => (await query(`SELECT state, resolved_by FROM kafka_eo_outbox_set_aside WHERE id = $1`, [ids[0]]))[0].state === 'retried', 15000, 'the event retried');
    const delivered = await readTopic(kafka, outboxTopic, { until: (records) => records.length >= 1, timeoutMs: 30000 });
    expect(delivered.map((r) => r.headers['message-id'])).toEqual([ids[0]]);
    expect((await query(`SELECT resolved_by, declared_by, note FROM kafka_eo_outbox_set_aside WHERE id = $1`, [ids[0]]))[0]).toEqual({ resolved_by: 'token:admin', declared_by: OPERATOR, note: 'topic limit raised again' });
    await relay.stop();

    // The replayed email's story: consumed, moved through both tiers, dead-lettered, replayed by the operator.
    await page.fill('header input[name=q]', messageId);
    await page.press('header input[name=q]', 'Enter');
    await page.waitForSelector('[data-testid=record-story]');
    const story = (await page.textContent('[data-testid=record-story]'))!;
    expect(story).toContain('handler-failed');
    expect(story).toMatch(new RegExp(`replay.*${OPERATOR}.*done`, 's'));
    await shot('story');
    await go('#/audit', '[data-testid=audit] tbody tr');
    const audit = (await page.textContent('[data-testid=audit]'))!;
    expect(audit).toMatch(new RegExp(`replay.*${OPERATOR}.*done`, 's'));
    expect(audit).toMatch(new RegExp(`release.*${OPERATOR}.*done`, 's'));
    await shot('audit');
  }, 300000);

  it('shows hostile records inert and escaped: no dialog, no request elsewhere, no element of theirs, no CSP violation', async () => {
    const topic = scope.topic('payments.requested');
    await go(`#/parked?topic=${encodeURIComponent(topic)}`, '[data-testid=parked-keys] tbody tr');
    const parkedText = (await page.textContent('[data-testid=parked-keys]'))!;
    expect(parkedText).toContain(HOSTILE.key);
    expect(parkedText).toContain('acct-\\u{202E}gnp.exe\\u{202C}'); // the override written out, not obeyed
    expect(parkedText).toMatch(/sha256:[0-9a-f]{64} \(6 bytes\)/); // invalid UTF-8 named by its digest
    await page.click(`[data-testid=parked-keys] a:text-is("${HOSTILE.key}")`);
    await page.waitForSelector('[data-testid=parked-records] button:text-is("Record")');
    await page.click('[data-testid=parked-records] button:text-is("Record")');
    await page.waitForSelector('[data-testid=headers]');
    const hostileText = (await page.textContent('main'))!;
    expect(hostileText).toContain(HOSTILE.value.toString());
    expect(hostileText).toContain(HOSTILE.headers['x-link']);
    expect(hostileText).toContain(`<b onmouseover=alert(1)>`);
    expect(hostileText).toContain('\\u{202E}txt.exe');
    await shot('hostile-record');
    // The 1 MB record: its size and first bytes, the page intact.
    const large = await query<{ seq: string }>(`SELECT seq::text FROM kafka_eo_parked_records WHERE topic = $1 AND octet_length(value) = $2`, [topic, HOSTILE.largeValue.length]);
    await go(`#/parked?topic=${encodeURIComponent(topic)}`, '[data-testid=parked-keys] tbody tr');
    await page.click('[data-testid=parked-keys] a:has-text("sha256:")');
    await page.click('[data-testid=parked-records] button:text-is("Record")');
    await page.waitForSelector('[data-testid=value-hex]', { state: 'attached' });
    expect(await page.textContent('main')).toContain('976.6 KiB');
    expect(large).toHaveLength(1);
    // Each hostile dead letter's page, and the story of the hostile message id.
    for (const reason of ['decode-failed', 'unknown-schema']) {
      await go(`#/dead-letters?reason=${reason}`, '[data-testid=dead-letters] tbody tr');
      const links = await page.locator('[data-testid=dead-letters] tbody a').count();
      for (let i = 0; i < links; i++) {
        await go(`#/dead-letters?reason=${reason}`, '[data-testid=dead-letters] tbody tr');
        await page.locator('[data-testid=dead-letters] tbody a').nth(i).click();
        await page.waitForSelector('[data-testid=headers]');
      }
    }
    await go(`#/story?messageId=${encodeURIComponent(HOSTILE.messageId)}`, '[data-testid=record-story]');
    expect(await page.textContent('[data-testid=record-story]')).toContain(HOSTILE.messageId);

    // Nothing a record carried ran, loaded or became an element; its bytes are shown as text.
    expect(watch.dialogs).toEqual([]);
    expect(watch.errors).toEqual([]);
    expect(await watch.violations()).toEqual([]);
    expect(watch.foreign(origin, ['/kafka-eo/'])).toEqual([]);
    const elements = await page.evaluate(`({
      scripts: document.querySelectorAll('script').length,
      foreign: document.querySelectorAll('img, svg, iframe, object, embed, video, audio, b, base, meta[http-equiv], form[action], link:not([rel=stylesheet]):not([rel=icon])').length,
      handlers: [...document.querySelectorAll('*')].flatMap((e) => [...e.attributes].map((a) => a.name)).filter((n) => n.startsWith('on')),
      links: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')).filter((h) => !h.startsWith('#/')),
      overrides: /[\\u202A-\\u202E\\u2066-\\u2069]/.test(document.body.innerText),
    })`);
    expect(elements).toEqual({ scripts: 1, foreign: 0, handlers: [], links: [], overrides: false });
  }, 180000);

  it('sends no request outside its API whatever the address says, finds a key from the top search box, keeps a 10 kB key within the window on every page, and shows the overview as it is now', async () => {
    const topic = scope.topic('payments.requested');
    await signedIn();
    // A page's own elements gone before the next address is opened, so that waiting for the next one's means it rendered.
    const fresh = async (hash: string, ready: string) => {
      await page.evaluate(`document.querySelector('main')?.remove()`);
      if (page.url() === `${origin}/kafka-eo/${hash}`) await page.reload(); // the same address: no hashchange
      await go(hash, ready);
    };
    // Crafted links: parts that climb out of the API's path, in each spelling the browser reads as `..`, and
    // routes naming another host. Every request the page makes meanwhile is logged, with whether it carried the token.
    const logged: Array<Promise<{ path: string; origin: string; token: boolean }>> = [];
    const log = (request: Request) => logged.push(request.allHeaders().then((headers) => ({ path: new URL(request.url()).pathname, origin: new URL(request.url()).origin, token: headers.authorization !== undefined })));
    page.on('request', log);
    const crafted = ['#/parked/../..', '#/parked/%2e%2e/%2e%2e', '#/parked/%2E%2E/%2E%2E', '#/parked/.%2e/%2e.', '#/dead-letters/..', '#/dead-letters/%2e%2e?topic=x', '#//127.0.0.1:1/x', '#/parked//127.0.0.1:1/x', '#/dead-letters//127.0.0.1:1'];
    for (const hash of crafted) {
      await fresh(hash, 'main h1, main .status-error');
    }
    page.off('request', log);
    const requests = await Promise.all(logged);
    expect(requests.filter((r) => r.token).length).toBeGreaterThan(0);
    // Nothing outside the console's path; the token to the API's routes only (not to the page or its assets).
    expect(requests.filter((r) => r.origin !== origin || !r.path.startsWith('/kafka-eo/'))).toEqual([]);
    expect(requests.filter((r) => r.token && (r.path === '/kafka-eo/' || r.path.startsWith('/kafka-eo/assets/')))).toEqual([]);
    await fresh('#/parked/../..', '[data-testid=page-error]');
    expect(await page.textContent('[data-testid=page-error]')).toContain('the console sends no request for it');

    // The top search box finds a key as well as a message id, and says what a key's story holds.
    await fresh('#/overview', '[data-testid=partitions]');
    expect(await page.getAttribute('header input[name=q]', 'placeholder')).toBe('Message id or key');
    await page.fill('header input[name=q]', work.target);
    await page.press('header input[name=q]', 'Enter');
    await page.waitForSelector('[data-testid=found-as-key], [data-testid=story-empty]');
    const byKey = JSON.parse((await call('GET', `story?key=${encodeURIComponent(work.target)}`, TOKEN)).body);
    expect(byKey.records.length).toBeGreaterThan(3);
    expect(await page.locator('[data-testid=record-story]').count()).toBe(byKey.records.length);
    expect(await page.textContent('[data-testid=found-as-key]')).toContain(`${byKey.records.length} record(s)`);
    expect(await page.textContent('[data-testid=found-as-message-id]')).toContain('nothing');
    expect(await page.textContent('[data-testid=key-scope]')).toContain('does not keep a record\'s key');

    // A 10 kB key (and message id), whose record does not decode: dead-lettered, its key parked (named by its
    // digest and first characters). Each page that shows it stays within the window, the whole key one click away.
    const longKey = `acct-${'W'.repeat(10 * 1024)}`;
    const longId = `id-${'M'.repeat(10 * 1024)}`;
    await sendRaw(kafka, topic, [{ key: longKey, value: Buffer.from('not avro'), headers: { 'message-id': longId } }]);
    await waitUntil(async () => (await query(`SELECT count(*)::int AS n FROM kafka_eo_parked_records WHERE topic = $1 AND record_key = $2`, [topic, Buffer.from(longKey)]))[0].n === 1, 60000, 'the long key parked');
    const within = async (where: string) => {
      const size = (await page.evaluate('({ scroll: document.documentElement.scrollWidth, window: window.innerWidth })')) as { scroll: number; window: number };
      expect({ where, fits: size.scroll <= size.window, ...size }).toMatchObject({ where, fits: true });
    };
    await go(`#/parked?topic=${encodeURIComponent(topic)}`, '[data-testid=parked-keys] tbody tr');
    await within('parked keys');
    await page.click('[data-testid=parked-keys] a:has-text("acct-WWWW")');
    await page.waitForSelector('[data-testid=parked-records] button:text-is("Record")');
    await within('the parked key');
    await page.click('[data-testid=parked-records] button:text-is("Record")');
    await page.waitForSelector('[data-testid=headers]');
    await within('its record');
    await go(`#/story?key=${encodeURIComponent(longKey)}&topic=${encodeURIComponent(topic)}`, '[data-testid=record-story]');
    await within('the key\'s story');
    await go(`#/dead-letters?topic=${encodeURIComponent(topic)}&reason=decode-failed`, '[data-testid=dead-letters] tbody tr');
    await within('dead letters');
    await page.click('[data-testid=dead-letters] tbody a:has-text("(10243")'); // its message id, named by its digest and size
    await page.waitForSelector('[data-testid=headers]');
    await within('its dead letter');
    await go(`#/story?find=${encodeURIComponent(longKey)}`, '[data-testid=record-story]');
    await within('the key found from the top box');
    // The key's record again: its key cut, the whole of it (as the API gives it: it cuts a key's text itself,
    // past the page's 2,000 characters) one click away.
    await go(`#/parked?topic=${encodeURIComponent(topic)}`, '[data-testid=parked-keys] tbody tr');
    await page.click('[data-testid=parked-keys] a:has-text("acct-WWWW")');
    await page.click('[data-testid=parked-records] button:text-is("Record")');
    await page.waitForSelector('[data-testid=headers]');
    const wholeKey = page.locator('.record-box details.long').first();
    await wholeKey.locator('summary').click();
    const [longRecord] = await query<{ seq: string }>(`SELECT seq::text FROM kafka_eo_parked_records WHERE topic = $1 AND record_key = $2`, [topic, Buffer.from(longKey)]);
    const servedKey: string = JSON.parse((await call('GET', `parked-records/${longRecord.seq}`, TOKEN)).body).recordKey.text;
    const shownKey = (await wholeKey.locator('[data-testid=whole-text]').textContent())!;
    expect({ length: shownKey.length, same: shownKey === servedKey, prefix: longKey.startsWith(servedKey.replace(/…$/, '')) }).toEqual({ length: servedKey.length, same: true, prefix: true });
    expect(shownKey.length).toBeGreaterThan(2000);
    await within('its key shown whole');

    // The audit: the long key's record discarded, with a reason of 1,000 characters without a space.
    const discarded = await call('POST', `parked-records/${longRecord.seq}/discard`, TOKEN, { reason: 'R'.repeat(1000), actor: OPERATOR });
    expect(discarded.status).toBe(200);
    await go(`#/audit?action=discard`, '[data-testid=audit] tbody tr');
    expect(await page.textContent('[data-testid=audit]')).toMatch(/sha256:[0-9a-f]{64} \(10245 b/); // the key, named by its digest and size
    await within('the audit');

    // The retry tiers: a welcome email with a 10 kB key and message id, whose user the gateway refuses for now
    // (an outage for user 977 alone), waiting on its first tier.
    const welcome = scope.topic('notifications.welcome-email');
    const welcomeId = `email-${'E'.repeat(10 * 1024)}`;
    const [outage] = await query<{ id: number }>(`INSERT INTO demo_mailer_outages (down_until, every_nth_user) VALUES (now() + interval '1 hour', 977) RETURNING id`);
    await sendRaw(kafka, welcome, [
      {
        key: `user-${'K'.repeat(10 * 1024)}`,
        value: encodeSingleObject(demoSchemas().current('com.example.WelcomeEmailRequested'), { userId: 977, email: 'user-977@example.com', requestedAt: new Date().toISOString() }),
        headers: { 'message-id': welcomeId },
      },
    ]);
    const waiting = async () => (await query<{ status: string }>(`SELECT status FROM kafka_eo_inbox WHERE id_digest = sha256($1::bytea)`, [Buffer.from(welcomeId)]))[0]?.status;
    await waitUntil(async () => (await waiting()) === 'retrying', 60000, 'the long welcome email on a retry tier');
    await go('#/retries', '[data-testid=retrying] tbody tr');
    expect(await page.textContent('[data-testid=retrying]')).toMatch(/sha256:[0-9a-f]{64} \(10246 b/); // its message id, named by its digest and size
    await within('the retry tiers');
    // The gateway back for that user: the email leaves its tier (sent on the next tier at the latest), so that the
    // tests after this one see no record waiting.
    await query('DELETE FROM demo_mailer_outages WHERE id = $1', [outage.id]);

    // The outbox's events set aside: one with a 10 kB key and message id (written into the table as the relay sets an
    // event aside: what the page reads; a relay refusing a 10 kB key is not what is checked here).
    const position = String(9_000_000_000_000 + Math.floor(Math.random() * 1_000_000));
    await query(
      `INSERT INTO kafka_eo_outbox_set_aside (position, id, aggregatetype, aggregateid, type, payload, headers, created_at, reason)
       VALUES ($1, $2, $3, $4, 'com.example.PaymentRequested', '\\x00'::bytea, convert_to('{}', 'UTF8'), now(), 'Kafka refused it for good (MESSAGE_TOO_LARGE)')`,
      [position, `ob-${'O'.repeat(10 * 1024)}`, scope.topic('console-outbox'), Buffer.from(`acct-${'Y'.repeat(10 * 1024)}`)],
    );
    await go('#/outbox', '[data-testid=outbox-events] tbody tr');
    expect(await page.textContent('[data-testid=outbox-events]')).toContain('acct-YYYY');
    await within('the outbox\'s events set aside');
    expect((await call('POST', `outbox/events/${position}/discard`, TOKEN, { reason: 'written by the width check', actor: OPERATOR })).status).toBe(200);
    await waitUntil(async () => (await waiting()) !== 'retrying', 60000, 'the long welcome email off its tiers');

    // The overview's banners say what is true now. The consumer keeps its last error after it recovered (a
    // coordinator loading at the first join): with the consumer running again, no red banner; crashed, one.
    // (The overview the application serves, with only the consumer's state and last error set so.)
    const consumerAs = async (state: string) => {
      await page.unroute('**/kafka-eo/overview');
      await page.route('**/kafka-eo/overview', async (route) => {
        const served = await (await route.fetch()).json();
        await route.fulfill({ status: 200, json: { ...served, consumer: { state, lastError: 'The coordinator is loading and hence can\'t process requests' } } });
      });
      await fresh('#/overview', '[data-testid=partitions]');
    };
    await consumerAs('running');
    expect(await page.locator('main .status-error, main .status-warn').count()).toBe(0);
    expect(await page.textContent('main .tile')).toContain('recovered from: The coordinator is loading');
    await consumerAs('crashed');
    expect(await page.textContent('[data-testid=consumer-banner].status-error')).toContain('The consumer is crashed; its last error: The coordinator is loading');
    // A count the API stopped at its cap (named in atLeast) reads 10,000+; the others as they are.
    await page.unroute('**/kafka-eo/overview');
    await page.route('**/kafka-eo/overview', async (route) => {
      const served = await (await route.fetch()).json();
      await route.fulfill({ status: 200, json: { ...served, counts: { parkedKeys: 3, parkedRecords: 10000, deadLetters: 10000, retrying: 0, atLeast: { parkedRecords: true, deadLetters: true } } } });
    });
    await fresh('#/overview', '[data-testid=partitions]');
    expect(await page.textContent('[data-testid=tile-dead-letters]')).toBe('10,000+');
    expect(await page.textContent('[data-testid=tile-parked-keys]')).toBe('3');
    expect(await page.textContent('main .tiles')).toContain('10,000+ records wait');
    expect(await page.textContent('[data-testid=tile-on-retry-tiers]')).toBe('0');
    // PostgreSQL away: the overview (200, as library.admin-api shows with its database dropped) has no counts and no
    // outbox and says why; the page shows the partitions and health it has, and which parts were not read.
    await page.unroute('**/kafka-eo/overview');
    await page.route('**/kafka-eo/overview', async (route) => {
      const served = await (await route.fetch()).json();
      await route.fulfill({ status: 200, json: { ...served, counts: null, outbox: null, unreadable: { counts: 'connect ECONNREFUSED 127.0.0.1:5432', outbox: 'connect ECONNREFUSED 127.0.0.1:5432' } } });
    });
    await fresh('#/overview', '[data-testid=partitions]');
    expect(await page.textContent('[data-testid=unreadable-banner]')).toMatch(/Not read from PostgreSQL: counts \(connect ECONNREFUSED 127\.0\.0\.1:5432\); outbox \(connect ECONNREFUSED/);
    expect(await page.locator('[data-testid=partitions] tbody tr').count()).toBeGreaterThan(0);
    await page.unroute('**/kafka-eo/overview');
    await fresh('#/overview', '[data-testid=partitions]');
    expect(await page.locator('main .status-error').count()).toBe(0);
    expect(await page.locator('[data-testid=unreadable-banner]').count()).toBe(0);
    expect(watch.dialogs).toEqual([]);
    expect(watch.errors).toEqual([]);
    expect(await watch.violations()).toEqual([]);
  }, 180000);

  it('sends nothing, and no token, to an API address on another origin, were the page ever given one', async () => {
    // The server never writes one now (a page asked for at `//kafka-eo/` is refused); the page must not rely on
    // that, nor on the Content-Security-Policy: it compares the API's origin with its own before any request.
    await signedIn();
    for (const api of ['//127.0.0.1:1/kafka-eo/', 'http://127.0.0.1:1/kafka-eo/', `${origin}//127.0.0.1:1/kafka-eo/`]) {
      const thePage = (url: URL) => url.origin === origin && url.pathname === '/kafka-eo/';
      await page.route(thePage, async (route) => {
        const served = await route.fetch();
        const html = (await served.text()).replace('&quot;api&quot;:&quot;/kafka-eo/&quot;', `&quot;api&quot;:&quot;${api}&quot;`);
        expect(html).toContain(api);
        await route.fulfill({ response: served, body: html });
      });
      const requests: string[] = [];
      const log = (request: Request) => requests.push(request.url());
      // From elsewhere, so that the page is loaded again (the same address would only be a jump within it).
      await page.goto('about:blank');
      page.on('request', log);
      await page.goto(`${origin}/kafka-eo/#/overview`);
      await page.waitForSelector('[data-testid=page-error]');
      page.off('request', log);
      await page.unroute(thePage);
      expect({ api, error: await page.textContent('[data-testid=page-error]') }).toEqual({ api, error: expect.stringContaining("not on this page's origin: the console sends no request") });
      // The page and its assets only: no request to the API, no attempt the policy had to block, no sign-in form.
      const beyond = requests.filter((url) => new URL(url).origin !== origin || !/^\/kafka-eo\/(assets\/[a-z]+\.[a-z]+)?$/.test(new URL(url).pathname));
      expect({ api, beyond }).toEqual({ api, beyond: [] });
      expect({ api, violations: await watch.violations() }).toEqual({ api, violations: [] });
      expect(await page.locator('input[name=token]').count()).toBe(0);
    }
    // The console served as it is again.
    await page.goto('about:blank');
    await signedIn();
  }, 120000);

  it('refuses every action without the token (401) and with the read-only token (403), in the page too; the token is in no address or log', async () => {
    const topic = scope.topic('payments.requested');
    const actions: Array<[string, unknown]> = [
      [`parked-keys/${encodeURIComponent(topic)}/${encodeURIComponent(HOSTILE.key)}/release`, {}],
      ['parked-records/1/discard', { reason: 'x' }],
      [`dead-letters/${'0'.repeat(64)}/replay`, {}],
      ['outbox/events/1/retry', {}],
      ['outbox/events/1/discard', { reason: 'x' }],
      ['outputs/divert', { replay: '1', outputTopic: 'x', reason: 'x' }],
    ];
    const before = (await query(`SELECT count(*)::int AS n FROM kafka_eo_audit`))[0].n;
    for (const [path, body] of actions) {
      expect({ path, status: (await call('POST', path, null, body)).status }).toEqual({ path, status: 401 });
      expect({ path, status: (await call('POST', path, 'x'.repeat(40), body)).status }).toEqual({ path, status: 401 });
      expect({ path, status: (await call('POST', path, READ_ONLY, body)).status }).toEqual({ path, status: 403 });
    }
    for (const path of ['overview', 'parked-keys', 'dead-letters', 'retries', 'outbox', 'outbox/events', 'audit', `story?key=${encodeURIComponent(work.target)}`]) {
      expect({ path, status: (await call('GET', path, null)).status }).toEqual({ path, status: 401 });
      expect({ path, status: (await call('GET', path, READ_ONLY)).status }).toEqual({ path, status: 200 });
    }
    expect((await query(`SELECT count(*)::int AS n FROM kafka_eo_audit`))[0].n).toBe(before);

    // In the page, signed in with the read-only token: it reads, and an action says why it is refused.
    await page.click('header button:text-is("Sign out")');
    await page.waitForSelector('input[name=token]');
    await page.fill('input[name=token]', READ_ONLY);
    await page.click('form.signin button[type=submit]');
    await page.waitForSelector('header nav');
    await go(`#/parked?topic=${encodeURIComponent(topic)}`, '[data-testid=parked-keys] tbody tr');
    await page.click(`[data-testid=parked-keys] a:text-is("${HOSTILE.key}")`);
    await page.waitForSelector('[data-testid=release]');
    await page.click('[data-testid=release]');
    await page.click('[role=dialog] button:text-is("Release the key")');
    await page.waitForSelector('[data-testid=release-progress] .status-error');
    expect(await page.textContent('[data-testid=release-progress]')).toContain('this token may only read');
    expect((await query(`SELECT count(*)::int AS n FROM kafka_eo_audit`))[0].n).toBe(before);

    // The page and its assets: a strict policy, and no token in any address the browser asked for, or in the logs.
    const served = await fetch(`${origin}/kafka-eo/`);
    const csp = served.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("require-trusted-types-for 'script'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
    expect(served.headers.get('x-content-type-options')).toBe('nosniff');
    expect(served.headers.get('x-frame-options')).toBe('DENY');
    for (const asset of ['console.js', 'console.css', 'icon.svg']) {
      const response = await fetch(`${origin}/kafka-eo/assets/${asset}`);
      expect({ asset, status: response.status, csp: response.headers.get('content-security-policy') }).toEqual({ asset, status: 200, csp });
    }
    expect((await fetch(`${origin}/kafka-eo/assets/index.html`)).status).toBe(404);
    expect(watch.requests.length).toBeGreaterThan(20);
    expect(watch.requests.filter((url) => url.includes(TOKEN) || url.includes(READ_ONLY))).toEqual([]);
    expect(app.logs()).not.toContain(TOKEN);
  }, 120000);

  it('kafka-eo prints with --json the very documents the pages read, and writes what a record carries to a terminal escaped', async () => {
    const cli = (args: string[], env: Record<string, string> = {}) => runKafkaEoCli(scope, args, { SCHEMAS_DIR: join(REPO_ROOT, 'schemas'), ...env });
    const same = async (args: string[], path: string) => {
      const printed = await cli([...args, '--json']);
      expect(printed).toMatchObject({ code: 0, stderr: '' });
      const served = await call('GET', path, READ_ONLY);
      expect(served.status).toBe(200);
      expect(JSON.parse(printed.stdout)).toEqual(JSON.parse(served.body));
      return JSON.parse(printed.stdout);
    };
    const welcome = scope.topic('notifications.welcome-email');
    const [replayed] = await query<{ message_id: string }>(`SELECT message_id FROM kafka_eo_audit WHERE action = 'replay' AND state = 'done' AND topic LIKE $1`, [`${welcome}%`]);
    const story = await same(['story', replayed.message_id], `story?messageId=${encodeURIComponent(replayed.message_id)}`);
    expect(story.records[0].actions.map((a: { action: string; actor: string; declaredActor: string }) => `${a.action} ${a.actor} ${a.declaredActor}`)).toContain(`replay token:admin ${OPERATOR}`);
    await same(['story', '--key', work.target, '--topic', scope.topic('payments.requested')], `story?key=${encodeURIComponent(work.target)}&topic=${encodeURIComponent(scope.topic('payments.requested'))}`);
    const audit = await same(['audit', 'list', '--actor', 'token:admin'], `audit?actor=${encodeURIComponent('token:admin')}`);
    expect(audit.items.map((e: { action: string }) => e.action).sort()).toEqual(expect.arrayContaining(['release', 'replay']));
    const [hostile] = await query<{ seq: string }>(`SELECT p.seq::text FROM kafka_eo_parked_records p JOIN kafka_eo_parked_keys k USING (consumer_group, topic, key_digest) WHERE k.ordering_key = $1`, [HOSTILE.key]);
    const parked = await same(['parked', 'record', hostile.seq], `parked-records/${hostile.seq}`);
    expect(parked.headers.map((h: { name: string }) => h.name)).toContain('<b onmouseover=alert(1)>');
    const letters = await cli(['dlq', 'list', '--reason', 'decode-failed', '--json']);
    for (const letter of JSON.parse(letters.stdout).items as Array<{ id: string; topic: string }>) {
      await same(['dlq', 'record', letter.id, '--topic', letter.topic], `dead-letters/${letter.id}/record?topic=${encodeURIComponent(letter.topic)}`);
    }
    const [emailLetter] = (await cli(['dlq', 'list', '--topic', welcome, '--json']).then((r) => JSON.parse(r.stdout))).items;
    const decoded = await same(['dlq', 'record', emailLetter.id, '--topic', emailLetter.topic], `dead-letters/${emailLetter.id}/record?topic=${encodeURIComponent(emailLetter.topic)}`);
    expect(decoded.value).toMatchObject({ framing: 'single-object', schema: 'com.example.WelcomeEmailRequested', error: null });
    // The overview is this instance's view (rates move between two reads): the same group, partitions and counts.
    const overview = await cli(['overview', '--url', origin, '--json'], { ADMIN_READ_ONLY_TOKEN: READ_ONLY });
    expect(overview).toMatchObject({ code: 0 });
    const served = JSON.parse((await call('GET', 'overview', READ_ONLY)).body);
    const printed = JSON.parse(overview.stdout);
    const shape = (o: any) => ({ group: o.group.id, partitions: o.partitions.map((p: any) => `${p.topic}/${p.partition}`).sort(), counts: o.counts, outbox: o.outbox === null });
    expect(shape(printed)).toEqual(shape(served));
    expect(await cli(['overview', '--url', origin])).toMatchObject({ code: 1, stderr: expect.stringMatching(/refused the request \(401\): set ADMIN_TOKEN/) });
    expect((await cli(['overview', '--url', origin], { ADMIN_TOKEN: TOKEN })).stdout).toMatch(/^group +\S+ \(Stable\)/);

    // In a terminal the hostile key, headers and override are written out, not obeyed; nothing the record
    // carried reaches it as a control or a bidirectional character.
    const table = await cli(['parked', 'list', '--topic', scope.topic('payments.requested')]);
    const record = await cli(['parked', 'record', hostile.seq]);
    const [rtl] = await query<{ seq: string }>(`SELECT p.seq::text FROM kafka_eo_parked_records p JOIN kafka_eo_parked_keys k USING (consumer_group, topic, key_digest) WHERE k.ordering_key = $1`, [HOSTILE.rtlKey]);
    const rtlRecord = await cli(['parked', 'record', rtl.seq]);
    for (const printedText of [table.stdout, record.stdout, rtlRecord.stdout, (await cli(['story', 'rtl-\u202Eid'])).stdout]) {
      expect(printedText).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    }
    expect(table.stdout).toContain('acct-\\u{202E}gnp.exe\\u{202C}');
    expect(record.stdout).toContain(HOSTILE.headers['x-link']);
    expect(rtlRecord.stdout).toMatch(/single-object/);
  }, 180000);

  /** An application of the same database that writes to its outbox (its relay runs apart, as `kafka-eo outbox relay`). */
  async function outboxApp(s: ConsumerAppScope): Promise<{ outbox: Outbox; dataSource: DataSource }> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: s.databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'console-outbox', brokers: kafkaBrokers() },
          driver: testDriver(),
          transactionalIdPrefix: `${s.topicPrefix}outbox`,
          schemas: { directory: join(REPO_ROOT, 'schemas') },
          topicPrefix: s.topicPrefix,
          topics: { 'console-outbox': { schema: 'com.example.PaymentRequested' } },
          outbox: { relay: false, checkpointTopic: s.topic('outbox-checkpoints') },
        }),
      ],
    })
    class ConsoleOutboxApp {}
    const moduleRef = await startLibraryModule(ConsoleOutboxApp);
    modules.push(moduleRef);
    return { outbox: moduleRef.get(Outbox), dataSource: moduleRef.get<DataSource>(getDataSourceToken()) };
  }
});
