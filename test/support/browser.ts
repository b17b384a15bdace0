import { existsSync, mkdirSync } from 'fs';
import { join } from 'path';
import type { Browser, Page, Request } from 'playwright-core';
import { REPO_ROOT, testDatabaseUrl } from './environment';

/**
 * The machine's Chromium: KEO_CHROMIUM, else Debian's package (`apt-get install chromium`) or another usual
 * place. The tests drive it with playwright-core, which downloads no browser.
 */
export function chromiumPath(): string | undefined {
  const candidates = [process.env.KEO_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'];
  return candidates.find((c): c is string => !!c && existsSync(c));
}

/**
 * Headless Chromium as the machine's closed network wants it: no background connections (update checks, sync,
 * QUIC), a fresh profile per launch.
 */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error('no Chromium: install it (apt-get install chromium) or set KEO_CHROMIUM to its path');
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
}

/** What a page did that an operator's browser must never do for a record's bytes: dialogs, foreign requests, CSP violations. */
export interface PageWatch {
  dialogs: string[];
  requests: string[];
  errors: string[];
  /** Requests that did not go to the console's own origin and paths. */
  foreign(origin: string, paths: string[]): string[];
  violations(): Promise<string[]>;
}

export async function watchPage(page: Page): Promise<PageWatch> {
  const dialogs: string[] = [];
  const requests: string[] = [];
  const errors: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss().catch(() => undefined);
  });
  page.on('request', (request: Request) => requests.push(request.url()));
  page.on('pageerror', (error) => errors.push(error.message));
  // Runs before the page's own script (through the DevTools protocol, not the page: the page's CSP allows no inline script).
  // (The page-side code is text: this project's TypeScript has no DOM types.)
  await page.addInitScript({
    content: `window.__violations = []; document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));`,
  });
  return {
    dialogs,
    requests,
    errors,
    foreign: (origin, paths) => requests.filter((url) => !url.startsWith('data:') && !(new URL(url).origin === origin && paths.some((p) => new URL(url).pathname.startsWith(p)))),
    violations: () => page.evaluate('window.__violations || []') as Promise<string[]>,
  };
}

/**
 * Where the console's screenshots go: the pages' to KEO_CONSOLE_SCREENSHOTS (docs/console to refresh the
 * documentation's), else the run's logs; a test's last page (for a failure's report) always to the run's logs.
 */
export function screenshotDirectory(kind: 'pages' | 'last-pages' = 'pages'): string {
  const given = kind === 'pages' ? process.env.KEO_CONSOLE_SCREENSHOTS : undefined;
  const dir = given ? join(REPO_ROOT, given) : join(REPO_ROOT, '.test-logs', new URL(testDatabaseUrl()).pathname.slice(1), 'console');
  mkdirSync(dir, { recursive: true });
  return dir;
}
