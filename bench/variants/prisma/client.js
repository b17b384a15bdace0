'use strict';
/**
 * The Prisma client of variant DP: `prisma generate` of ./schema.prisma into ./generated, once per bench run.
 * Offline, Prisma 7's generate only needs a path for the schema engine it never runs (docs/data-layers.md).
 */
const { execFileSync } = require('child_process');
const { mkdirSync, writeFileSync } = require('fs');
const { join } = require('path');

let generated = false;

function generate() {
  if (generated) return;
  const engine = join(__dirname, 'generated', 'no-schema-engine');
  mkdirSync(join(__dirname, 'generated'), { recursive: true });
  writeFileSync(engine, '');
  execFileSync(process.execPath, [require.resolve('prisma/build/index.js'), 'generate', '--schema', join(__dirname, 'schema.prisma')], {
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? engine, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    stdio: 'pipe',
  });
  generated = true;
}

module.exports = { generate };
