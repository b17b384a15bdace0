'use strict';
/**
 * The latency phase's reader, a process of its own (bench/bench.js spawns it): `node latency-reader.js <json>` with
 * { brokers, topic, groupId, match, out }.
 *
 * A read_committed consumer of the variant's output from its start, in a group of its own. It prints `READY` once
 * it has joined (the bench starts the variant and the publisher after that, so no output waits for its join),
 * then `SEEN <distinct match keys> <outputs> <last received at>` at most every 200 ms while outputs come (the bench
 * waits on it for the last output), and on SIGTERM `DONE <json>` (outputs, its CPU seconds) once its file is
 * written. Per output, one line to `out`: match key ("-" when the output names none), received at (epoch ms,
 * bench/latency.js clock, one reading per fetched batch), the output's CreateTime, its partition and offset.
 *
 * `maxWaitTimeInMs` bounds how late it can see an output if the broker did not answer a waiting fetch as soon as the
 * last stable offset moves; it does (Kafka 4.4, one broker: 20, 100 and 500 ms gave the same "to visible"
 * figures), so 100 ms only caps the cost of an idle reader. BENCH_LATENCY_READER_WAIT_MS overrides it.
 */
const { createWriteStream } = require('fs');
const { logLevel } = require('kafkajs');
const latency = require('./latency');

async function main() {
  const { brokers, topic, groupId, match, out } = JSON.parse(process.argv[2]);
  const keyOf = latency.MATCHERS[match].output;
  const maxWaitTimeInMs = Number(process.env.BENCH_LATENCY_READER_WAIT_MS || 100);
  const file = createWriteStream(out);
  const kafka = latency.kafkaClient({ clientId: 'bench-latency-reader', brokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId, readUncommitted: false, maxWaitTimeInMs, maxBytesPerPartition: 1 << 20, allowAutoTopicCreation: false });
  const seen = new Set();
  let outputs = 0;
  let lastAt = 0;
  let reported = 0;
  const report = setInterval(() => {
    if (outputs === reported) return;
    reported = outputs;
    process.stdout.write(`SEEN ${seen.size} ${outputs} ${lastAt.toFixed(3)}\n`);
  }, 200);

  const joined = new Promise((resolve) => consumer.on(consumer.events.GROUP_JOIN, resolve));
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      const now = latency.clock();
      const stamp = now.toFixed(3);
      let lines = '';
      for (const m of batch.messages) {
        let key;
        try {
          key = keyOf(m);
        } catch {
          key = undefined;
        }
        if (key !== undefined) seen.add(key);
        lines += `${key ?? '-'}\t${stamp}\t${m.timestamp}\t${batch.partition}\t${m.offset}\n`;
      }
      outputs += batch.messages.length;
      lastAt = now;
      file.write(lines);
    },
  });
  await Promise.race([joined, new Promise((_, reject) => setTimeout(() => reject(new Error(`latency reader of ${topic} did not join its group in 60 s`)), 60000).unref())]);
  const cpu = process.cpuUsage();
  process.stdout.write('READY\n');

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    clearInterval(report);
    await consumer.disconnect().catch(() => undefined);
    await new Promise((resolve) => file.end(resolve));
    const used = process.cpuUsage(cpu);
    process.stdout.write(`DONE ${JSON.stringify({ outputs, distinct: seen.size, cpuSeconds: (used.user + used.system) / 1e6 })}\n`);
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err) => {
  process.stderr.write(`latency reader failed: ${err.stack || err}\n`);
  process.exit(1);
});
