#!/usr/bin/env node
'use strict';
/**
 * `npm run pack`: the library as the npm package users install.
 *
 * Compiles libs/kafka-exactly-once/src into a clean staging folder (no source maps, no specs, nothing left over
 * from an earlier build), adds the package's own package.json, README.md and LICENSE, and runs `npm pack`.
 * Writes dist/packages/kafka-exactly-once-<version>.tgz and a copy named kafka-exactly-once.tgz, the name the
 * example applications under examples/ install. Prints the tarball's path.
 */
const { spawnSync } = require('child_process');
const { copyFileSync, mkdirSync, readFileSync, rmSync } = require('fs');
const { join } = require('path');

const ROOT = join(__dirname, '..');
const LIB = join(ROOT, 'libs/kafka-exactly-once');
const STAGING = join(ROOT, 'dist/package-staging/kafka-exactly-once');
const OUT = join(ROOT, 'dist/packages');

function run(command, args, cwd) {
  const result = spawnSync(command, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (result.status !== 0) {
    process.stdout.write(result.stdout ?? '');
    throw new Error(`${command} ${args.join(' ')} failed with exit code ${result.status}`);
  }
  return result.stdout;
}

function pack() {
  const { name, version } = JSON.parse(readFileSync(join(LIB, 'package.json'), 'utf8'));
  rmSync(STAGING, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(LIB, 'tsconfig.lib.json'), '--outDir', STAGING, '--sourceMap', 'false'], ROOT);
  copyFileSync(join(LIB, 'package.json'), join(STAGING, 'package.json'));
  copyFileSync(join(LIB, 'README.md'), join(STAGING, 'README.md'));
  copyFileSync(join(ROOT, 'LICENSE'), join(STAGING, 'LICENSE'));
  const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', OUT], STAGING));
  const tarball = join(OUT, packed.filename);
  if (packed.filename !== `${name}-${version}.tgz`) throw new Error(`npm pack wrote ${packed.filename}, expected ${name}-${version}.tgz`);
  copyFileSync(tarball, join(OUT, `${name}.tgz`));
  return { tarball, files: packed.files.length, size: packed.size };
}

if (require.main === module) {
  const { tarball, files, size } = pack();
  process.stderr.write(`packed ${files} files, ${Math.round(size / 1024)} KiB\n`);
  process.stdout.write(`${tarball}\n`);
}

module.exports = { pack };
