'use strict';
/**
 * Variant E: the library with a trivial handler (`ctx.emit` of the input to the output topic), default
 * settings. Exactly-once: inbox claim, Kafka transaction with the offsets, PostgreSQL commit.
 *
 * Variants K1 and K: the same copy after a lookup of BENCH_LOOKUP_MS per event (a timer), under @OrderedEvent by
 * the record key with BENCH_LANES key lanes.
 *
 * Variant F: E's copy where the handler throws, every time, for the records whose paymentId hashes to 0 modulo
 * BENCH_FAIL_EVERY (1 in that many; dead-lettered after their in-place attempts); every call counted per record,
 * in this process (a rolled-back call counts too), and written to BENCH_CALLS_FILE when the process stops.
 * Variant G: F's with BENCH_STATEMENT=1, where every call first sends a statement in the unit's transaction (a
 * read), so that a failure comes after the handler's statements.
 *
 * BENCH_STEP_LOG (the bench's --tail-steps): the module's operations.stepLog, each committed unit's step times.
 */
require('reflect-metadata');
const { join } = require('path');
const { Injectable, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { TypeOrmModule } = require('@nestjs/typeorm');
const { createHash } = require('crypto');
const { writeFileSync } = require('fs');
const { IdempotentHandler, KafkaExactlyOnceModule, OrderedEvent } = require('../../dist/libs/kafka-exactly-once');
const { benchEnv, onStop } = require('./common');

async function main() {
  const env = benchEnv();
  const inputName = env.input.slice(env.prefix.length);
  const outputName = env.output.slice(env.prefix.length);

  const lookupMs = Number(process.env.BENCH_LOOKUP_MS || 0);
  const lanes = process.env.BENCH_LANES ? Number(process.env.BENCH_LANES) : undefined;
  const failEvery = Number(process.env.BENCH_FAIL_EVERY || 0);
  const failing = (paymentId) => failEvery > 0 && createHash('sha256').update(paymentId).digest().readUInt32BE(0) % failEvery === 0;
  /** Handler calls per paymentId (BENCH_CALLS_FILE only). */
  const calls = new Map();
  class CopyHandler {
    async onPayment(event, ctx) {
      if (process.env.BENCH_CALLS_FILE) calls.set(event.paymentId, (calls.get(event.paymentId) ?? 0) + 1);
      if (lookupMs > 0) await new Promise((r) => setTimeout(r, lookupMs));
      if (process.env.BENCH_STATEMENT === '1') await ctx.manager.query('SELECT 1');
      if (failing(event.paymentId)) throw new Error(`payment ${event.paymentId} fails on purpose (BENCH_FAIL_EVERY)`);
      ctx.emit(outputName, event, { key: event.accountId });
    }
  }
  const decorators = [IdempotentHandler({ topic: inputName, schema: 'com.example.PaymentRequested' })];
  if (lanes !== undefined) decorators.push(OrderedEvent({ lanes }));
  Reflect.decorate(decorators, CopyHandler.prototype, 'onPayment', Object.getOwnPropertyDescriptor(CopyHandler.prototype, 'onPayment'));
  Reflect.decorate([Injectable()], CopyHandler);

  class BenchModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          TypeOrmModule.forRoot({ type: 'postgres', url: env.databaseUrl }),
          KafkaExactlyOnceModule.forRoot({
            kafka: { clientId: 'bench-library-copy', brokers: env.brokers },
            // EX: the platformatic driver.
            driver: process.env.KAFKA_CLIENT || 'kafkajs',
            groupId: env.group,
            transactionalIdPrefix: env.group,
            schemas: { directory: join(__dirname, '../../schemas') },
            topicPrefix: env.prefix,
            topics: { [outputName]: { schema: 'com.example.PaymentRequested' } },
            // The bench's --tail-steps: each committed unit's step times to this file.
            ...(process.env.BENCH_STEP_LOG ? { operations: { stepLog: process.env.BENCH_STEP_LOG } } : {}),
            // For experiments only (the bench runs E with the defaults): BENCH_E_OPTIONS='{"chunk":{"maxRecords":500}}'
            ...JSON.parse(process.env.BENCH_E_OPTIONS || '{}'),
          }),
        ],
        providers: [CopyHandler],
      }),
    ],
    BenchModule,
  );

  const app = await NestFactory.createApplicationContext(BenchModule, { logger: failEvery > 0 ? ['error'] : ['error', 'warn'] });
  onStop(async () => {
    await app.close();
    if (process.env.BENCH_CALLS_FILE) writeFileSync(process.env.BENCH_CALLS_FILE, JSON.stringify({ calls: [...calls], failing: [...calls.keys()].filter(failing) }));
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
