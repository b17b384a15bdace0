#!/usr/bin/env node
'use strict';
/**
 * `node bench/json-codec.js [--iterations 1000000] [--rounds 5] [--worst] [--sizes 256,512,1024] [--library <dir>]`
 *
 * Two parts. First, CPU µs per call of the JSON codec (libs/kafka-exactly-once/src/formats/json/json.codec.ts, run
 * from dist/: build first) on a typical payment event of about 200 bytes, beside what it is built on: JSON.parse of
 * the same bytes (decoded) and JSON.stringify of the same event. The codec's checks (size, depth, duplicate keys,
 * long numbers) should cost a scan on top of JSON.parse, not a second parser. Each figure is the best of
 * `--rounds` rounds, results checked equal first.
 *
 * Then the worst cases (bench/json-worst-cases.js; `--worst` runs only these): for each value built to drive one
 * path of the reader as hard as its bytes allow, the CPU time per MiB at each of `--sizes` (KiB, the largest the
 * default maxBytes), best of 3, and the ratio of the largest size's time to the smallest's: the sizes' ratio
 * (4 for 256 to 1024) when the reader is linear, its square (16) when it is quadratic. The console's record view
 * (which reads with the same reader, integers beyond 2^53 as strings), the writer's careful path, and the
 * validation of a registry's JSON Schema (bench/json-worst-cases.js's JSON_SCHEMA_WORST_CASES) follow.
 * `--library` reads another build (a copy of dist/libs/kafka-exactly-once), to compare.
 */
const assert = require('assert');
const path = require('path');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : def);
const iterations = opt('--iterations', 1000000);
const rounds = opt('--rounds', 5);
const library = argv.includes('--library') ? path.resolve(argv[argv.indexOf('--library') + 1]) : path.join(__dirname, '../dist/libs/kafka-exactly-once');
const { parseJsonValue, encodeJsonValue } = require(path.join(library, 'formats/json/json.codec'));
const { valueView } = require(path.join(library, 'admin/record-view'));
const { buildJsonSchemaValidator } = require(path.join(library, 'formats/json-schema/json-schema.codec'));
const { JSON_WORST_CASES, JSON_SCHEMA_WORST_CASES, cpuMs } = require('./json-worst-cases');
const sizes = (argv.includes('--sizes') ? argv[argv.indexOf('--sizes') + 1] : '256,512,1024').split(',').map((kib) => Number(kib) * 1024);

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

function perEvent() {
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
}

const MiB = 1048576;

function outcome(call) {
  try {
    call();
    return 'read';
  } catch (error) {
    return `refused: ${error.message.slice(0, 60)}`;
  }
}

/** One row: ms/MiB at each size (of `bytesOf(input)` bytes), and the largest size's time over the smallest's. */
async function row(label, make, call, bytesOf = (input) => input.length) {
  const times = [];
  let bytes = 0;
  for (const size of sizes) {
    const input = make(size);
    bytes = bytesOf(input);
    times.push({ ms: await cpuMs(() => call(input)), bytes });
  }
  const perMiB = times.map(({ ms, bytes: b }) => (ms / (b / MiB)).toFixed(1).padStart(8));
  const ratio = (times[times.length - 1].ms / Math.max(times[0].ms, 0.001)).toFixed(1);
  console.log(`${label.padEnd(28)} ${perMiB.join(' ')} ${ratio.padStart(7)}   ${(times[times.length - 1].ms).toFixed(1)} ms at ${bytes} bytes`);
}

function header(title) {
  console.log(`\n${title}`);
  console.log(`${'case'.padEnd(28)} ${sizes.map((s) => `${s / 1024} KiB`.padStart(8)).join(' ')} ${`x${sizes[sizes.length - 1] / sizes[0]}`.padStart(7)}   (ms per MiB at each size; time ratio, largest/smallest)`);
}

async function worst() {
  const limitsOf = (c, size) => ({ maxBytes: Math.max(size, 1_048_576), maxDepth: 64, bigIntegers: c.bigIntegers ?? 'reject' });
  header(`parseJsonValue, worst cases (Node.js ${process.version})`);
  for (const c of JSON_WORST_CASES) await row(c.name, c.make, (input) => outcome(() => parseJsonValue(input, limitsOf(c, input.length))));
  for (const c of JSON_WORST_CASES) console.log(`  ${c.name}: ${c.what}; ${outcome(() => parseJsonValue(c.make(sizes[0]), limitsOf(c, sizes[0])))}`);
  header('the console\'s record view (valueView) of the same values');
  for (const c of JSON_WORST_CASES) await row(c.name, c.make, (input) => valueView(undefined, input));
  header('encodeJsonValue, the careful path (bigints, a "null", NUL characters)');
  const bigints = (size) => ({ a: Array.from({ length: Math.floor(size / 21) }, (_, i) => 2n ** 63n + BigInt(i)) });
  const nul = (size) => ({ a: '\u0000'.repeat(Math.floor(size / 6)), b: null, c: 1n });
  const plain = (size) => JSON.parse(JSON_WORST_CASES[0].make(size).toString());
  for (const [label, make] of [['plain', plain], ['many-bigints', bigints], ['nul-characters', nul]]) {
    await row(label, make, (value) => encodeJsonValue(value), (value) => encodeJsonValue(value).length);
  }
  header("a registry's JSON Schema: validation of the value read (reading not counted)");
  for (const c of JSON_SCHEMA_WORST_CASES) {
    const { jsonSchema } = buildJsonSchemaValidator(1, JSON.stringify(c.schema));
    const read = (size) => {
      const bytes = c.make(size);
      return { bytes, value: parseJsonValue(bytes, { maxBytes: Math.max(size, 1_048_576), maxDepth: 64, bigIntegers: 'reject' }) };
    };
    await row(c.name, read, ({ value }) => jsonSchema.validate(value), ({ bytes }) => bytes.length);
    const problems = jsonSchema.validate(read(sizes[sizes.length - 1]).value);
    console.log(`  ${c.what}: ${problems.length === 0 ? 'valid' : `${problems.length} problem(s), ${problems[0]}`}`);
  }
}

(async () => {
  if (!argv.includes('--worst')) perEvent();
  await worst();
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
