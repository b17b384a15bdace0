#!/usr/bin/env node
'use strict';
/**
 * `node scripts/node/node-binary.js 24`: the path of a Node.js 24 binary, fetched once from the npm registry.
 *
 * The registry serves Node.js itself as the package node-<platform>-<arch> (the binary ships inside it), so a
 * second Node.js version needs nothing but npm: it is installed into ~/.cache/kafka-exactly-once/node/<version>
 * (KEO_CACHE_DIR overrides the cache's root), where later runs on the machine find it. The versions are
 * pinned here, as the broker's are in scripts/kafka. Prints the binary's path.
 */
const { spawnSync } = require('child_process');
const { existsSync, mkdirSync } = require('fs');
const { homedir } = require('os');
const { join } = require('path');

const PINNED = { 22: '22.23.5', 24: '24.22.3' };

function nodeBinary(major) {
  const version = PINNED[major];
  if (!version) throw new Error(`no pinned Node.js ${major}: choose one of ${Object.keys(PINNED).join(', ')}`);
  const pkg = `node-${process.platform}-${process.arch}`;
  const prefix = join(process.env.KEO_CACHE_DIR ?? join(homedir(), '.cache/kafka-exactly-once'), 'node', version);
  const binary = join(prefix, 'node_modules', pkg, 'bin', 'node');
  if (existsSync(binary)) return binary;
  mkdirSync(prefix, { recursive: true });
  const npm = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--prefix', prefix, `${pkg}@${version}`], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (npm.status !== 0 || !existsSync(binary)) {
    throw new Error(`npm could not install ${pkg}@${version} into ${prefix} (exit ${npm.status}):\n${npm.stderr}`);
  }
  const check = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  if (check.stdout.trim() !== `v${version}`) throw new Error(`${binary} reports ${check.stdout.trim() || check.stderr}, expected v${version}`);
  return binary;
}

if (require.main === module) {
  try {
    process.stdout.write(`${nodeBinary(process.argv[2] ?? '24')}\n`);
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}

module.exports = { nodeBinary, PINNED };
