#!/usr/bin/env node
'use strict';
/**
 * `node bench/json-codec.js [--iterations 1000000] [--rounds 5]`: CPU µs per call of the JSON codec
 * (libs/kafka-exactly-once/src/formats/json.codec.ts, run from dist/: build first) on a typical payment event of
 * about 200 bytes, beside what it is built on: JSON.parse of the same bytes (decoded) and JSON.stringify of the
 * same event. The codec's checks (size, depth, duplicate keys, long numbers) should cost a scan on top of
 * JSON.parse, not a second parser. Each figure is the best of `--rounds` rounds, results checked equal first.
 */
const assert = require('assert');
const { parseJsonValue, encodeJsonValue } = require('../dist/libs/kafka-exactly-once/formats/json.codec');

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : def);
const iterations = opt('--iterations', 1000000);
const rounds = opt('--rounds', 5);

const event = {
  messageId: '0193a1b2-c3d4-7e5f-8a9b-000000000042',
  type: 'PaymentRequested',
  accountId: 'acct-1234',
  amount: 1250.75,
  currency: 'EUR',
  requestedAt: '2024-05-01T12:34:56.789Z',
  reference: 'INV-2024-000123',
  merchant: { id: 'm-77', country: 'DE' },
  attempt: 1,
};
const bytes = Buffer.from(JSON.stringify(event));
// The same event with one integer beyond 2^53: the path that reads the text token by token, for comparison.
const bigBytes = Buffer.from(JSON.stringify({ ...event, attempt: 0 }).replace('"attempt":0', '"attempt":9223372036854775808'));
const BIGINT = { maxBytes: 1_048_576, maxDepth: 64, bigIntegers: 'bigint' };

function measure(call) {
  let sink;
  for (let i = 0; i < Math.min(iterations, 100000); i++) sink = call();
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const start = process.cpuUsage();
    for (let i = 0; i < iterations; i++) sink = call();
    const used = process.cpuUsage(start);
    best = Math.min(best, (used.user + used.system) / iterations);
  }
  return { us: best, sink };
}

assert.deepStrictEqual(parseJsonValue(bytes), JSON.parse(bytes.toString('utf8')));
assert.deepStrictEqual(parseJsonValue(bigBytes, BIGINT).attempt, 2n ** 63n);
assert.deepStrictEqual(encodeJsonValue(event), Buffer.from(JSON.stringify(event)));

const rows = [
  ['parse', 'JSON.parse(bytes.toString())', measure(() => JSON.parse(bytes.toString('utf8')))],
  ['parse', 'parseJsonValue(bytes)', measure(() => parseJsonValue(bytes))],
  ['parse', "parseJsonValue(2^63 inside, 'bigint')", measure(() => parseJsonValue(bigBytes, BIGINT))],
  ['encode', 'Buffer.from(JSON.stringify(event))', measure(() => Buffer.from(JSON.stringify(event)))],
  ['encode', 'encodeJsonValue(event)', measure(() => encodeJsonValue(event))],
];
console.log(`event of ${bytes.length} bytes, ${Object.keys(event).length} fields; ${iterations} calls x ${rounds} rounds (best), Node.js ${process.version}`);
for (const [kind, label, { us }] of rows) console.log(`${kind.padEnd(7)} ${label.padEnd(38)} ${us.toFixed(3)} µs`);
console.log(`parseJsonValue / JSON.parse: ${(rows[1][2].us / rows[0][2].us).toFixed(2)}x; encodeJsonValue / JSON.stringify: ${(rows[4][2].us / rows[3][2].us).toFixed(2)}x`);
