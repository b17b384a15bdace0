'use strict';
/**
 * Real check of scripts/verify/java-reader.js against a running broker (plain node:test, no jest):
 *
 *   VERIFY_TEST_BROKERS=127.0.0.1:9292 node --test scripts/verify/java-reader.node-test.js
 *
 * Skipped when VERIFY_TEST_BROKERS is not set. Produces with kafkajs (the test's writer only; the reader under test
 * is the Java client) plain records, a committed transaction, aborted transactions (one at the tail of a
 * partition) and a transaction left open while reading, then checks that the Java reader returns exactly the plain
 * and committed records, byte for byte (binary keys, values, headers, nulls, repeated header names).
 */
const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Kafka, logLevel } = require('kafkajs');
const { readCommitted, readCommittedDetailed, ensureCompiled } = require('./java-reader');

/** Creates topics and waits for their leaders (a KRaft broker answers "unknown topic" for a moment after creating one). */
async function createTopicsAndWait(admin, topics) {
  await admin.createTopics({ waitForLeaders: false, topics });
  for (let i = 0; ; i++) {
    const metadata = await admin.fetchTopicMetadata({ topics: topics.map((t) => t.topic) }).catch(() => null);
    if (metadata && metadata.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) return;
    if (i >= 150) throw new Error(`topics ${topics.map((t) => t.topic).join(', ')} have no leader`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const BROKERS = process.env.VERIFY_TEST_BROKERS ? process.env.VERIFY_TEST_BROKERS.split(',') : null;

function bin(tag, i) {
  // Every byte value, plus a unique tag, so any lossy text conversion shows.
  return Buffer.concat([Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0a, 0x22, 0x5c]), Buffer.from(`${tag}:${i}`), crypto.randomBytes(8)]);
}

function fingerprint(r) {
  const hex = (b) => (b === null || b === undefined ? 'null' : Buffer.from(b).toString('hex'));
  return JSON.stringify([r.topic, r.partition, hex(r.key), hex(r.value), r.headers.map(([k, v]) => [k, hex(v)])]);
}

test('java reader: read_committed snapshot, byte for byte', { skip: !BROKERS && 'set VERIFY_TEST_BROKERS' }, async () => {
  const kafka = new Kafka({ clientId: 'verify-java-reader-spec', brokers: BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  const run = `${Date.now()}-${crypto.randomBytes(3).toString('hex')}`;
  const topicA = `verify-reader-a-${run}`;
  const topicB = `verify-reader-b-${run}`;
  await admin.connect();
  await createTopicsAndWait(admin, [
    { topic: topicA, numPartitions: 3, replicationFactor: 1 },
    { topic: topicB, numPartitions: 1, replicationFactor: 1 },
  ]);

  const expected = [];
  const aborted = [];
  const plain = kafka.producer({ allowAutoTopicCreation: false });
  const tx = kafka.producer({ transactionalId: `verify-tx-${run}`, idempotent: true, maxInFlightRequests: 1 });
  const openTx = kafka.producer({ transactionalId: `verify-open-${run}`, idempotent: true, maxInFlightRequests: 1 });
  await Promise.all([plain.connect(), tx.connect(), openTx.connect()]);
  const toRecord = (topic, partition, m) => ({
    topic,
    partition,
    key: m.key,
    value: m.value,
    headers: Object.entries(m.headers || {}).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
  });
  try {
    // Plain records, including a null key, a null value and header edge cases.
    for (let p = 0; p < 3; p++) {
      const messages = [
        { key: bin('plain-key', p), value: bin('plain', p), headers: { 'h-bin': bin('hv', p), 'h-rep': [bin('r1', p), bin('r2', p)] }, partition: p },
        { key: null, value: bin('plain-nokey', p), partition: p },
        { key: bin('tomb', p), value: null, headers: { 'h-empty': Buffer.alloc(0), 'naïve-ü': Buffer.from('x') }, partition: p },
      ];
      await plain.send({ topic: topicA, messages });
      expected.push(...messages.map((m) => toRecord(topicA, p, m)));
    }

    // A committed transaction over both topics.
    let t = await tx.transaction();
    for (let p = 0; p < 3; p++) {
      const m = { key: bin('c-key', p), value: bin('committed', p), headers: { trace: bin('c-h', p) }, partition: p };
      await t.send({ topic: topicA, messages: [m] });
      expected.push(toRecord(topicA, p, m));
    }
    const mb = { key: bin('c-key-b', 0), value: bin('committed-b', 0), partition: 0 };
    await t.send({ topic: topicB, messages: [mb] });
    expected.push(toRecord(topicB, 0, mb));
    await t.commit();

    // An aborted transaction in the middle of partitions 0 and 1 ...
    t = await tx.transaction();
    for (const p of [0, 1]) {
      const m = { key: bin('a-key', p), value: bin('aborted', p), partition: p };
      await t.send({ topic: topicA, messages: [m, { ...m, value: bin('aborted2', p) }] });
      aborted.push(m.value.toString('hex'));
    }
    await t.abort();
    for (const p of [0, 1]) {
      const m = { key: bin('after-abort', p), value: bin('after-abort', p), partition: p };
      await plain.send({ topic: topicA, messages: [m] });
      expected.push(toRecord(topicA, p, m));
    }
    // ... and one at the very end of partition 2 (the reader must step over the abort marker and stop).
    t = await tx.transaction();
    const tail = { key: bin('tail-key', 2), value: bin('aborted-tail', 2), partition: 2 };
    await t.send({ topic: topicA, messages: [tail] });
    aborted.push(tail.value.toString('hex'));
    await t.abort();

    // A transaction left open on topic B: its records, and a plain one written after it, are past the LSO.
    const open = await openTx.transaction();
    const om = { key: bin('open-key', 0), value: bin('open', 0), partition: 0 };
    await open.send({ topic: topicB, messages: [om] });
    aborted.push(om.value.toString('hex'));
    const late = { key: bin('late', 0), value: bin('late-plain', 0), partition: 0 };
    await plain.send({ topic: topicB, messages: [late] });
    aborted.push(late.value.toString('hex'));

    const compiled = await ensureCompiled();
    const { records, counts, endOffsets, ms } = await readCommittedDetailed({ brokers: BROKERS, topics: [topicA, topicB], timeoutMs: 60000 });
    console.log(`compiled: ${compiled.compiled} (${compiled.compileMs} ms); read ${records.length} records in ${ms} ms`, counts, endOffsets);
    await open.abort();

    const values = new Set(records.map((r) => (r.value ? r.value.toString('hex') : null)));
    for (const a of aborted) assert.ok(!values.has(a), 'an aborted, open or past-the-LSO record was returned');
    assert.deepEqual(records.map(fingerprint).sort(), expected.map(fingerprint).sort());
    assert.deepEqual(counts, { [topicA]: expected.filter((r) => r.topic === topicA).length, [topicB]: 1 });
    for (const r of records) {
      assert.match(r.offset, /^\d+$/);
      assert.match(r.timestamp, /^\d+$/);
      assert.ok(r.key === null || Buffer.isBuffer(r.key));
    }
    // Offsets strictly increase within each partition.
    const last = new Map();
    for (const r of records) {
      const k = `${r.topic}/${r.partition}`;
      assert.ok(!last.has(k) || BigInt(r.offset) > last.get(k));
      last.set(k, BigInt(r.offset));
    }
    // After the open transaction aborted, the late plain record becomes readable.
    const again = await readCommitted({ brokers: BROKERS, topics: [topicB] });
    assert.deepEqual(again.map((r) => r.value.toString('hex')).sort(), [mb.value.toString('hex'), late.value.toString('hex')].sort());

    // Errors: an unknown topic fails with a message, not an empty result.
    await assert.rejects(readCommitted({ brokers: BROKERS, topics: [`verify-missing-${run}`], timeoutMs: 10000 }), /does not exist/);
  } finally {
    await Promise.allSettled([plain.disconnect(), tx.disconnect(), openTx.disconnect()]);
    await admin.deleteTopics({ topics: [topicA, topicB] }).catch(() => {});
    await admin.disconnect();
  }
});

test('java reader: ~1000 records, half of them transactional', { skip: !BROKERS && 'set VERIFY_TEST_BROKERS' }, async () => {
  const kafka = new Kafka({ clientId: 'verify-java-reader-spec', brokers: BROKERS, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  const topic = `verify-reader-bulk-${Date.now()}`;
  await admin.connect();
  await createTopicsAndWait(admin, [{ topic, numPartitions: 4, replicationFactor: 1 }]);
  const plain = kafka.producer();
  const tx = kafka.producer({ transactionalId: `verify-bulk-${topic}`, idempotent: true, maxInFlightRequests: 1 });
  await Promise.all([plain.connect(), tx.connect()]);
  try {
    const msg = (i) => ({ key: Buffer.from(`k${i % 37}`), value: crypto.randomBytes(200), headers: { i: String(i) } });
    for (let b = 0; b < 5; b++) {
      await plain.send({ topic, messages: Array.from({ length: 100 }, (_, j) => msg(b * 100 + j)) });
      const t = await tx.transaction();
      await t.send({ topic, messages: Array.from({ length: 100 }, (_, j) => msg(500 + b * 100 + j)) });
      await t.commit();
      const a = await tx.transaction();
      await a.send({ topic, messages: Array.from({ length: 20 }, (_, j) => msg(9000 + j)) });
      await a.abort();
    }
    const { records, ms } = await readCommittedDetailed({ brokers: BROKERS, topics: [topic] });
    console.log(`bulk: read ${records.length} records in ${ms} ms`);
    assert.equal(records.length, 1000);
    assert.equal(new Set(records.map((r) => r.headers[0][1].toString())).size, 1000);
  } finally {
    await Promise.allSettled([plain.disconnect(), tx.disconnect()]);
    await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    await admin.disconnect();
  }
});
