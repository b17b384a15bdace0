'use strict';
/**
 * Variant E: the library with a trivial handler (`ctx.emit` of the input to the output topic), default
 * settings. Exactly-once: inbox claim, Kafka transaction with the offsets, PostgreSQL commit.
 *
 * Variants K1 and K: the same copy after a lookup of BENCH_LOOKUP_MS per event (a timer), under @OrderedEvent by
 * the record key with BENCH_LANES key lanes.
 */
require('reflect-metadata');
const { join } = require('path');
const { Injectable, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { TypeOrmModule } = require('@nestjs/typeorm');
const { IdempotentHandler, KafkaExactlyOnceModule, OrderedEvent } = require('../../dist/libs/kafka-exactly-once');
const { benchEnv, onStop } = require('./common');

async function main() {
  const env = benchEnv();
  const inputName = env.input.slice(env.prefix.length);
  const outputName = env.output.slice(env.prefix.length);

  const lookupMs = Number(process.env.BENCH_LOOKUP_MS || 0);
  const lanes = process.env.BENCH_LANES ? Number(process.env.BENCH_LANES) : undefined;
  class CopyHandler {
    async onPayment(event, ctx) {
      if (lookupMs > 0) await new Promise((r) => setTimeout(r, lookupMs));
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
            groupId: env.group,
            transactionalIdPrefix: env.group,
            schemas: { directory: join(__dirname, '../../schemas') },
            topicPrefix: env.prefix,
            topics: { [outputName]: { schema: 'com.example.PaymentRequested' } },
            // For experiments only (the bench runs E with the defaults): BENCH_E_OPTIONS='{"chunk":{"maxRecords":500}}'
            ...JSON.parse(process.env.BENCH_E_OPTIONS || '{}'),
          }),
        ],
        providers: [CopyHandler],
      }),
    ],
    BenchModule,
  );

  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
  onStop(() => app.close());
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
