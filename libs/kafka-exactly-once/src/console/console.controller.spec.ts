import { resolveAdminOptions } from '../admin/admin.options';
import { OperatorRequestError } from '../errors/operator-request.error';
import { CONSOLE_CSP, consoleBaseOf, consolePage } from './console.controller';

// Loaded as a plain script, not compiled: scripts/ holds JavaScript for Node.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const assets = require('../../../../scripts/console-assets.js') as { generate(): string; OUT: string };

const settingsOf = (html: string) => {
  const content = /<meta name="kafka-eo-console" content="([^"]*)">/.exec(html)![1];
  return JSON.parse(content.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'));
};

describe('operator console page', () => {
  it('is served with its addresses and settings as escaped attributes, and no inline script', () => {
    const admin = resolveAdminOptions({ token: 't'.repeat(16), console: { path: '/ops/kafka', refreshMs: 2000 } });
    const html = consolePage('/api/ops/kafka/', admin.console!, admin);
    expect(settingsOf(html)).toEqual({ api: '/api/kafka-eo/', auth: 'token', refreshMs: 2000, actorFromApplication: false });
    expect(html).toContain('<script src="/api/ops/kafka/assets/console.js"></script>');
    expect(html).toContain('<link rel="stylesheet" href="/api/ops/kafka/assets/console.css">');
    // The only script element loads the asset: nothing inline for the policy to allow.
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html).not.toMatch(/<script>|\son\w+=|javascript:/i);
    expect(html).not.toContain('t'.repeat(16));
  });

  it("takes its base from the address it was asked for, a path of this origin only", () => {
    expect(consoleBaseOf({ originalUrl: '/api/ops/kafka?x=1' }, 'ops/kafka')).toBe('/api/ops/kafka/');
    expect(consoleBaseOf({ originalUrl: '/kafka-eo/' }, 'kafka-eo')).toBe('/kafka-eo/');
    expect(consoleBaseOf({ url: '/kafka-eo' }, 'kafka-eo')).toBe('/kafka-eo/');
    // Not plain, or not the console's route: the configured path.
    expect(consoleBaseOf({ originalUrl: '/a"b/kafka-eo' }, 'kafka-eo')).toBe('/kafka-eo/');
    expect(consoleBaseOf({ originalUrl: 'http://elsewhere.example/kafka-eo' }, 'kafka-eo')).toBe('/kafka-eo/');
    // A path a browser reads as another host's (Fastify ignores the duplicate slash and routes it here): refused.
    for (const originalUrl of ['//kafka-eo', '//evil.example/kafka-eo', '///kafka-eo/', '/\\evil.example/kafka-eo', '\\\\evil.example/kafka-eo']) {
      let thrown: unknown;
      try {
        consoleBaseOf({ originalUrl }, 'kafka-eo');
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(OperatorRequestError);
      expect(thrown).toMatchObject({ status: 400, message: expect.stringMatching(/which a browser reads as another host's: open it at \/kafka-eo\//) });
    }
  });

  it('says the application guard decides when there is one', () => {
    const admin = resolveAdminOptions({ guard: { canActivate: () => true }, console: true, actorOf: () => 'x' });
    expect(settingsOf(consolePage('/kafka-eo/', admin.console!, admin))).toMatchObject({ api: '/kafka-eo/', auth: 'guard', actorFromApplication: true });
  });

  it('has a policy that allows no inline script, no eval, nothing from elsewhere, and requires Trusted Types', () => {
    expect(CONSOLE_CSP).toContain("default-src 'none'");
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).toContain("require-trusted-types-for 'script'");
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
    expect(CONSOLE_CSP).not.toMatch(/unsafe|\*|https?:|data:/);
  });

  it('ships the page files as they are (console-assets.generated.ts is up to date: node scripts/console-assets.js)', () => {
    expect(require('fs').readFileSync(assets.OUT, 'utf8')).toBe(assets.generate());
  });

  it('never makes HTML of a string in its script', () => {
    const script = require('fs').readFileSync(require('path').join(__dirname, 'page/console.js'), 'utf8') as string;
    expect(script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*['"]on/);
  });
});
