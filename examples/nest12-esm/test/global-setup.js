// The test runs' shared set-up, for Vitest (`globalSetup`: the function setup returns is its teardown) and Jest
// (`globalSetup` and `globalTeardown`: the default exports of this file and of global-teardown.js). One broker and one database for the
// run, and topics and a consumer group of its own, handed to the test files through the environment (src/config.ts
// reads it). With KAFKA_BROKERS set, startTestKafka starts nothing and uses those brokers.
import { randomBytes } from 'node:crypto';
import { createTestDatabase, startTestKafka } from 'kafka-exactly-once/testing';

const STATE = Symbol.for('example-orders.test-state');

export async function setup() {
  const kafka = await startTestKafka();
  const database = await createTestDatabase().catch(async (err) => {
    await kafka.stop(); // no teardown runs after a failed set-up
    throw err;
  });
  globalThis[STATE] = { kafka, database };
  const run = randomBytes(4).toString('hex');
  Object.assign(process.env, {
    KAFKA_BROKERS: kafka.brokers.join(','),
    DATABASE_URL: database.url,
    ORDERS_TOPIC: `example-orders.${run}.placed`,
    ACCEPTED_TOPIC: `example-orders.${run}.accepted`,
    GROUP_ID: `example-orders.${run}`,
    SPOOL_DIR: `.spool-test-${run}`,
  });
  return teardown;
}

export async function teardown() {
  const state = globalThis[STATE];
  await state?.database.drop();
  await state?.kafka.stop();
}

export default setup;
