#!/usr/bin/env node
'use strict';
/**
 * `npm run pack`: the library as the npm package users install.
 *
 * Compiles libs/kafka-exactly-once/src into a staging folder of its own (a fresh temporary one: two packs at once
 * never share it; no source maps, no specs, nothing left over from an earlier build), adds the package's own
 * package.json, README.md and LICENSE, and runs `npm pack`. Checks the tarball (it reads whole, and holds the
 * package's entry points and every file npm packed) before it moves it, whole, to
 * dist/packages/kafka-exactly-once-<version>.tgz, with a copy named kafka-exactly-once.tgz, the name the example
 * applications under examples/ install. Prints the tarball's path.
 */
const { spawnSync } = require('child_process');
const { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } = require('fs');
const { join } = require('path');
const { tmpdir } = require('os');

const ROOT = join(__dirname, '..');
const LIB = join(ROOT, 'libs/kafka-exactly-once');
const OUT = join(ROOT, 'dist/packages');

/** Files the package cannot do without: its entry points (package.json `exports` and `bin`). */
const REQUIRED = ['package.json', 'README.md', 'LICENSE', 'index.js', 'index.d.ts', 'testing.js', 'testing.d.ts', 'microservices/index.js', 'microservices/index.d.ts', 'cli/kafka-eo.js'];

function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    process.stdout.write(result.stdout ?? '');
    throw new Error(`${command} ${args.join(' ')} failed with exit code ${result.status}`);
  }
  return result.stdout;
}

/** The tarball's entries, read whole (a truncated or corrupt tarball fails here), checked against what npm packed. */
function checkTarball(tarball, packed) {
  const entries = run('tar', ['-tzf', tarball], ROOT)
    .split('\n')
    .filter(Boolean)
    .map((e) => e.replace(/^package\//, ''));
  const missing = [...REQUIRED, ...packed.files.map((f) => f.path)].filter((f) => !entries.includes(f));
  if (missing.length > 0 || entries.length !== packed.files.length) {
    throw new Error(`the tarball ${tarball} holds ${entries.length} files, npm packed ${packed.files.length}; missing: ${[...new Set(missing)].slice(0, 10).join(', ') || 'none'}`);
  }
}

function pack() {
  const { name, version } = JSON.parse(readFileSync(join(LIB, 'package.json'), 'utf8'));
  const work = mkdtempSync(join(tmpdir(), 'kafka-eo-pack-'));
  mkdirSync(OUT, { recursive: true });
  // Written beside its destination and renamed into place: a reader never sees a tarball half-written.
  const landing = mkdtempSync(join(OUT, '.pack-'));
  try {
    const staging = join(work, name);
    run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(LIB, 'tsconfig.lib.json'), '--outDir', staging, '--sourceMap', 'false'], ROOT);
    copyFileSync(join(LIB, 'package.json'), join(staging, 'package.json'));
    copyFileSync(join(LIB, 'README.md'), join(staging, 'README.md'));
    copyFileSync(join(ROOT, 'LICENSE'), join(staging, 'LICENSE'));
    const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', landing], staging));
    if (packed.filename !== `${name}-${version}.tgz`) throw new Error(`npm pack wrote ${packed.filename}, expected ${name}-${version}.tgz`);
    const written = join(landing, packed.filename);
    checkTarball(written, packed);
    const tarball = join(OUT, packed.filename);
    copyFileSync(written, join(landing, `${name}.tgz`));
    renameSync(join(landing, `${name}.tgz`), join(OUT, `${name}.tgz`));
    renameSync(written, tarball);
    return { tarball, files: packed.files.length, size: packed.size };
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(landing, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const { tarball, files, size } = pack();
  process.stderr.write(`packed ${files} files, ${Math.round(size / 1024)} KiB\n`);
  process.stdout.write(`${tarball}\n`);
}

module.exports = { pack, checkTarball };
