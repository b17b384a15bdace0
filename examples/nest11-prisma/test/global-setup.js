// Jest's global set-up: one broker and one database for the run, and topics and a consumer group of its own,
// handed to the test files through the environment (src/config.ts reads it). With KAFKA_BROKERS set,
// startTestKafka starts nothing and uses those brokers.
const { randomBytes } = require('crypto');
const { createTestDatabase, startTestKafka } = require('kafka-exactly-once/testing');

module.exports = async function setup() {
  const kafka = await startTestKafka();
  const database = await createTestDatabase().catch(async (err) => {
    await kafka.stop(); // no teardown runs after a failed set-up
    throw err;
  });
  globalThis.__exampleOrdersTest = { kafka, database };
  const run = randomBytes(4).toString('hex');
  Object.assign(process.env, {
    KAFKA_BROKERS: kafka.brokers.join(','),
    DATABASE_URL: database.url,
    ORDERS_TOPIC: `example-orders-prisma.${run}.placed`,
    ACCEPTED_TOPIC: `example-orders-prisma.${run}.accepted`,
    GROUP_ID: `example-orders-prisma.${run}`,
    OUTBOX_CHECKPOINT_TOPIC: `example-orders-prisma.${run}.outbox-checkpoints`,
    SPOOL_DIR: `.spool-test-${run}`,
  });
};
