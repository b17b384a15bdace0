#!/usr/bin/env node
import { runKafkaEo } from './kafka-eo.command';

// `npx kafka-eo ...`: see kafka-eo.command.ts and docs/operations.md.
runKafkaEo(process.argv.slice(2), process.env, {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
}).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`kafka-eo: ${err?.stack ?? err}\n`);
    process.exit(1);
  },
);
