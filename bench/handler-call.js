#!/usr/bin/env node
'use strict';
/**
 * `node bench/handler-call.js [--records 20000] [--rounds 5]`: CPU time of the library's own work around one
 * handler call of a unit of work (the optimistic case: no savepoint), without Kafka or PostgreSQL: the record's
 * identity and decoding, the call through the handler pipeline with its deadline and tracing (OpenTelemetry's
 * API when installed, no SDK), and one `ctx.emit` (Avro encoding, message id, headers), as bench E's handler
 * does. Run from dist/ (build first). Prints µs per record for each round.
 */
require('reflect-metadata');
const { join } = require('path');
const { Logger } = require('@nestjs/common');
const { resolveOptions } = require('../dist/libs/kafka-exactly-once/options/resolve-options');
const { SchemaRegistry } = require('../dist/libs/kafka-exactly-once/formats/avro/schema-registry');
const { encodeSingleObject, decodeSingleObject } = require('../dist/libs/kafka-exactly-once/formats/avro/single-object.codec');
const { identify } = require('../dist/libs/kafka-exactly-once/engine/record-identity');
const { MessageHeaderReader } = require('../dist/libs/kafka-exactly-once/engine/record-headers');
const { invokeHandler } = require('../dist/libs/kafka-exactly-once/engine/handler-invocation');
const { HandlerPipeline } = require('../dist/libs/kafka-exactly-once/handler-pipeline');
const { KafkaExactlyOnceTracing } = require('../dist/libs/kafka-exactly-once/tracing/kafka-exactly-once.tracing');
const { typeormDatabase } = require('../dist/libs/kafka-exactly-once/database/typeorm.database');
const { DataSource } = require('typeorm');

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : def);
const count = opt('--records', 20000);
const rounds = opt('--rounds', 5);

const options = resolveOptions({
  kafka: { clientId: 'bench', brokers: ['127.0.0.1:9092'] },
  groupId: 'bench-handler-call',
  transactionalIdPrefix: 'bench-handler-call',
  schemas: { directory: join(__dirname, '../schemas') },
  topics: { out: { schema: 'com.example.PaymentRequested' } },
});
const registry = SchemaRegistry.fromDirectory(options.schemas.directory);
const schema = registry.current('com.example.PaymentRequested');

class CopyHandler {
  async onPayment(event, ctx) {
    ctx.emit('out', event, { key: event.accountId });
  }
}
const call = new HandlerPipeline({}).create({ instance: new CopyHandler(), methodName: 'onPayment' });
const handler = { name: 'CopyHandler.onPayment', topic: 'payments', schema, retry: { attempts: 3, initialDelayMs: 10, multiplier: 2, maxDelayMs: 100 }, invoke: async (event, ctx) => { await call(event, ctx); } };
// The default data layer (TypeORM) over a DataSource never connected: what a call is lent is built, no statement is sent.
const database = typeormDatabase(new DataSource({ type: 'postgres' }));
const deps = { database, handler, registry, options, topicLimits: new Map([['out', 1048588]]), heartbeat: async () => undefined, logger: new Logger('bench'), tracing: new KafkaExactlyOnceTracing() };

const now = Date.now();
const messages = Array.from({ length: count }, (_, i) => ({
  offset: String(i),
  key: Buffer.from(`acct-${i % 200}`),
  timestamp: String(now),
  value: encodeSingleObject(schema, { paymentId: `p-${i}`, accountId: `acct-${i % 200}`, amountCents: 1000 + i, requestedAt: new Date(now).toISOString() }),
  headers: { 'message-id': Buffer.from(`0193a1b2-c3d4-7e5f-8a9b-${String(i).padStart(12, '0')}`), 'event-type': Buffer.from('com.example.PaymentRequested') },
}));
const runner = { manager: {}, isReleased: false, transactionDepth: 1 };

async function unit() {
  let emitted = 0;
  for (const message of messages) {
    const id = identify('payments', 0, message, 'topic');
    const event = decodeSingleObject(registry, schema, message.value);
    const info = { topic: 'payments', partition: 0, offset: message.offset, key: message.key.toString(), messageId: id.displayId, timestamp: message.timestamp };
    const result = await invokeHandler(deps, runner, { info, id, headers: new MessageHeaderReader(message) }, event, { savepoints: false });
    emitted += result.outputs.length;
  }
  if (emitted !== count) throw new Error(`${emitted} outputs for ${count} records`);
}

(async () => {
  await unit(); // warm up (and checks every record emitted its output)
  console.log(`${count} records per round; @opentelemetry/api ${safeResolve('@opentelemetry/api') ? 'installed (no SDK)' : 'not installed'}`);
  for (let round = 1; round <= rounds; round++) {
    const start = process.cpuUsage();
    await unit();
    const used = process.cpuUsage(start);
    console.log(`round ${round}: ${((used.user + used.system) / count).toFixed(2)} µs per record`);
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});

function safeResolve(name) {
  try {
    return require.resolve(name);
  } catch {
    return undefined;
  }
}
