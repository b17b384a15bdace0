'use strict';
/**
 * The values the JSON reader is checked against for linear time: each `make(size)` builds a value of about
 * `size` bytes (never more) that drives one path of `parseJsonValue` as hard as its bytes allow. Shared by
 * `bench/json-codec.js --worst` (time per MiB at several sizes) and the reader's unit spec (a loose bound).
 */

/** `text` repeated to fill `size` characters (whole copies only). */
const fill = (size, text) => text.repeat(Math.max(1, Math.floor(size / text.length)));

/** `{"k0":…,"k1":…,…}` of entries from `entry(i)` while they fit in `size` bytes, then `last` (already counted). */
function object(size, entry, last) {
  const parts = [];
  let length = 2 + (last ? last.length + 1 : 0);
  for (let i = 0; ; i++) {
    const text = entry(i);
    if (length + text.length + 1 > size) break;
    parts.push(text);
    length += text.length + 1;
  }
  if (last) parts.push(last);
  return `{${parts.join(',')}}`;
}

// A long number last makes the reader take its token-by-token pass over everything before it.
const LONG_LAST = '"last":12345678901234567';

/** @type {Array<{ name: string, what: string, make: (size: number) => Buffer, bigIntegers?: 'reject' | 'bigint' | 'string' }>} */
const JSON_WORST_CASES = [
  {
    name: 'plain',
    what: 'payment events in an array (a typical payload, for comparison)',
    make: (size) => {
      const event = '{"paymentId":"p-000001","accountId":"acct-1234","amount":1250.75,"currency":"EUR","requestedAt":"2024-05-01T12:34:56.789Z","ok":true},';
      return Buffer.from(`{"events":[${fill(size - 14, event).slice(0, -1)}]}`);
    },
  },
  {
    name: 'zeros-in-fraction',
    what: '{"a":0.1000…0001}: zeros between two digits of a fraction (refused: a double would round it)',
    make: (size) => Buffer.from(`{"a":0.1${fill(size - 10, '0')}1}`),
  },
  {
    name: 'zeros-then-exponent',
    what: '{"a":1000…0001e-N}: zeros inside the digits, an exponent that brings them back (refused)',
    make: (size) => {
      const exponent = `e-${size}`;
      return Buffer.from(`{"a":1${fill(size - 9 - exponent.length, '0')}1${exponent}}`);
    },
  },
  {
    name: 'zeros-exact',
    what: '{"a":1000…000e-N}: a million digits that are exactly 1 (read)',
    make: (size) => {
      const zeros = fill(size - 20, '0');
      return Buffer.from(`{"a":1${zeros}e-${zeros.length}}`);
    },
  },
  {
    name: 'long-integer',
    what: '{"a":1000…0001}: an integer of a million digits (refused: beyond a double)',
    make: (size) => Buffer.from(`{"a":1${fill(size - 8, '0')}1}`),
  },
  {
    name: 'long-exponent',
    what: '{"a":1e-000…0005}: an exponent of a million digits (read)',
    make: (size) => Buffer.from(`{"a":1e-${fill(size - 10, '0')}5}`),
  },
  {
    name: 'many-exact-decimals',
    what: '[1.5000…000, …]: long decimals a double holds, each checked (read)',
    make: (size) => Buffer.from(`{"a":[${fill(size - 8, `1.5${'0'.repeat(60)},`).slice(0, -1)}]}`),
  },
  {
    name: 'many-big-integers',
    what: '[1e300, …] in bigint mode: 6 bytes that each stand for 301 digits (read)',
    bigIntegers: 'bigint',
    make: (size) => Buffer.from(`{"a":[${fill(size - 8, '1e300,').slice(0, -1)}]}`),
  },
  {
    name: 'many-big-integers-string',
    what: '[1e300, …] in string mode (read, each as 301 digits)',
    bigIntegers: 'string',
    make: (size) => Buffer.from(`{"a":[${fill(size - 8, '1e300,').slice(0, -1)}]}`),
  },
  {
    name: 'u-escapes',
    what: 'a string of \\u0041 escapes (read)',
    make: (size) => Buffer.from(`{"a":"${fill(size - 8, '\\u0041')}"}`),
  },
  {
    name: 'quote-escapes',
    what: 'a string of \\" escapes (read)',
    make: (size) => Buffer.from(`{"a":"${fill(size - 8, '\\"')}"}`),
  },
  {
    name: 'many-keys',
    what: 'one object of short keys, a long number last (token pass; read)',
    make: (size) => Buffer.from(object(size, (i) => `"k${i}":1`, LONG_LAST)),
    bigIntegers: 'bigint',
  },
  {
    name: 'duplicate-key-last',
    what: 'one object of short keys, the first repeated last (refused)',
    make: (size) => Buffer.from(object(size, (i) => `"k${i}":1`, '"k0":2')),
  },
  {
    name: 'long-escaped-keys',
    what: 'keys of \\u escapes (an eighth of the value each, 20,000 at most), a long number last (token pass; read)',
    bigIntegers: 'bigint',
    make: (size) => {
      const key = fill(Math.min(20000 * 6, size / 8), '\\u0041');
      return Buffer.from(object(size, (i) => `"${key}${i}":1`, LONG_LAST));
    },
  },
  {
    name: 'long-keys-one-length',
    what: 'keys of 20,000 characters, one length, alike but the last (V8 hashes such strings by length; read)',
    bigIntegers: 'bigint',
    make: (size) => {
      const key = fill(20000, 'a');
      return Buffer.from(object(size, (i) => `"${key}${String(i).padStart(4, '0')}":1`, LONG_LAST));
    },
  },
  {
    name: 'deep-branches',
    what: 'branches 62 objects deep, side by side, a long number last (token pass, long paths; read)',
    bigIntegers: 'bigint',
    make: (size) => {
      const branch = `${'{"a":'.repeat(62)}1${'}'.repeat(62)},`;
      const last = `${'{"a":'.repeat(62)}12345678901234567${'}'.repeat(62)}`;
      return Buffer.from(`{"x":[${fill(size - 10 - last.length, branch)}${last}]}`);
    },
  },
  {
    name: 'invalid-utf8-last',
    what: 'two-byte characters, one invalid byte last (refused, naming the byte)',
    make: (size) => Buffer.concat([Buffer.from('{"a":"'), Buffer.from(fill((size - 10) / 2, 'é')), Buffer.from([0xff]), Buffer.from('"}')]),
  },
  {
    name: 'not-json-last',
    what: 'two-byte characters, a wrong bracket last (refused with the parser\'s message)',
    make: (size) => Buffer.from(`{"a":"${fill((size - 10) / 2, 'é')}"]`),
  },
];

