#!/usr/bin/env node
'use strict';
/**
 * Another team's service for the verifier: a real Nest application that writes payments with Nest's stock Kafka
 * client (`ClientsModule.register` with `Transport.KAFKA`, `client.emit(topic, { key, value })`), as plain JSON
 * and without any header: no message id. Each payment has a unique `paymentId`, which is how the verifier
 * finds its effects; every payment whose emit was acknowledged gets a line `<paymentId> nest` in the ack log.
 *
 * One emit at a time, each awaited: an account's payments reach their partition in the order they were
 * acknowledged. An emit that fails (the broker away) is sent again, the same payment, until it is acknowledged:
 * it may then be on the topic twice, which the consumer must apply once (the same paymentId). A share of the
 * payments (NEST_DUPLICATES) is also emitted a second time on purpose.
 *
 * Environment: KAFKA_BROKERS, NEST_TOPIC, NEST_COUNT, NEST_ACCOUNTS, NEST_ACCOUNT_PREFIX, NEST_RATE (per second),
 * NEST_DUPLICATES (0..1), NEST_SEED, NEST_ACK_LOG. Prints `SUMMARY {...}` and exits 0 once all are acknowledged.
 */
require('reflect-metadata');
const { appendFileSync } = require('fs');
const { randomUUID } = require('crypto');
const { Module, Logger } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { ClientsModule, Transport } = require('@nestjs/microservices');
const { lastValueFrom } = require('rxjs');
// mulberry32, as the verifier's own and the load command's: the same seed, the same payments (npm run build made it).
const { prng } = require(require('path').join(__dirname, '..', '..', 'dist/apps/producer-app/apps/producer-app/src/load/prng.js'));

const env = (name, fallback) => process.env[name] ?? fallback;
const PAYMENTS_CLIENT = 'PAYMENTS_CLIENT';

class PaymentsClientModule {}
Module({
  imports: [
    ClientsModule.register([
      {
        name: PAYMENTS_CLIENT,
        transport: Transport.KAFKA,
        options: {
          client: { clientId: 'nest-payments-service', brokers: env('KAFKA_BROKERS', '127.0.0.1:9092').split(',') },
          producerOnlyMode: true,
        },
      },
    ]),
  ],
})(PaymentsClientModule);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const topic = env('NEST_TOPIC');
  const count = Number(env('NEST_COUNT', '1000'));
  const accounts = Number(env('NEST_ACCOUNTS', '40'));
  const prefix = env('NEST_ACCOUNT_PREFIX', 'acc-');
  const rate = Number(env('NEST_RATE', '300'));
  const duplicates = Number(env('NEST_DUPLICATES', '0'));
  const ackLog = env('NEST_ACK_LOG');
  const random = prng(Number(env('NEST_SEED', '1')));
  if (!topic || !ackLog) throw new Error('NEST_TOPIC and NEST_ACK_LOG are required');

  const app = await NestFactory.createApplicationContext(PaymentsClientModule, { logger: ['warn', 'error'] });
  const client = app.get(PAYMENTS_CLIENT);
  await client.connect();

  const plan = [];
  const recent = [];
  for (let i = 0; i < count; i++) {
    const deposit = random() < 0.6;
    const amount = Math.floor(random() * 5000) + 100;
    const payment = { paymentId: randomUUID(), accountId: `${prefix}${Math.floor(random() * accounts)}`, amountCents: deposit ? amount : -amount, requestedAt: new Date().toISOString() };
    plan.push(payment);
    recent.push(payment);
    if (recent.length > 100) recent.shift();
    if (random() < duplicates) plan.push(recent[Math.floor(random() * recent.length)]);
  }

  const started = Date.now();
  let resent = 0;
  for (const [index, payment] of plan.entries()) {
    const due = started + (index * 1000) / rate;
    if (due > Date.now()) await sleep(due - Date.now());
    for (let attempt = 1; ; attempt++) {
      try {
        await lastValueFrom(client.emit(topic, { key: payment.accountId, value: payment }), { defaultValue: undefined });
        break;
      } catch (err) {
        resent++;
        if (attempt === 1 || attempt % 10 === 0) new Logger('nest-producer').warn(`emit of ${payment.paymentId} failed (${err.message}); sending it again`);
        await sleep(Math.min(1000, 100 * attempt));
      }
    }
    appendFileSync(ackLog, `${payment.paymentId} nest\n`);
  }
  process.stdout.write(`SUMMARY ${JSON.stringify({ payments: count, emits: plan.length, resent, seconds: (Date.now() - started) / 1000 })}\n`);
  await app.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`nest-producer: ${err.stack || err.message}\n`);
    process.exit(1);
  },
);
