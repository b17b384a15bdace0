import { join } from 'path';
import type { Browser, Page } from 'playwright-core';
import type { Kafka } from 'kafkajs';
import { chromiumPath, launchChromium, screenshotDirectory, watchPage, type PageWatch } from './support/browser';
import { ConsumerAppScope, consumerAppPort, createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { queryDatabase, sendRaw } from './support/library';
import { generatePayments, publishPayments, waitForGroupCaughtUp, waitUntil } from './support/payments';
import { AppProcess } from './support/processes';
import { processSuite } from './support/suite';

const TOKEN = 'console-group-token-0123456789abcdef';
const READ_ONLY = 'console-group-read-only-0123456789';
const BURST = 12;

const browserFound = chromiumPath() !== undefined;
if (!browserFound && !process.env.KEO_REQUIRE_BROWSER) {
  // eslint-disable-next-line no-console
  console.warn('console.group.browser: skipped, no Chromium here (apt-get install chromium, or KEO_CHROMIUM=<path>)');
}

/**
 * The console of one instance sees the whole group: two consumer-app instances in one group (reporting every
 * second), payments and a burst of records that cannot be decoded (dead-lettered), then one instance killed with
 * SIGKILL. In headless Chromium, on the survivor's console: every instance (the killed one as no longer reporting)
 * and every partition with its owner; the charts drawn from the samples of that run (inline SVG, under the page's
 * CSP), and a click on the dead-letter step that opens the dead letters of that moment.
 */
(browserFound || process.env.KEO_REQUIRE_BROWSER ? describe : describe.skip)('operator console: the whole group and its history', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;
  let scope: ConsumerAppScope;
  let survivor: AppProcess;
  let killed: AppProcess;
  let browser: Browser;
  let page: Page;
  let watch: PageWatch;
  let origin: string;
  const shots = screenshotDirectory();
  const shot = (name: string) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  const api = async (path: string, token = TOKEN) => {
    const response = await fetch(`${origin}/kafka-eo/${path}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: response.status, body: (await response.json()) as any };
  };
  const overview = async () => (await api('overview')).body;
  const payments = () => scope.topic('payments.requested');

  beforeAll(async () => {
    kafka = client();
    scope = await createConsumerAppScope('console-group');
    const env = { ADMIN_TOKEN: TOKEN, ADMIN_READ_ONLY_TOKEN: READ_ONLY, REPORT_INTERVAL_MS: '1000' };
    survivor = await startConsumerApp(processes, scope, env);
    origin = `http://127.0.0.1:${consumerAppPort(survivor)}`;
    killed = await startConsumerApp(processes, scope, env, { waitForAssignment: false });
    // Both report, both are members, and the payments' partitions are shared between them.
    await waitUntil(
      async () => {
        const o = await overview();
        const owners = new Set((o.groupPartitions ?? []).filter((p: any) => p.topic === payments()).map((p: any) => p.instanceId));
        return o.instances?.length === 2 && o.instances.every((i: any) => i.status === 'reporting' && i.inGroup) && owners.size === 2;
      },
      90000,
      'both instances reporting, each with partitions of the payments',
    );
    // Payments over three 10 s steps, the burst in the middle one (the charts have a line to draw, not a point).
    const all = generatePayments(300, 30, 56);
    await publishPayments(kafka, payments(), all.slice(0, 150));
    await new Promise((resolve) => setTimeout(resolve, 10000 - (Date.now() % 10000) + 200));
    // The burst: records no reader decodes, each dead-lettered (and parking its key).
    await sendRaw(
      kafka,
      payments(),
      Array.from({ length: BURST }, (_, i) => ({ key: `burst-${i}`, value: Buffer.from([0xc3, 0x01, 9, 9, 9, 9, 9, 9, 9, 9, i]), headers: { 'message-id': `burst-${i}` } })),
    );
    await waitUntil(async () => (await queryDatabase(scope.databaseUrl, `SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE dlq_reason IS NOT NULL`))[0].n === BURST, 60000, 'the burst dead-lettered');
    await new Promise((resolve) => setTimeout(resolve, 10000 - (Date.now() % 10000) + 200));
    await publishPayments(kafka, payments(), all.slice(150));
    await waitForGroupCaughtUp(kafka, scope.groupId, payments(), 60000);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    watch = await watchPage(page);
    await page.goto(`${origin}/kafka-eo/#/overview`);
    await page.fill('input[name=token]', TOKEN);
    await page.fill('input[name=actor]', 'oncall-jane');
    await page.click('form.signin button[type=submit]');
    await page.waitForSelector('[data-testid=instances] tbody tr');
  }, 240000);

  afterAll(async () => {
    await browser?.close();
  });

  it('shows every instance and every partition with its owner, and a killed instance as no longer reporting', async () => {
    const before = await overview();
    const killedId = before.instances.find((i: any) => !i.self).instanceId;
    const survivorId = before.instances.find((i: any) => i.self).instanceId;
    expect(await page.locator('[data-testid=instances] > tbody > tr').count()).toBe(2);
    const text = await page.textContent('[data-testid=partitions]');
    for (const p of before.groupPartitions) expect(text).toContain(`${p.topic}[${p.partition}]`);

    await killed.kill();
    // Silent after three of its intervals; its partitions move to the survivor once its session times out.
    await waitUntil(
      async () => {
        const o = await overview();
        const gone = o.instances.find((i: any) => i.instanceId === killedId);
        return gone?.status === 'silent' && o.groupPartitions.filter((p: any) => p.topic === payments()).every((p: any) => p.instanceId === survivorId && p.instanceStatus === 'reporting');
      },
      60000,
      'the killed instance silent, the survivor owning every partition',
    );
    await page.reload();
    await page.waitForSelector('[data-testid=instances] [data-state=silent]');
    const rows = page.locator('[data-testid=instances] > tbody > tr');
    expect(await rows.count()).toBe(2);
    expect(await page.locator('[data-testid=instances] tr.row-bad').count()).toBe(1);
    expect(await page.textContent('[data-testid=instances] tr.row-bad')).toContain(killedId);
    expect(await page.textContent('[data-testid=tile-instances]')).toBe('1');
    await shot('group-overview');
  }, 120000);

  it('draws the last 15 minutes from the samples, and the dead-letter step opens those dead letters', async () => {
    const history = (await api('history?range=15m')).body;
    const series = history.series.find((s: any) => s.topic === payments());
    expect(series.points.reduce((n: number, p: any) => n + p.deadLetters, 0)).toBe(BURST);
    expect(series.points.reduce((n: number, p: any) => n + p.recordsPerSecond * history.stepSeconds, 0)).toBeGreaterThanOrEqual(300);

    await page.goto(`${origin}/kafka-eo/#/charts?range=15m`);
    await page.waitForSelector('[data-testid=chart-dead-letters-svg]');
    for (const chart of ['chart-records', 'chart-lag', 'chart-dead-letters', 'chart-p99', 'chart-commits', 'chart-parks']) {
      expect({ chart, drawn: (await page.locator(`[data-testid=${chart}-svg] polyline, [data-testid=${chart}-svg] line[stroke-width="3"]`).count()) > 0 }).toEqual({ chart, drawn: true });
    }
    // The legend names each series with its own line (colour and dash), not by colour alone.
    expect(await page.textContent('[data-testid=chart-dead-letters] .legend')).toContain(payments());
    await shot('charts');

    // The step with the most dead letters, clicked: the dead letters of that moment.
    const burst = series.points.reduce((a: any, b: any) => (b.deadLetters > a.deadLetters ? b : a));
    expect(burst.deadLetters).toBeGreaterThan(0);
    await page.locator(`[data-testid=chart-dead-letters-svg] rect.step-link[data-at="${burst.at}"]`).click();
    await page.waitForSelector('[data-testid=time-range]');
    const hash = new URL(page.url()).hash;
    expect(hash).toMatch(/^#\/dead-letters\?/);
    const params = new URLSearchParams(hash.slice(hash.indexOf('?') + 1));
    const listed = (await api(`dead-letters?${params.toString()}&limit=500`)).body.items;
    expect(listed.length).toBeGreaterThanOrEqual(burst.deadLetters);
    for (const d of listed) {
      expect(Date.parse(d.deadLetteredAt)).toBeGreaterThanOrEqual(Date.parse(params.get('from')!));
      expect(Date.parse(d.deadLetteredAt)).toBeLessThan(Date.parse(params.get('to')!));
    }
    expect(await page.locator('[data-testid=dead-letters] > tbody > tr').count()).toBe(listed.length);

    // Every range draws; nothing the page did broke its CSP or went elsewhere.
    for (const range of ['1h', '6h', '24h']) {
      await page.goto(`${origin}/kafka-eo/#/charts?range=${range}`);
      // A line, or a single step's mark when the run so far fits in one of this range's steps.
      await page.waitForSelector('[data-testid=chart-records-svg] polyline, [data-testid=chart-records-svg] line[stroke-width="3"]', { state: 'attached' });
      expect(await page.locator('h1').textContent()).toContain(range.replace('h', ' h'));
    }
    expect(await watch.violations()).toEqual([]);
    expect(watch.errors).toEqual([]);
    expect(watch.foreign(origin, ['/kafka-eo/'])).toEqual([]);
  }, 120000);

  it("opens an alert's link (docs/metrics.md) on the partition it names: its charts, where it stands, the record at its committed offset", async () => {
    const o = await overview();
    const p = o.groupPartitions.find((x: any) => x.topic === payments() && x.committedOffset !== null);
    await page.goto(`${origin}/kafka-eo/#/charts?topic=${encodeURIComponent(p.topic)}&partition=${p.partition}&range=1h`);
    await page.waitForSelector('[data-testid=partition-now]');
    const now = await page.textContent('[data-testid=partition-now]');
    expect(now).toContain(p.instanceId);
    expect(now).toContain(p.committedOffset);
    expect(await page.textContent('[data-testid=chart-records] .legend')).toContain(`${p.topic}[${p.partition}]`);
    // One click to the record there: the story by its coordinates.
    await page.click('[data-testid=partition-now] a:has-text("the record there")');
    await page.waitForFunction('location.hash.startsWith("#/story?")');
    const story = new URLSearchParams(new URL(page.url()).hash.split('?')[1]);
    expect([story.get('topic'), story.get('partition'), story.get('offset')]).toEqual([p.topic, String(p.partition), p.committedOffset]);
    // The dead-letter alert's link: the topic's dead letters since the alert began.
    const since = new Date(Date.now() - 15 * 60000).toISOString().replace(/\.\d+Z$/, 'Z');
    await page.goto(`${origin}/kafka-eo/#/dead-letters?topic=${encodeURIComponent(payments())}&from=${since}`);
    await page.waitForSelector('[data-testid=dead-letters] tbody tr');
    expect(await page.locator('[data-testid=dead-letters] > tbody > tr').count()).toBe(BURST);
  });

  it('refuses a bad history request, and answers the read-only token', async () => {
    expect((await api('history?range=2h')).status).toBe(400);
    expect((await api('history?partition=1')).status).toBe(400);
    expect((await api('dead-letters?from=yesterday')).status).toBe(400);
    expect((await api('history?range=1h', READ_ONLY)).status).toBe(200);
    expect((await api('history', 'wrong-token-0123456789')).status).toBe(401);
  });
});
