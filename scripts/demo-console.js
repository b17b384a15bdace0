#!/usr/bin/env node
'use strict';
/**
 * The demo, with its parked account found and released from the operator console's page alone, by a headless
 * Chromium (Debian's `chromium`, or KEO_CHROMIUM) driven with playwright-core, as an operator would: it opens the
 * console's address the demo prints (not a deep link), signs in with the token of .demo-logs/admin-token, goes
 * to the parked keys, opens the only one, reads its first parked payment decoded, and releases the key after the
 * confirmation. The demo (scripts/demo.js --release-from-console) waits for that release, then runs its own
 * independent checks; this script exits with the demo's code, and fails if the release did not come from the page.
 *
 *   npm run demo:console [-- <demo options, e.g. --count 4000>]
 *
 * Screenshots of each step go to .demo-logs/console/.
 */
const { spawn } = require('child_process');
const fs = require('fs');
const { join } = require('path');

const ROOT = join(__dirname, '..');
const SHOTS = join(ROOT, '.demo-logs', 'console');
const OPERATOR = 'demo-operator';

function chromiumPath() {
  return [process.env.KEO_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'].find((c) => c && fs.existsSync(c));
}

/** Finds and releases the parked account from the page; resolves the key it released. */
async function releaseFromPage(consoleUrl) {
  const { chromium } = require('playwright-core');
  fs.mkdirSync(SHOTS, { recursive: true });
  const browser = await chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    const shot = (name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
    await page.goto(consoleUrl);
    await page.fill('input[name=token]', fs.readFileSync(join(ROOT, '.demo-logs', 'admin-token'), 'utf8').trim());
    await page.fill('input[name=actor]', OPERATOR);
    await page.click('form.signin button[type=submit]');
    await page.waitForSelector('[data-testid=partitions] tbody tr');
    // The whole group from this one instance: both consumer-app instances report (the reload takes the latest).
    const consumers = process.argv.includes('--consumers') ? Number(process.argv[process.argv.indexOf('--consumers') + 1]) : 2;
    for (let tries = 0; ; tries++) {
      const reporting = await page.locator('[data-testid=instances] [data-state=reporting]').count();
      if (reporting >= consumers || (consumers === 1 && reporting === 0)) break;
      if (tries > 60) throw new Error(`the console shows ${reporting} instances reporting, not the ${consumers} consumer-app instances of the group`);
      await page.waitForTimeout(1000);
      await page.reload();
      await page.waitForSelector('[data-testid=partitions] tbody tr');
    }
    await shot('1-overview');
    await page.click('nav a:has-text("Parked keys")');
    await page.waitForSelector('[data-testid=parked-keys] tbody tr');
    const rows = page.locator('[data-testid=parked-keys] > tbody > tr');
    if ((await rows.count()) !== 1) throw new Error(`expected one parked key on the page, it lists ${await rows.count()}`);
    await shot('2-parked-keys');
    const key = (await rows.first().locator('a').first().textContent()).trim();
    await rows.first().locator('a').first().click();
    await page.waitForSelector('[data-testid=parked-records] tbody tr');
    await page.locator('[data-testid=parked-records] > tbody > tr:not(.detail-row)').first().locator('button:text-is("Record")').click();
    await page.waitForSelector('[data-testid=decoded-value]');
    const decoded = JSON.parse(await page.textContent('[data-testid=decoded-value]'));
    if (decoded.accountId !== key) throw new Error(`the first parked record decodes to account ${decoded.accountId}, not ${key}`);
    await shot('3-parked-key');
    await page.click('[data-testid=release]');
    await page.waitForSelector('[role=dialog]');
    await page.click('[role=dialog] button:text-is("Release the key")');
    await page.waitForSelector('[data-testid=operation][data-state=done], [data-testid=operation][data-state=failed]', { timeout: 120000 });
    await shot('4-released');
    const state = await page.getAttribute('[data-testid=operation]', 'data-state');
    if (state !== 'done') throw new Error(`the release ended ${state}: ${await page.textContent('[data-testid=operation]')}`);
    return key;
  } finally {
    await browser.close();
  }
}

function main() {
  if (!chromiumPath()) {
    process.stderr.write('demo-console: no Chromium here: apt-get install chromium, or set KEO_CHROMIUM to its path\n');
    process.exit(2);
  }
  // Two consumer-app instances unless told otherwise: the console of one shows the whole group.
  const consumers = process.argv.includes('--consumers') ? [] : ['--consumers', '2'];
  const demo = spawn(process.execPath, [join(__dirname, 'demo.js'), '--release-from-console', ...consumers, ...process.argv.slice(2)], { cwd: ROOT, stdio: ['inherit', 'pipe', 'inherit'] });
  let out = '';
  let released;
  let failure;
  demo.stdout.on('data', (chunk) => {
    process.stdout.write(chunk);
    const before = out.length;
    out += chunk.toString();
    const asked = /release (\S+) from the console: (http:\/\/\S+?\/kafka-eo\/)#/.exec(out.slice(Math.max(0, before - 400)));
    if (asked && released === undefined && failure === undefined) {
      released = releaseFromPage(asked[2]).then(
        (key) => {
          process.stdout.write(`demo-console: released ${key} from the console's page (screenshots in .demo-logs/console/)\n`);
          if (key !== asked[1]) failure = `the page released ${key}, the demo parked ${asked[1]}`;
        },
        (err) => {
          failure = `driving the console failed: ${err.message}`;
          demo.kill('SIGTERM'); // the demo cleans up what it made
        },
      );
    }
  });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => demo.kill(signal));
  demo.on('exit', async (code) => {
    await released;
    if (released === undefined) failure ??= 'the demo never asked for the release from the console';
    else if (!new RegExp(`released from the console by (${OPERATOR}|\\S+ \\(${OPERATOR}\\))`).test(out)) failure ??= `the demo's report does not say the account was released from the console by ${OPERATOR} (as the actor, or as the name given beside the token)`;
    if (failure) process.stderr.write(`demo-console: FAILED: ${failure}\n`);
    process.exit(failure ? (code || 1) : (code ?? 1));
  });
}

main();
