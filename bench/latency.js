'use strict';
/**
 * The bench's latency phase, the parts that run in the bench process itself (bench/bench.js sets up and stops the
 * variant): a feed of input records, a steady publisher, and a read_committed reader of the variant's output that
 * matches each output to the input it came from.
 *
 * Latency of a record = the moment the bench's reader receives its output − the moment the bench handed the input
 * to its producer (also the input's CreateTime). Both clocks are this process's Date.now(). The output's own
 * CreateTime (set by the variant's producer when it sent the output, before its commit) splits that in two: input
 * published → output produced (fetch, handling, database statements), and output produced → visible to a
 * read_committed consumer (the variant's commits: PostgreSQL COMMIT, TxnOffsetCommit and EndTxn for the
 * transactional ones, then the transaction marker, then the reader's fetch).
 *
 * Kept lean (the bench shares 2 cores with Kafka, PostgreSQL and the variant): one produce request per 10 ms tick,
 * one Date.now() per fetched batch, a Map from match key to publish time, no per-record logging.
 */
const { randomUUID } = require('crypto');
const { readFileSync } = require('fs');
const { join } = require('path');
const avro = require('avsc');

const SCHEMAS = join(__dirname, '../schemas');
const readType = (file) => avro.Type.forSchema(JSON.parse(readFileSync(join(SCHEMAS, file), 'utf8')));
const PaymentRequested = readType('payment-requested.v1.avsc');
const PaymentProcessed = readType('payment-processed.v1.avsc');
/** C3 01 and the 8-byte fingerprint of single-object encoding. */
const SINGLE_OBJECT_HEADER = 10;

const TICK_MS = 10;
/** At most this many records per produce request: a publisher that fell behind catches up in a few ticks. */
const MAX_PER_SEND = 2000;

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

/** Publish times by match key, and what the reader matched. */
class Tracker {
  constructor() {
    this.pending = new Map();
    this.measureFrom = Infinity; // records published before this are the warm-up
    this.published = 0;
    this.measured = 0;
    this.received = 0; // every output record the reader got
    this.unmatched = 0; // outputs whose key is unknown or was matched before (a duplicate output)
    this.lastMatchAt = 0;
    this.warmup = { published: 0, matched: 0, maxMs: 0 };
    this.sentAt = []; // per measured, matched record: publish time, latency, publish → output produced
    this.latency = [];
    this.toProduced = [];
  }

  sent(key, t) {
    this.pending.set(key, t);
    this.published++;
    if (t >= this.measureFrom) this.measured++;
    else this.warmup.published++;
  }

  /** One fetched batch of the output, received at `now`. */
  batch(messages, now, keyOf) {
    for (const m of messages) {
      this.received++;
      let key;
      try {
        key = keyOf(m);
      } catch {
        key = undefined;
      }
      const t = key === undefined ? undefined : this.pending.get(key);
      if (t === undefined) {
        this.unmatched++;
        continue;
      }
      this.pending.delete(key);
      this.lastMatchAt = now;
      if (t < this.measureFrom) {
        this.warmup.matched++;
        this.warmup.maxMs = Math.max(this.warmup.maxMs, now - t);
        continue;
      }
      this.sentAt.push(t);
      this.latency.push(now - t);
      this.toProduced.push(Number(m.timestamp) - t);
    }
  }
}

/**
 * A read_committed consumer of `topic` from its start, in a group of its own; resolves once it has joined (so that
 * no output waits for its join). `maxWaitTimeInMs` bounds how late it can see an output if the broker did not
 * answer a waiting fetch as soon as the last stable offset moves; it does (Kafka 4.4, one broker: 20, 100 and
 * 500 ms gave the same "to visible" figures), so 100 ms only caps the cost of an idle reader.
 * BENCH_LATENCY_READER_WAIT_MS overrides it, for such experiments.
 */
