#!/usr/bin/env node
/**
 * Copies the library's own KafkaJS modules (libs/kafka-exactly-once/src/kafkajs/vendor: CommonJS files with
 * KafkaJS's licence, which TypeScript does not emit) beside each build of the library's Kafka client room under
 * dist/: the library's (dist/libs/kafka-exactly-once/kafkajs) and each application's copy of the library sources
 * (dist/apps/<app>/libs/kafka-exactly-once/src/kafkajs). `npm run build` runs it after the TypeScript builds;
 * scripts/pack.js copies them into the package itself.
 */
const { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } = require('fs');
const { join } = require('path');

const ROOT = join(__dirname, '..');
const VENDOR = join(ROOT, 'libs/kafka-exactly-once/src/kafkajs/vendor');

/** Every folder under `dir` named kafkajs that holds the room's built client.js. */
function rooms(dir, found = []) {
  if (!existsSync(dir)) return found;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name === 'node_modules' || !statSync(path).isDirectory()) continue;
    if (name === 'kafkajs' && existsSync(join(path, 'client.js'))) found.push(path);
    else rooms(path, found);
  }
  return found;
}

const built = rooms(join(ROOT, 'dist'));
if (built.length === 0) throw new Error('kafkajs-vendor: no build of src/kafkajs under dist/ (run the TypeScript builds first)');
for (const room of built) {
  mkdirSync(join(room, 'vendor'), { recursive: true });
  for (const file of readdirSync(VENDOR)) copyFileSync(join(VENDOR, file), join(room, 'vendor', file));
}
process.stdout.write(`KafkaJS vendor modules copied into ${built.length} build(s)\n`);
