'use strict';
/**
 * The bench's latency phase, the parts shared by its three processes: the bench (bench/bench.js sets up and stops
 * the variant, then merges), the publisher (bench/latency-publisher.js) and the reader (bench/latency-reader.js).
 *
 * The publisher publishes the input at a steady rate and writes, per record, its match key, the moment it handed
 * the record to its producer (also the input's CreateTime), and the partition and offset the broker gave it. The
 * reader reads the variant's output read_committed and writes, per output, its match key, the moment it received
 * it, and the output's own CreateTime (set by the variant's producer when it sent the output, before its commit).
 * Both are tab-separated text, one record a line, in bench/results/<run>/latency/: the raw samples. After the
 * phase the bench merges the two (merge): latency of a record = received − published, split at the output's
 * CreateTime in two: input published → output produced (fetch, handling, database statements), and output
 * produced → visible to a read_committed consumer (the variant's commits: PostgreSQL COMMIT, TxnOffsetCommit and
 * EndTxn for the transactional ones, then the transaction marker, then the reader's fetch).
 *
 * The clock of all three (and of the library's step log, operations.stepLog) is epoch milliseconds with the
 * fractions of the monotonic clock: performance.timeOrigin + performance.now(), on one machine.
 */
const { randomUUID } = require('crypto');
const { existsSync, readFileSync, writeFileSync } = require('fs');
const { join } = require('path');
const avro = require('avsc');

const ROOT = join(__dirname, '..');
const SCHEMAS = join(ROOT, 'schemas');
const readType = (file) => avro.Type.forSchema(JSON.parse(readFileSync(join(SCHEMAS, file), 'utf8')));
const PaymentRequested = readType('payment-requested.v1.avsc');
const PaymentProcessed = readType('payment-processed.v1.avsc');
/** C3 01 and the 8-byte fingerprint of single-object encoding. */
const SINGLE_OBJECT_HEADER = 10;

/** The bench's Kafka client: the one the library builds (its request queue, its read-committed filter) once built, KafkaJS's before. */
const LIBRARY_KAFKAJS = join(ROOT, 'dist/libs/kafka-exactly-once/kafkajs/index.js');
function kafkaClient(config) {
  if (existsSync(LIBRARY_KAFKAJS)) return require(LIBRARY_KAFKAJS).createKafkaClient(config);
  const { Kafka } = require('kafkajs');
  return new Kafka(config);
}

/** Epoch milliseconds with fractions: the same clock in every process of the phase and in the library's step log. */
const clock = () => performance.timeOrigin + performance.now();

const header = (headers, name) => {
  const v = headers?.[name];
  if (v === undefined || v === null) return undefined;
  return (Array.isArray(v) ? v[v.length - 1] : v).toString();
};

/**
 * How an output names its input, per variant:
 *   message-id    the output carries the input's headers (A copies them)
 *   causation-id  the library's header on every output: the input's message id (D, E)
 *   avro-payment  no link in the headers; the paymentId of an Avro PaymentProcessed (B)
 *   json-payment  no link in the headers; the paymentId of a JSON outcome (C, J)
 */
const MATCHERS = {
  'message-id': { input: (r) => header(r.headers, 'message-id'), output: (m) => header(m.headers, 'message-id') },
  'causation-id': { input: (r) => header(r.headers, 'message-id'), output: (m) => header(m.headers, 'causation-id') },
  'avro-payment': {
    input: (r) => PaymentRequested.fromBuffer(r.value.subarray(SINGLE_OBJECT_HEADER)).paymentId,
    output: (m) => PaymentProcessed.fromBuffer(m.value.subarray(SINGLE_OBJECT_HEADER)).paymentId,
  },
  'json-payment': {
    input: (r) => PaymentRequested.fromBuffer(r.value.subarray(SINGLE_OBJECT_HEADER)).paymentId,
    output: (m) => JSON.parse(m.value.toString()).paymentId,
  },
};

/**
 * The input records (spread over the partitions, see interleave), then again and again, each later round with a
 * fresh `message-id` (or the inbox would skip it as a duplicate) and a fresh paymentId (or D, J and C would find the
 * payment in the ledger: D and J skip it without an output, C fails on the ledger's key), re-encoded with the same
 * single-object header.
 */
function feed(input, match) {
  const matcher = MATCHERS[match];
  if (!matcher) throw new Error(`unknown latency match ${match}`);
  const records = interleave(input);
  return (i) => {
    const base = records[i % records.length];
    if (i < records.length) return { record: { key: base.key, value: base.value, headers: base.headers, partition: base.partition }, matchKey: matcher.input(base) };
    const event = PaymentRequested.fromBuffer(base.value.subarray(SINGLE_OBJECT_HEADER));
    const paymentId = randomUUID();
    const messageId = randomUUID();
    const value = Buffer.concat([base.value.subarray(0, SINGLE_OBJECT_HEADER), PaymentRequested.toBuffer({ ...event, paymentId })]);
    const record = { key: base.key, value, headers: { ...base.headers, 'message-id': messageId }, partition: base.partition };
    return { record, matchKey: match.endsWith('-payment') ? paymentId : messageId };
  };
}

