#!/usr/bin/env node
'use strict';
/**
 * `node bench/producers.js [--partitions 6] [--seconds 10] [--records 20] [--drivers kafkajs,platformatic]`: what
 * the unit of work's fencing choice costs (docs/protocol.md, "Why a producer per partition"). The library's own
 * transactional producer (CheckedProducer, from dist/: build first) commits transactions shaped like units of work
 * (`--records` outputs to one output partition, and the offset of one input partition), for `--partitions` input
 * partitions side by side, two ways:
 *   per-partition  one transactional producer per input partition (what the library does): the partitions commit
 *                  side by side;
 *   shared         one transactional producer for all of them (what group metadata in TxnOffsetCommit would allow):
 *                  each runs one transaction at a time, so the partitions take turns.
 * Prints, per driver and way: transactions committed per second, producers (and so transactional ids) open, and
 * the time a new producer takes to take a transactional id over from one that was SIGKILLed with a transaction
 * open (InitProducerId, which aborts it): what a partition's new owner waits before its first unit. The
 * platformatic driver needs Node.js 22.22+ or 24.6+. KAFKA_BROKERS (127.0.0.1:9092).
 */
const { spawn } = require('child_process');
const { join } = require('path');
const { randomUUID } = require('crypto');
const { Kafka, logLevel } = require('kafkajs');

const DIST = join(__dirname, '../dist/libs/kafka-exactly-once');
const argv = process.argv.slice(2);
const flag = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const partitions = Number(flag('partitions', '6'));
const seconds = Number(flag('seconds', '10'));
const records = Number(flag('records', '20'));
const drivers = flag('drivers', 'kafkajs,platformatic').split(',');
const brokers = (process.env.KAFKA_BROKERS || '127.0.0.1:9092').split(',');

function libraryClient(driver) {
  const { createKafkaClient, CheckedProducer } = require(join(DIST, 'kafkajs'));
  const kafka = createKafkaClient({ brokers, logLevel: logLevel.ERROR });
  if (driver === 'platformatic') {
    const { useDriverParts } = require(join(DIST, 'client/driver-parts'));
    const { platformaticParts } = require(join(DIST, 'platformatic/driver-parts'));
    useDriverParts(kafka, platformaticParts({ brokers }));
  }
  return { kafka, CheckedProducer };
}

/** One unit of work's transaction: `records` outputs on the input partition's output partition, and its offset. */
async function unit(producer, topic, group, partition, offset) {
  const txn = await producer.transaction();
  const value = Buffer.alloc(180, partition);
  await txn.send([{ topic, messages: Array.from({ length: records }, (_, i) => ({ partition, key: `k-${i}`, value })) }]);
  await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: `${topic}.in`, partitions: [{ partition, offset: String(offset) }] }] });
  await txn.commit();
}

async function way(driver, shared) {
  const { kafka, CheckedProducer } = libraryClient(driver);
  const run = randomUUID().slice(0, 8);
  const topic = `bench-producers-${run}`;
  const admin = new Kafka({ brokers, logLevel: logLevel.ERROR }).admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions }, { topic: `${topic}.in`, numPartitions: partitions }], waitForLeaders: true });
  await admin.disconnect();
  const group = `bench-producers-${run}`;
  const producers = shared
    ? [new CheckedProducer(kafka, { transactionalId: `${topic}.shared` })]
    : Array.from({ length: partitions }, (_, p) => new CheckedProducer(kafka, { transactionalId: `${topic}.${p}` }));
  await Promise.all(producers.map((p) => p.connect()));
  // The shared producer's partitions queue for it, one transaction at a time (as units of work would).
  let turn = Promise.resolve();
  const exclusive = (task) => {
    const next = turn.then(task);
    turn = next.catch(() => undefined);
    return next;
  };
  let committed = 0;
  const until = Date.now() + seconds * 1000;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: partitions }, async (_, p) => {
      for (let offset = 1; Date.now() < until; offset++) {
        if (shared) await exclusive(() => unit(producers[0], topic, group, p, offset));
        else await unit(producers[p], topic, group, p, offset);
        committed++;
      }
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  await Promise.all(producers.map((p) => p.disconnect()));
  return { committed, perSecond: committed / elapsed, producers: producers.length };
}

/** A child holds a transaction of `id` open and is SIGKILLed; then a new producer takes the id over: how long. */
async function takeOver(driver) {
  const id = `bench-producers-takeover-${randomUUID().slice(0, 8)}`;
  const topic = `${id}.out`;
  const admin = new Kafka({ brokers, logLevel: logLevel.ERROR }).admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const child = spawn(process.execPath, [__filename, '--hold', id, '--driver', driver, '--topic', topic], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => String(d).includes('open') && resolve());
    child.on('exit', (code) => reject(new Error(`the holder exited ${code} before its transaction was open`)));
  });
  child.kill('SIGKILL');
  const { kafka, CheckedProducer } = libraryClient(driver);
  const producer = new CheckedProducer(kafka, { transactionalId: id });
  const start = Date.now();
  await producer.connect();
  const ms = Date.now() - start;
  await producer.disconnect();
  return ms;
}

async function hold(id, driver, topic) {
  const { kafka, CheckedProducer } = libraryClient(driver);
  const producer = new CheckedProducer(kafka, { transactionalId: id });
  await producer.connect();
  const txn = await producer.transaction();
  await txn.send([{ topic, messages: [{ key: 'k', value: 'open' }] }]);
  process.stdout.write('open\n');
  await new Promise(() => undefined);
}

(async () => {
  if (argv.includes('--hold')) return hold(flag('hold'), flag('driver'), flag('topic'));
  console.log(`bench/producers: ${partitions} input partitions side by side, ${records} outputs and one offset per transaction, ${seconds} s per way; Node.js ${process.version}`);
  console.log('driver        way            producers  transactions/s  take-over after SIGKILL');
  for (const driver of drivers) {
    const takeOverMs = await takeOver(driver);
    for (const shared of [false, true]) {
      const r = await way(driver, shared);
      console.log(`${driver.padEnd(12)}  ${(shared ? 'shared' : 'per-partition').padEnd(13)}  ${String(r.producers).padStart(9)}  ${r.perSecond.toFixed(0).padStart(14)}  ${shared ? '' : `${takeOverMs} ms`}`);
    }
  }
  process.exit(0);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
