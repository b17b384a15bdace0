'use strict';
/**
 * The latency phase's publisher, a process of its own (bench/bench.js spawns it): `node latency-publisher.js <json>`
 * with { brokers, topic, input, records, match, rate, seconds, warmupMs, out }.
 *
 * Publishes at `rate` records/s for `warmupMs` + `seconds` with an idempotent producer (acks all, one request at a
 * time, so per-key order holds): every 10 ms, the records due by then in one request, each stamped (CreateTime
 * and its line) with the moment it is handed to the producer. A request still in flight at the next tick delays
 * the next one; the records due meanwhile go in it, stamped when sent (the publisher's own lag is not counted
 * against the variant, and shows as an achieved rate below the asked one). The records are the first `records` of
 * the input file, then again with fresh ids (bench/latency.js feed).
 *
 * Writes one line per record to `out`: match key, published at (epoch ms, bench/latency.js clock), partition and
 * offset (the produce response's base offset of the partition plus the record's index among that partition's
 * records in the request). Then prints `RESULT <json>`: start, measureFrom, end, published, measuredSeconds and
 * its own CPU seconds.
 */
const { createWriteStream } = require('fs');
const { logLevel } = require('kafkajs');
const latency = require('./latency');

const TICK_MS = 10;
/** At most this many records per produce request: a publisher that fell behind catches up in a few ticks. */
const MAX_PER_SEND = 2000;

const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

async function main() {
  const { brokers, topic, input, records, match, rate, seconds, warmupMs, out } = JSON.parse(process.argv[2]);
  const next = latency.feed(latency.readInput(input).slice(0, records), match);
  const file = createWriteStream(out);
  const kafka = latency.kafkaClient({ clientId: 'bench-latency-publisher', brokers, logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  const cpu = process.cpuUsage();
  const start = latency.clock();
  const measureFrom = start + warmupMs;
  const end = measureFrom + seconds * 1000;
  let i = 0;
  let lastSendAt = start;
  try {
    for (;;) {
      const now = latency.clock();
      if (now >= end) break;
      const due = Math.min(MAX_PER_SEND, Math.floor((rate * (now - start)) / 1000) - i);
      if (due > 0) {
        const messages = new Array(due);
        const keys = new Array(due);
        const t = latency.clock();
        const timestamp = String(Math.round(t));
        for (let k = 0; k < due; k++) {
          const { record, matchKey } = next(i + k);
          messages[k] = { ...record, timestamp };
          keys[k] = matchKey;
        }
        i += due;
        lastSendAt = t;
        const answer = await producer.send({ topic, acks: -1, messages });
        const base = new Map(answer.map((p) => [p.partition, Number(p.baseOffset)]));
        const index = new Map();
        const stamp = t.toFixed(3);
        let lines = '';
        for (let k = 0; k < due; k++) {
          const partition = messages[k].partition;
          const n = index.get(partition) ?? 0;
          index.set(partition, n + 1);
          const offset = base.get(partition);
          lines += `${keys[k]}\t${stamp}\t${partition}\t${offset === undefined || Number.isNaN(offset) ? '' : offset + n}\n`;
        }
        file.write(lines);
      }
      const after = latency.clock() - start;
      await sleep(Math.ceil((after + 1) / TICK_MS) * TICK_MS - after);
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
    await new Promise((resolve) => file.end(resolve));
  }
  const used = process.cpuUsage(cpu);
  process.stdout.write(`RESULT ${JSON.stringify({ start, measureFrom, end: Math.max(end, lastSendAt), published: i, measuredSeconds: seconds, cpuSeconds: (used.user + used.system) / 1e6 })}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`latency publisher failed: ${err.stack || err}\n`);
    process.exit(1);
  },
);