/** An array of `item(i)` while it fits in `size` bytes, as `{"items":[…]}`. */
function items(size, item) {
  const parts = [];
  let length = 12;
  for (let i = 0; ; i++) {
    const text = item(i);
    if (length + text.length + 1 > size) break;
    parts.push(text);
    length += text.length + 1;
  }
  return Buffer.from(`{"items":[${parts.join(',')}]}`);
}

const arrayOf = (extra) => ({ type: 'object', properties: { items: { type: 'array', ...extra } } });

/**
 * The values a registry's JSON Schema validation is checked against: a schema and values of about `size` bytes
 * that make it work hardest (bench/json-codec.js; the validator's unit spec bounds the uniqueItems ones).
 */
const JSON_SCHEMA_WORST_CASES = [
  {
    name: 'valid-items',
    what: '{"items":["a0","a1",…]}, each item a string as the schema asks (valid: every item checked)',
    schema: arrayOf({ items: { type: 'string' } }),
    make: (size) => items(size, (i) => `"a${i}"`),
  },
  {
    name: 'wrong-items',
    what: '{"items":[1,1,…]}, 524,000 items at 1 MiB, each of the wrong type',
    schema: arrayOf({ items: { type: 'string' } }),
    make: (size) => items(size, () => '1'),
  },
  {
    name: 'unique-objects',
    what: '{"items":[{"a":0},{"a":1},…]} under uniqueItems, no type for the items (all distinct)',
    schema: arrayOf({ uniqueItems: true }),
    make: (size) => items(size, (i) => `{"a":${i}}`),
  },
  {
    name: 'unique-numbers-untyped',
    what: '{"items":[0,1,2,…]} under uniqueItems, no type for the items (all distinct)',
    schema: arrayOf({ uniqueItems: true }),
    make: (size) => items(size, (i) => String(i)),
  },
  {
    name: 'unique-strings-typed',
    what: '{"items":["a0","a1",…]} under uniqueItems, items typed string (all distinct)',
    schema: arrayOf({ uniqueItems: true, items: { type: 'string' } }),
    make: (size) => items(size, (i) => `"a${i}"`),
  },
  {
    name: 'unique-nested',
    what: 'pairs of pairs of arrays, 10 levels, uniqueItems at every level (a recursive $ref), all distinct',
    schema: {
      type: 'object',
      properties: { items: { $ref: '#/definitions/node' } },
      definitions: { node: { type: 'array', uniqueItems: true, items: { anyOf: [{ type: 'integer' }, { $ref: '#/definitions/node' }] } } },
    },
    make: (size) => {
      let n = 0;
      const tree = (depth) => (depth === 0 ? `[${n++},${n++}]` : `[${tree(depth - 1)},${tree(depth - 1)}]`);
      return items(size, () => tree(10));
    },
  },
];

/** CPU ms of `call()` (awaited), the best of `times` calls: a loaded machine slows one call, rarely all of them. */
async function cpuMs(call, times = 3) {
  let best = Infinity;
  for (let r = 0; r < times; r++) {
    const start = process.cpuUsage();
    await call();
    const used = process.cpuUsage(start);
    best = Math.min(best, (used.user + used.system) / 1000);
  }
  return best;
}

/**
 * CPU ms of `call(make(size))` at 64 KiB, then, if that took less than `budgetMs`, at 1 MiB and (when that took
 * 100 ms or more: below, the ratio is no test) at 256 KiB; each the best of two calls. Four times the bytes take
 * about four times as long on a linear path and sixteen times on a quadratic one: a check at eight times (with a
 * margin) tells them apart through the noise of a loaded machine (its garbage collector's threads count in the
 * process's CPU time). A quadratic path takes seconds at 64 KiB already, and minutes at 1 MiB: it stops at the
 * first size.
 */
async function linearity(make, call, budgetMs = 1000) {
  const at = async (size) => {
    const input = make(size);
    return cpuMs(() => call(input), 2);
  };
  const small = await at(65536);
  if (small >= budgetMs) return { small };
  const full = await at(1048576);
  return full < 100 ? { small, full } : { small, quarter: await at(262144), full };
}

module.exports = { JSON_WORST_CASES, JSON_SCHEMA_WORST_CASES, cpuMs, linearity };