async function startReader(kafka, topic, groupId, match, tracker, { maxWaitTimeInMs = Number(process.env.BENCH_LATENCY_READER_WAIT_MS || 100) } = {}) {
  const keyOf = MATCHERS[match].output;
  const consumer = kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs, maxBytesPerPartition: 1 << 20, allowAutoTopicCreation: false });
  const joined = new Promise((resolve) => consumer.on(consumer.events.GROUP_JOIN, resolve));
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length > 0) tracker.batch(batch.messages, Date.now(), keyOf);
    },
  });
  await Promise.race([joined, new Promise((_, reject) => setTimeout(() => reject(new Error(`latency reader of ${topic} did not join its group in 60 s`)), 60000).unref())]);
  return consumer;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/**
 * Publishes at `rate` records/s for `warmupMs` + `seconds` with an idempotent producer (acks all, one request at
 * a time, so per-key order holds): every 10 ms, the records due by then in one request, each stamped (CreateTime
 * and the tracker) with the moment it is handed to the producer. A request still in flight at the next tick
 * delays the next one; the records due meanwhile go in it, stamped when sent (the bench's own lag is not counted
 * against the variant, and shows as an achieved rate below the asked one).
 */
async function publishSteady(kafka, topic, next, { rate, seconds, warmupMs, tracker, check }) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  try {
    const start = Date.now();
    tracker.measureFrom = start + warmupMs;
    const end = tracker.measureFrom + seconds * 1000;
    let i = 0;
    let lastSendAt = start;
    for (;;) {
      const now = Date.now();
      if (now >= end) break;
      check?.();
      const due = Math.min(MAX_PER_SEND, Math.floor((rate * (now - start)) / 1000) - i);
      if (due > 0) {
        const messages = new Array(due);
        const t = Date.now();
        const timestamp = String(t);
        for (let k = 0; k < due; k++) {
          const { record, matchKey } = next(i + k);
          messages[k] = { ...record, timestamp };
          tracker.sent(matchKey, t);
        }
        i += due;
        lastSendAt = t;
        await producer.send({ topic, acks: -1, messages });
      }
      const after = Date.now() - start;
      await sleep(Math.ceil((after + 1) / TICK_MS) * TICK_MS - after);
    }
    return { start, end: Math.max(end, lastSendAt), measuredSeconds: seconds };
  } finally {
    await producer.disconnect().catch(() => undefined);
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** p50, p99, max (and the mean) of a list of ms. */
function stats(values) {
  const sorted = Float64Array.from(values).sort();
  const mean = sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : undefined;
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.length ? sorted[sorted.length - 1] : undefined, mean };
}

/** The tracker's figures: rates, matches, percentiles, their split, and p50/p99 per second of publishing. */
function summarize(tracker, { measuredSeconds, measureFrom }) {
  const total = stats(tracker.latency);
  const produced = stats(tracker.toProduced);
  const visible = stats(tracker.latency.map((l, k) => l - tracker.toProduced[k]));
  const seconds = new Map();
  for (let k = 0; k < tracker.sentAt.length; k++) {
    const s = Math.floor((tracker.sentAt[k] - measureFrom) / 1000);
    if (!seconds.has(s)) seconds.set(s, []);
    seconds.get(s).push(tracker.latency[k]);
  }
  const timeline = [...seconds.entries()].sort((a, b) => a[0] - b[0]).map(([second, list]) => ({ second, records: list.length, ...pick(stats(list), ['p50', 'p99', 'max']) }));
  return {
    achievedRate: tracker.measured / measuredSeconds,
    published: tracker.measured,
    matched: tracker.latency.length,
    missing: tracker.measured - tracker.latency.length,
    unmatchedOutputs: tracker.unmatched,
    outputsReceived: tracker.received,
    p50: total.p50,
    p99: total.p99,
    max: total.max,
    mean: total.mean,
    toProduced: pick(produced, ['p50', 'p99', 'max']),
    producedToVisible: pick(visible, ['p50', 'p99', 'max']),
    warmup: tracker.warmup,
    timeline,
  };
}

function pick(object, keys) {
  return Object.fromEntries(keys.map((k) => [k, object[k]]));
}

module.exports = { feed, Tracker, startReader, publishSteady, summarize, MATCHERS };
