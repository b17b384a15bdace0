import { CanActivate, ConsoleLogger, ExecutionContext, Injectable, INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { AddressInfo } from 'net';
import type { Browser } from 'playwright-core';
import { EventContext, IdempotentHandler, KafkaExactlyOnceAdminModule, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, NonRetriableHandlerError, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { chromiumPath, launchChromium, watchPage } from './support/browser';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw } from './support/library';
import { waitUntil } from './support/payments';

const INVOICE = { type: 'record', name: 'InvoiceIssued', namespace: 'test.billing', fields: [{ name: 'invoiceId', type: 'string' }] };

/** The application's own sessions: a cookie names a user, and the user's role. */
@Injectable()
class Sessions {
  private readonly users = new Map([
    ['s-alice', { name: 'alice', role: 'operator' }],
    ['s-bob', { name: 'bob', role: 'viewer' }],
    // An operator the application's actorOf names no one for (a service account without a name, say).
    ['s-nameless', { name: '', role: 'operator' }],
  ]);

  find(cookie: string | undefined): { name: string; role: string } | undefined {
    const id = /(?:^|;\s*)session=([^;]+)/.exec(cookie ?? '')?.[1];
    return id === undefined ? undefined : this.users.get(id);
  }
}

/** The application's guard (a provider with a dependency of its own): signed-in users read, operators act. */
@Injectable()
class OperatorsGuard implements CanActivate {
  constructor(private readonly sessions: Sessions) {}

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ method: string; headers: Record<string, string>; user?: unknown }>();
    const user = this.sessions.find(request.headers.cookie);
    if (!user) return false;
    request.user = user;
    return request.method === 'GET' || user.role === 'operator';
  }
}

@Injectable()
class InvoicesHandler {
  /** Invoices whose handling fails for good until the test lets them through. */
  failing = true;

  @IdempotentHandler({ topic: 'invoices', schema: 'test.billing.InvoiceIssued' })
  async onInvoice(event: { invoiceId: string }, ctx: EventContext): Promise<void> {
    if (this.failing) throw new NonRetriableHandlerError(`invoice ${event.invoiceId}: the billing service refused it`);
    await ctx.manager.query('INSERT INTO invoices_sent (invoice_id) VALUES ($1)', [event.invoiceId]);
  }
}

const browserFound = chromiumPath() !== undefined;

/**
 * The admin API and the console behind the application's own Nest guard instead of a token (a session cookie
 * here), built with forRootAsync and mounted at a path of the application's choosing under its global prefix:
 * the guard's answer decides, with its dependencies injected; actions come only as JSON and not from another
 * site (a cookie alone cannot act); the actor is the one the application names (actorOf), whatever the body
 * says; and the page works behind the guard in a real browser, with no token to sign in with.
 */
