'use strict';
/**
 * Variant C: exactly-once written by hand the obvious way, one Kafka transaction and one PostgreSQL
 * transaction per record: claim the message id in an inbox table, apply the ledger rule (a withdrawal only if
 * the balance covers it), write the ledger row, send the outcome and the consumer offset in a Kafka
 * transaction, commit Kafka, then PostgreSQL. One record at a time per process.
 */
const { readFileSync } = require('fs');
const { join } = require('path');
const avro = require('avsc');
const { Client } = require('pg');
const { Kafka, logLevel } = require('kafkajs');
const { benchEnv, onStop } = require('./common');

const SCHEMAS = join(__dirname, '../../schemas');
const requested = avro.Type.forSchema(JSON.parse(readFileSync(join(SCHEMAS, 'payment-requested.v1.avsc'), 'utf8')));

async function main() {
  const env = benchEnv();
  const db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
  await db.query(`CREATE TABLE IF NOT EXISTS inbox (message_id text PRIMARY KEY);
    CREATE TABLE IF NOT EXISTS accounts (account_id text PRIMARY KEY, balance_cents bigint NOT NULL);
    CREATE TABLE IF NOT EXISTS ledger (payment_id text PRIMARY KEY, account_id text NOT NULL, amount_cents bigint NOT NULL, accepted boolean NOT NULL, balance_after_cents bigint NOT NULL)`);

  const kafka = new Kafka({ clientId: 'bench-hand-eos', brokers: env.brokers, logLevel: logLevel.ERROR });
  const producer = kafka.producer({ transactionalId: `${env.group}.txn`, idempotent: true, maxInFlightRequests: 1 });
  const consumer = kafka.consumer({ groupId: env.group, readUncommitted: false, allowAutoTopicCreation: false });
  await Promise.all([producer.connect(), consumer.connect()]);
  await consumer.subscribe({ topic: env.input, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      const messageId = message.headers?.['message-id']?.toString() ?? `${topic}/${partition}/${message.offset}`;
      // Single-object encoding: C3 01, an 8-byte fingerprint, then the Avro body.
      const event = requested.fromBuffer(message.value.subarray(10));
      await db.query('BEGIN');
      try {
        const claimed = await db.query('INSERT INTO inbox (message_id) VALUES ($1) ON CONFLICT DO NOTHING', [messageId]);
        const messages = [];
        if (claimed.rowCount === 1) {
          await db.query('INSERT INTO accounts (account_id, balance_cents) VALUES ($1, 0) ON CONFLICT DO NOTHING', [event.accountId]);
          const { rows } = await db.query('SELECT balance_cents FROM accounts WHERE account_id = $1 FOR UPDATE', [event.accountId]);
          const candidate = BigInt(rows[0].balance_cents) + BigInt(event.amountCents);
          const accepted = candidate >= 0n;
          const balance = accepted ? candidate : BigInt(rows[0].balance_cents);
          if (accepted) await db.query('UPDATE accounts SET balance_cents = $2 WHERE account_id = $1', [event.accountId, balance.toString()]);
          await db.query('INSERT INTO ledger VALUES ($1, $2, $3, $4, $5)', [event.paymentId, event.accountId, String(event.amountCents), accepted, balance.toString()]);
          messages.push({ key: event.accountId, value: JSON.stringify({ paymentId: event.paymentId, accepted, balanceAfterCents: balance.toString() }) });
        }
        const txn = await producer.transaction();
        try {
          if (messages.length) await txn.send({ topic: env.output, messages });
          await txn.sendOffsets({ consumerGroupId: env.group, topics: [{ topic, partitions: [{ partition, offset: (BigInt(message.offset) + 1n).toString() }] }] });
          await txn.commit();
        } catch (err) {
          await txn.abort().catch(() => undefined);
          throw err;
        }
        await db.query('COMMIT');
      } catch (err) {
        await db.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
    },
  });
  onStop(async () => {
    await consumer.disconnect();
    await producer.disconnect();
    await db.end();
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
