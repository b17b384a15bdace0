#!/usr/bin/env node
'use strict';
/**
 * Generates consumer-app's Prisma client (apps/consumer-app/prisma/schema.prisma, DATA_LAYER=prisma) into
 * apps/consumer-app/src/data-layer/prisma-client/, which git ignores: `npm run build` and `npm run typecheck` run it,
 * so that a fresh clone builds and typechecks with no step of its own. Offline: Prisma 7's `prisma generate` tries
 * to download a schema engine it does not need to generate a client, unless PRISMA_SCHEMA_ENGINE_BINARY names a
 * file, so an empty one is given when the environment names none (docs/data-layers.md). Nothing is run when the
 * client was generated from the same schema by the same Prisma version (a stamp beside it says which).
 *
 *   node scripts/prisma-generate.js [--force]
 */
const { spawnSync } = require('child_process');
const { createHash } = require('crypto');
const { existsSync, mkdirSync, readFileSync, writeFileSync } = require('fs');
const { tmpdir } = require('os');
const { join } = require('path');

const ROOT = join(__dirname, '..');
const SCHEMA = join(ROOT, 'apps/consumer-app/prisma/schema.prisma');
const OUTPUT = join(ROOT, 'apps/consumer-app/src/data-layer/prisma-client');
const STAMP = join(OUTPUT, '.generated-from');

function main() {
  const cli = require.resolve('prisma/build/index.js', { paths: [ROOT] });
  const version = require(require.resolve('prisma/package.json', { paths: [ROOT] })).version;
  const stamp = `prisma ${version} ${createHash('sha256').update(readFileSync(SCHEMA)).digest('hex')}\n`;
  if (!process.argv.includes('--force') && existsSync(join(OUTPUT, 'client.ts')) && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === stamp) return 0;

  let engine = process.env.PRISMA_SCHEMA_ENGINE_BINARY;
  if (!engine) {
    const dir = join(tmpdir(), 'kafka-exactly-once-prisma');
    mkdirSync(dir, { recursive: true });
    engine = join(dir, 'no-schema-engine');
    if (!existsSync(engine)) writeFileSync(engine, '');
  }
  const result = spawnSync(process.execPath, [cli, 'generate', '--schema', SCHEMA], {
    cwd: ROOT,
    encoding: 'utf8',
    // CHECKPOINT_DISABLE: no version check over the network either.
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: engine, PRISMA_HIDE_UPDATE_MESSAGE: '1', CHECKPOINT_DISABLE: '1' },
  });
  if (result.status !== 0) {
    process.stderr.write(`prisma generate failed (exit ${result.status ?? result.signal}) for ${SCHEMA}:\n${result.stdout}${result.stderr}`);
    return 1;
  }
  writeFileSync(STAMP, stamp);
  process.stdout.write(`Prisma client of consumer-app generated (prisma ${version})\n`);
  return 0;
}

process.exit(main());
