import { spawn, spawnSync } from 'child_process';
import { rmSync } from 'fs';
import { join } from 'path';
import { REPO_ROOT } from './support/environment';

/** `npm run pack`'s script as its own process: exit code and output. */
function packProcess(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(REPO_ROOT, 'scripts/pack.js')], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * `npm run pack` run twice at once in one checkout (two terminals, a script and an IDE): before, both staged in
 * one shared folder, one removed it while the other compiled into it, and a truncated tarball was written and
 * its path printed with exit 0. Now each stages in a folder of its own, checks its tarball and moves it whole.
 */
describe('package: npm run pack', () => {
  it('writes a whole tarball with every entry point when packs run at once', async () => {
    // Started 2 s apart: one pack's start-up falls in another's compile, or between its compile and npm pack.
    const runs = await Promise.all([0, 2000, 4000].map((ms) => new Promise((r) => setTimeout(r, ms)).then(packProcess)));
    const [a] = runs;
    for (const run of runs) {
      expect({ code: run.code, stderr: run.stderr.slice(-2000) }).toMatchObject({ code: 0 });
      const tarball = run.stdout.trim();
      expect(tarball).toMatch(/dist\/packages\/kafka-exactly-once-\d+\.\d+\.\d+\.tgz$/);
      const listed = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' });
      expect(listed.status).toBe(0);
      const entries = listed.stdout.split('\n').filter(Boolean);
      for (const file of ['package.json', 'index.js', 'index.d.ts', 'testing.js', 'microservices/index.js', 'cli/kafka-eo.js', 'outbox/outbox-relay.js', 'README.md', 'LICENSE']) {
        expect(entries).toContain(`package/${file}`);
      }
      // No specs, no source maps: what users install is the built library only.
      expect(entries.filter((e) => /\.spec\.|\.map$/.test(e))).toEqual([]);
    }
    const copy = spawnSync('tar', ['-tzf', join(REPO_ROOT, 'dist/packages/kafka-exactly-once.tgz')], { encoding: 'utf8' });
    expect(copy.status).toBe(0);
    expect(copy.stdout.split('\n').filter(Boolean).length).toBe(spawnSync('tar', ['-tzf', a.stdout.trim()], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).length);
  }, 240000);

  it('is not disturbed by another pack clearing its staging folder meanwhile', async () => {
    // What a second pack did to the first before: it emptied the one staging folder they shared
    // (dist/package-staging), here every 20 ms while this pack compiles and packs.
    const shared = join(REPO_ROOT, 'dist/package-staging');
    const clearing = setInterval(() => rmSync(shared, { recursive: true, force: true }), 20);
    let run: Awaited<ReturnType<typeof packProcess>>;
    try {
      run = await packProcess();
    } finally {
      clearInterval(clearing);
    }
    expect({ code: run.code, stderr: run.stderr.slice(-2000) }).toMatchObject({ code: 0 });
    const entries = spawnSync('tar', ['-tzf', run.stdout.trim()], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
    for (const file of ['package.json', 'index.js', 'index.d.ts', 'cli/kafka-eo.js', 'README.md', 'LICENSE']) expect(entries).toContain(`package/${file}`);
  }, 120000);
});