/**
 * The records as read back from Kafka come a partition at a time; published in that order, the steady rate would
 * fall on one partition at a time. Each partition's records are spread evenly over the sequence instead (record j
 * of a partition of n at (j + 0.5) / n), each partition's order kept, so every partition gets its share all along.
 */
function interleave(records) {
  const byPartition = new Map();
  for (const r of records) {
    if (!byPartition.has(r.partition)) byPartition.set(r.partition, []);
    byPartition.get(r.partition).push(r);
  }
  const placed = [];
  for (const list of byPartition.values()) list.forEach((r, j) => placed.push({ r, at: (j + 0.5) / list.length }));
  return placed.sort((a, b) => a.at - b.at).map((p) => p.r);
}

/** The input records for the publisher's process, one JSON line each (key, value and headers in base64). */
function writeInput(file, records) {
  const b64 = (v) => (v === null || v === undefined ? null : Buffer.from(v).toString('base64'));
  const lines = records.map((r) => JSON.stringify({ p: r.partition, k: b64(r.key), v: b64(r.value), h: Object.fromEntries(Object.entries(r.headers ?? {}).map(([name, value]) => [name, b64(Array.isArray(value) ? value[value.length - 1] : value)])) }));
  writeFileSync(file, `${lines.join('\n')}\n`);
}

function readInput(file) {
  const buf = (v) => (v === null ? null : Buffer.from(v, 'base64'));
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const r = JSON.parse(line);
      return { partition: r.p, key: buf(r.k), value: buf(r.v), headers: Object.fromEntries(Object.entries(r.h).map(([name, value]) => [name, buf(value)])) };
    });
}

/** A text file of tab-separated lines, as arrays of fields. */
function readLines(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'));
}

/**
 * The phase's figures from the publisher's and the reader's files. Published lines: match key, published at,
 * input partition, input offset. Received lines: match key (or "-" when the output named none), received at, the
 * output's CreateTime. A record published before `measureFrom` is the warm-up; an output whose key was not
 * published, or was matched before (a duplicate output), is unmatched. Returns the summary and, per measured
 * matched record, its times (for the step breakdown).
 */
function merge(publishedFile, receivedFile, { measureFrom, measuredSeconds }) {
  const pending = new Map();
  let measured = 0;
  const warmup = { published: 0, matched: 0, maxMs: 0 };
  for (const [key, at, partition, offset] of readLines(publishedFile)) {
    const t = Number(at);
    pending.set(key, { t, partition: Number(partition), offset: offset === '' || offset === undefined ? undefined : Number(offset) });
    if (t >= measureFrom) measured++;
    else warmup.published++;
  }
  const samples = [];
  let received = 0;
  let unmatched = 0;
  let lastMatchAt = 0;
  for (const [key, at, createTime] of readLines(receivedFile)) {
    received++;
    const input = pending.get(key);
    if (input === undefined) {
      unmatched++;
      continue;
    }
    pending.delete(key);
    const now = Number(at);
    lastMatchAt = Math.max(lastMatchAt, now);
    if (input.t < measureFrom) {
      warmup.matched++;
      warmup.maxMs = Math.max(warmup.maxMs, now - input.t);
      continue;
    }
    samples.push({ publishedAt: input.t, receivedAt: now, producedAt: Number(createTime), partition: input.partition, offset: input.offset });
  }
  return { summary: summarize(samples, { measured, received, unmatched, warmup, measuredSeconds, measureFrom }), samples, lastMatchAt };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** p50, p90, p99, max (and the mean) of a list of ms. */
function stats(values) {
  const sorted = Float64Array.from(values).sort();
  const mean = sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : undefined;
  return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted.length ? sorted[sorted.length - 1] : undefined, mean };
}

