#!/usr/bin/env node
'use strict';
/**
 * `node bench/produce-encoding.js [--records 500] [--rounds 5]`: CPU time to encode one Produce request body of
 * `--records` records like the library's outputs (a 180-byte value, a key, four headers), by KafkaJS's encoders
 * and by the library's own (libs/kafka-exactly-once/src/kafkajs/producer/produce-encoding.ts, run from dist/: build
 * first). Prints the CPU µs per record of each; the bytes are checked equal first.
 */
const produceV3 = require('kafkajs/src/protocol/requests/produce/v3/request');
const crc32c = require('kafkajs/src/protocol/recordBatch/crc32C');
const { encodeProduceBody } = require('../dist/libs/kafka-exactly-once/kafkajs/producer/produce-encoding');

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : def);
const count = opt('--records', 500);
const rounds = opt('--rounds', 5);
const now = Date.now();
const messages = Array.from({ length: count }, (_, i) => ({
  key: Buffer.from(`acct-${i % 200}`),
  value: Buffer.alloc(180, i % 251),
  timestamp: String(now),
  headers: {
    'message-id': Buffer.from(`0193a1b2-c3d4-7e5f-8a9b-${String(i).padStart(12, '0')}`),
    'event-type': Buffer.from('com.example.PaymentRequested'),
    'causation-id': Buffer.from(`payments/3/${i}`),
    traceparent: Buffer.from('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'),
  },
}));
const args = { acks: -1, timeout: 30000, transactionalId: 'bench-tx', producerId: '1000', producerEpoch: 0, topicData: [{ topic: 'out', partitions: [{ partition: 0, firstSequence: 0, messages }] }] };

async function measure(encode) {
  const iterations = Math.max(20, Math.round(100000 / count));
  for (let i = 0; i < 5; i++) await encode();
  const start = process.cpuUsage();
  for (let i = 0; i < iterations; i++) await encode();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / iterations / count;
}

(async () => {
  const theirs = (await produceV3(args).encode()).buffer;
  if (!encodeProduceBody(args, crc32c, now).equals(theirs)) throw new Error('the encodings differ: fix produce-encoding.ts before measuring');
  console.log(`Produce request body of ${count} records (${theirs.length} bytes), ${rounds} rounds`);
  for (let round = 1; round <= rounds; round++) {
    const k = await measure(async () => (await produceV3(args).encode()).buffer);
    const o = await measure(async () => encodeProduceBody(args, crc32c));
    console.log(`round ${round}: KafkaJS ${k.toFixed(2)} µs per record, the library's ${o.toFixed(2)} µs per record`);
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