describe('console and admin API behind the application guard', () => {
  let app: INestApplication;
  let origin: string;
  let databaseUrl: string;
  let handler: InvoicesHandler;
  let browser: Browser | undefined;
  const prefix = `${uniqueTopic('guard')}.`;
  const kafka = testKafka();

  const request = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
    fetch(`${origin}/api/${path}`, { method, headers, body }).then(async (r) => ({ status: r.status, text: await r.text(), headers: r.headers }));
  const alice = { cookie: 'session=s-alice' };
  const json = { 'content-type': 'application/json' };
  const deadLetters = async () => JSON.parse((await request('GET', 'kafka-eo/dead-letters', alice)).text).items as Array<{ id: string; topic: string; messageId: string; status: string }>;

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('app-guard');
    await queryDatabase(databaseUrl, 'CREATE TABLE invoices_sent (invoice_id text PRIMARY KEY)');
    await createTopics(kafka, [`${prefix}invoices`], 1);
    const directory = schemasDirectory('app-guard', { 'invoice.v1.avsc': INVOICE });

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'app-guard-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: `${prefix}tx`,
          schemas: { directory },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000 },
        }),
        KafkaExactlyOnceAdminModule.forRootAsync({
          useFactory: async () => ({ guard: OperatorsGuard, actorOf: (req: { user?: { name: string } }) => req.user?.name }),
          console: '/ops/kafka',
        }),
      ],
      providers: [Sessions, OperatorsGuard, InvoicesHandler],
    })
    class BillingModule {}

    app = await NestFactory.create(BillingModule, { logger: new ConsoleLogger({ logLevels: ['warn', 'error'] }) });
    app.setGlobalPrefix('api');
    app.enableShutdownHooks();
    await app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    await app.get(KafkaExactlyOnceLifecycle).whenRunning();
    handler = app.get(InvoicesHandler);
    const schema = SchemaRegistry.fromDirectory(directory).current('test.billing.InvoiceIssued');
    await sendRaw(kafka, `${prefix}invoices`, ['inv-1', 'inv-2'].map((id) => ({ key: id, value: encodeSingleObject(schema, { invoiceId: id }), headers: { 'message-id': id } })));
    await waitUntil(async () => (await queryDatabase(databaseUrl, `SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL`))[0].n === 2, 60000, 'both invoices dead-lettered');
    handler.failing = false;
  }, 120000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("lets the application's guard decide every route, the console's included, and takes no token", async () => {
    expect((await request('GET', 'kafka-eo/overview')).status).toBe(403);
    expect((await request('GET', 'kafka-eo/overview', { authorization: 'Bearer any-token-0123456789abcdef' })).status).toBe(403);
    expect((await request('GET', 'kafka-eo/overview', { cookie: 'session=s-nobody' })).status).toBe(403);
    const overview = await request('GET', 'kafka-eo/overview', { cookie: 'session=s-bob' });
    expect(overview.status).toBe(200);
    expect(JSON.parse(overview.text)).toMatchObject({ group: { id: `${prefix}group` }, counts: { deadLetters: 2 } });
    // The page and its assets under the application's prefix and path, behind the same guard.
    expect((await request('GET', 'ops/kafka/')).status).toBe(403);
    expect((await request('GET', 'ops/kafka/assets/console.js')).status).toBe(403);
    const page = await request('GET', 'ops/kafka/', alice);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    const settings = JSON.parse(/name="kafka-eo-console" content="([^"]*)"/.exec(page.text)![1].replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'));
    expect(settings).toMatchObject({ api: '/api/kafka-eo/', auth: 'guard', actorFromApplication: true });
    expect(page.text).toContain('src="/api/ops/kafka/assets/console.js"');
  });

  it("refuses actions the guard refuses, those a cookie alone could send (not JSON, or from another site or origin) and those actorOf names no one for; records the application's actor", async () => {
    const [letter] = (await deadLetters()).filter((d) => d.messageId === 'inv-1');
    const replay = `kafka-eo/dead-letters/${letter.id}/replay`;
    const body = JSON.stringify({ actor: 'mallory', topic: letter.topic });
    expect(await request('POST', replay, { cookie: 'session=s-bob', ...json }, body)).toMatchObject({ status: 403 });
    expect(await request('POST', replay, json, body)).toMatchObject({ status: 403 });
    // A form of another site posts text/plain or form data with the cookie: refused before the guard runs.
    expect(await request('POST', replay, { ...alice, 'content-type': 'text/plain' }, body)).toMatchObject({ status: 403, text: expect.stringContaining('must be sent as JSON') });
    expect(await request('POST', replay, { ...alice, 'content-type': 'application/x-www-form-urlencoded' }, 'actor=mallory')).toMatchObject({ status: 403 });
    expect(await request('POST', replay, { ...alice, ...json, 'sec-fetch-site': 'cross-site' }, body)).toMatchObject({ status: 403, text: expect.stringContaining('another site') });
    // A sibling subdomain is same-site, not the application's own origin; a browser that sends no Sec-Fetch-Site still sends Origin.
    expect(await request('POST', replay, { ...alice, ...json, 'sec-fetch-site': 'same-site' }, body)).toMatchObject({ status: 403, text: expect.stringContaining('another site') });
    expect(await request('POST', replay, { ...alice, ...json, origin: 'http://evil.example' }, body)).toMatchObject({ status: 403, text: expect.stringContaining('another origin') });
    expect(await request('POST', replay, { ...alice, ...json, origin: 'null' }, body)).toMatchObject({ status: 403, text: expect.stringContaining('another origin') });
    // The guard lets the user act, but actorOf names no one: the audit could not say who acted, so nothing is done.
    expect(await request('POST', replay, { cookie: 'session=s-nameless', ...json, origin }, body)).toMatchObject({ status: 403, text: expect.stringContaining('actorOf names no one') });
    expect(await queryDatabase(databaseUrl, 'SELECT * FROM kafka_eo_audit')).toEqual([]);
    expect(await queryDatabase(databaseUrl, 'SELECT * FROM invoices_sent')).toEqual([]);

    const done = await request('POST', replay, { ...alice, ...json, 'sec-fetch-site': 'same-origin', origin }, body);
    expect(done.status).toBe(200);
    expect(JSON.parse(done.text)).toMatchObject({ action: 'replay', state: 'done', actor: 'alice', declaredActor: 'mallory' });
    expect(await queryDatabase(databaseUrl, 'SELECT invoice_id FROM invoices_sent')).toEqual([{ invoice_id: 'inv-1' }]);
    expect(await queryDatabase(databaseUrl, 'SELECT actor, declared_actor FROM kafka_eo_audit')).toEqual([{ actor: 'alice', declared_actor: 'mallory' }]);
  }, 90000);

  (browserFound || process.env.KEO_REQUIRE_BROWSER ? it : it.skip)('works in a real browser behind the guard: no sign-in, the dead letter replayed from the page by the signed-in user', async () => {
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addCookies([{ name: 'session', value: 's-alice', url: origin, httpOnly: true, sameSite: 'Lax' }]);
    const page = await context.newPage();
    const watch = await watchPage(page);
    await page.goto(`${origin}/api/ops/kafka/#/dead-letters`);
    await page.waitForSelector('[data-testid=dead-letters] tbody tr');
    expect(await page.locator('[data-page=sign-in]').count()).toBe(0);
    await page.locator('[data-testid=dead-letters] tbody tr', { hasText: 'inv-2' }).locator('a').first().click();
    await page.click('[data-testid=replay]');
    await page.click('[role=dialog] button:text-is("Replay it")');
    await page.waitForSelector('[data-testid=operation][data-state=done]', { timeout: 60000 });
    expect(await queryDatabase(databaseUrl, 'SELECT invoice_id FROM invoices_sent ORDER BY invoice_id')).toEqual([{ invoice_id: 'inv-1' }, { invoice_id: 'inv-2' }]);
    expect(await queryDatabase(databaseUrl, `SELECT actor, message_id FROM kafka_eo_audit ORDER BY id`)).toEqual([
      { actor: 'alice', message_id: 'inv-1' },
      { actor: 'alice', message_id: 'inv-2' },
    ]);
    expect(watch.errors).toEqual([]);
    expect(await watch.violations()).toEqual([]);
    expect(watch.foreign(origin, ['/api/'])).toEqual([]);
  }, 90000);

  (browserFound || process.env.KEO_REQUIRE_BROWSER ? it : it.skip)('sends no request outside its API under a global prefix whatever the address says: the token to the API routes only, the cookie nowhere else', async () => {
    browser ??= await launchChromium();
    // The same console with a token, in an application of the same group and database (no handler) under the same
    // global prefix: the page at /api/ops/kafka/, its API at /api/kafka-eo/, the application's other routes beside
    // them, where a crafted link would take the token.
    const TOKEN = 'app-guard-suite-token-0123456789abcdef';
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({ kafka: { clientId: 'app-guard-token', brokers: kafkaBrokers() }, groupId: `${prefix}group`, transactionalIdPrefix: `${prefix}tx-token`, topicPrefix: prefix }),
        KafkaExactlyOnceAdminModule.forRoot({ token: TOKEN, console: '/ops/kafka' }),
      ],
    })
    class TokenModule {}
    const tokenApp = await NestFactory.create(TokenModule, { logger: new ConsoleLogger({ logLevels: ['error'] }) });
    tokenApp.setGlobalPrefix('api');
    await tokenApp.listen(0, '127.0.0.1');
    const tokenOrigin = `http://127.0.0.1:${(tokenApp.getHttpServer().address() as AddressInfo).port}`;
    // Links that climb out of the API's path, in each spelling the browser reads as `..`, and routes naming another host.
    const crafted = ['#/parked/../..', '#/parked/%2e%2e/%2e%2e', '#/parked/%2E%2E/%2E%2E', '#/parked/.%2e/%2e.', '#/dead-letters/..', '#/dead-letters/%2e%2e?topic=x', '#//127.0.0.1:1/x', '#/parked//127.0.0.1:1/x', '#/dead-letters//127.0.0.1:1'];
    const open = async (at: string, cookie: boolean, signIn: (page: import('playwright-core').Page) => Promise<void>) => {
      const context = await browser!.newContext({ viewport: { width: 1360, height: 900 } });
      if (cookie) await context.addCookies([{ name: 'session', value: 's-alice', url: at, httpOnly: true, sameSite: 'Lax' }]);
      const page = await context.newPage();
      const watch = await watchPage(page);
      await page.goto(`${at}/api/ops/kafka/#/overview`);
      await signIn(page);
      await page.waitForSelector('header nav');
      const logged: Array<Promise<{ path: string; origin: string; token: boolean; cookie: boolean }>> = [];
      page.on('request', (request) =>
        logged.push(request.allHeaders().then((headers) => ({ path: new URL(request.url()).pathname, origin: new URL(request.url()).origin, token: headers.authorization !== undefined, cookie: headers.cookie !== undefined }))),
      );
      for (const hash of crafted) {
        // The page's own elements gone first, so that waiting for the next address's means it rendered.
        await page.evaluate(`document.querySelector('main')?.remove()`);
        await page.goto(`${at}/api/ops/kafka/${hash}`);
        await page.waitForSelector('main h1, main .status-error');
      }
      await page.evaluate(`document.querySelector('main')?.remove()`);
      await page.goto(`${at}/api/ops/kafka/#/dead-letters`);
      await page.waitForSelector('main h1');
      const requests = await Promise.all(logged);
      expect(watch.errors).toEqual([]);
      await context.close();
      return requests;
    };
    try {
      const withToken = await open(tokenOrigin, false, async (page) => {
        await page.fill('input[name=token]', TOKEN);
        await page.fill('input[name=actor]', 'jane');
        await page.click('form.signin button[type=submit]');
      });
      expect(withToken.filter((r) => r.token).length).toBeGreaterThan(0);
      // Nothing outside the page's and the API's paths; the token to the API's routes only, never to the page or its
      // assets, nor to the prefix's other routes (`/api/`, `/`), where the crafted links would have sent it.
      expect(withToken.filter((r) => r.origin !== tokenOrigin || !(r.path.startsWith('/api/kafka-eo/') || r.path.startsWith('/api/ops/kafka/')))).toEqual([]);
      expect(withToken.filter((r) => r.token && !r.path.startsWith('/api/kafka-eo/'))).toEqual([]);

      // Behind the application's guard the page holds no token: it sends none, and its requests (which the browser
      // sends the session cookie with) stay on the page's and the API's paths.
      const withCookie = await open(origin, true, async () => undefined);
      expect(withCookie.filter((r) => r.cookie && r.path.startsWith('/api/kafka-eo/')).length).toBeGreaterThan(0);
      expect(withCookie.filter((r) => r.token)).toEqual([]);
      expect(withCookie.filter((r) => r.origin !== origin || !(r.path.startsWith('/api/kafka-eo/') || r.path.startsWith('/api/ops/kafka/')))).toEqual([]);
    } finally {
      await tokenApp.close();
    }
  }, 120000);
});