/** Rates, matches, percentiles, their split, and p50/p99 per second of publishing. */
function summarize(samples, { measured, received, unmatched, warmup, measuredSeconds, measureFrom }) {
  const latency = samples.map((s) => s.receivedAt - s.publishedAt);
  const toProduced = samples.map((s) => s.producedAt - s.publishedAt);
  const total = stats(latency);
  const seconds = new Map();
  for (let k = 0; k < samples.length; k++) {
    const s = Math.floor((samples[k].publishedAt - measureFrom) / 1000);
    if (!seconds.has(s)) seconds.set(s, []);
    seconds.get(s).push(latency[k]);
  }
  const timeline = [...seconds.entries()].sort((a, b) => a[0] - b[0]).map(([second, list]) => ({ second, records: list.length, ...pick(stats(list), ['p50', 'p99', 'max']) }));
  return {
    achievedRate: measured / measuredSeconds,
    published: measured,
    matched: samples.length,
    missing: measured - samples.length,
    unmatchedOutputs: unmatched,
    outputsReceived: received,
    p50: total.p50,
    p99: total.p99,
    max: total.max,
    mean: total.mean,
    toProduced: pick(stats(toProduced), ['p50', 'p99', 'max']),
    producedToVisible: pick(stats(latency.map((l, k) => l - toProduced[k])), ['p50', 'p99', 'max']),
    warmup,
    timeline,
  };
}

function pick(object, keys) {
  return Object.fromEntries(keys.map((k) => [k, object[k]]));
}

// --- the step breakdown of the slowest records (--tail-steps, the library's operations.stepLog) ---

/**
 * A record's way from its publish to its output received, by the times its unit of work logged. committed →
 * received can be below zero: the broker makes the transaction visible as it writes the markers, before its
 * answer to EndTxn reaches the variant's process.
 */
const STEPS = [
  ['published → fetched', (s, u) => u.fetched - s.publishedAt],
  ['fetched → started', (s, u) => u.started - u.fetched],
  ['started → claimed', (s, u) => u.claimed - u.started],
  ['claimed → handled', (s, u) => u.handled - u.claimed],
  ['handled → recorded', (s, u) => u.recorded - u.handled],
  ['recorded → produced', (s, u) => u.produced - u.recorded],
  ['produced → pgCommitted', (s, u) => u.pgCommitted - u.produced],
  ['pgCommitted → committed', (s, u) => u.committed - u.pgCommitted],
  ['committed → received', (s, u) => s.receivedAt - u.committed],
];
/** At most this many records of "all" kept per phase (every n-th), for the medians over rounds. */
const ALL_SAMPLE = 20000;

/**
 * Each measured record's unit of work in the step log (by input partition and offset within first..last, units of
 * the input topic only), then the step times of the slowest 1% (by published → received) and of every record
 * (at most ALL_SAMPLE, evenly picked). Undefined when the variant wrote no step log.
 */
function tailSteps(stepLogFile, samples, inputTopic) {
  if (!existsSync(stepLogFile)) return undefined;
  const units = new Map();
  for (const line of readFileSync(stepLogFile, 'utf8').split('\n')) {
    if (!line) continue;
    let u;
    try {
      u = JSON.parse(line);
    } catch {
      continue; // a line cut short by the process's end
    }
    if (u.topic !== inputTopic && !inputTopic.endsWith(`.${u.topic}`) && !inputTopic.endsWith(u.topic)) continue;
    if (!units.has(u.partition)) units.set(u.partition, []);
    units.get(u.partition).push({ ...u, firstOffset: Number(u.first), lastOffset: Number(u.last) });
  }
  for (const list of units.values()) list.sort((a, b) => a.firstOffset - b.firstOffset);
  const unitOf = (s) => {
    const list = units.get(s.partition);
    if (!list || s.offset === undefined) return undefined;
    let lo = 0;
    let hi = list.length - 1;
    let found;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid].firstOffset <= s.offset) [found, lo] = [list[mid], mid + 1];
      else hi = mid - 1;
    }
    return found && s.offset <= found.lastOffset ? found : undefined;
  };
  const byLatency = [...samples].sort((a, b) => b.receivedAt - b.publishedAt - (a.receivedAt - a.publishedAt));
  const slowest = byLatency.slice(0, Math.max(1, Math.ceil(samples.length / 100)));
  const every = Math.max(1, Math.ceil(samples.length / ALL_SAMPLE));
  const all = samples.filter((_, i) => i % every === 0);
  const steps = (list) => {
    const out = [];
    for (const s of list) {
      const u = unitOf(s);
      if (u) out.push(STEPS.map(([, step]) => step(s, u)));
    }
    return out;
  };
  return { units: [...units.values()].reduce((n, l) => n + l.length, 0), slowest: { records: slowest.length, steps: steps(slowest) }, all: { records: samples.length, sampled: all.length, steps: steps(all) } };
}

/** p50 and p90 of each step over step vectors (NaN, a step the unit did not log, left out). */
function stepStats(vectors) {
  return STEPS.map(([name], i) => {
    const values = vectors.map((v) => v[i]).filter((x) => Number.isFinite(x));
    const s = stats(values);
    return { step: name, p50: s.p50, p90: s.p90 };
  });
}

module.exports = { kafkaClient, clock, feed, MATCHERS, writeInput, readInput, merge, stats, summarize, tailSteps, stepStats, STEPS };
