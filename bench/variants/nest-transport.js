'use strict';
/**
 * Variant B: what a NestJS team writes today. An ordinary NestJS microservice on the stock @nestjs/microservices
 * Kafka transport (Transport.KAFKA, an @EventPattern handler), applying consumer-app's ledger rule in PostgreSQL:
 * one PostgreSQL transaction per event (pg Pool), then the outcome (PaymentProcessed, Avro single-object
 * encoding, keyed by accountId) published with a ClientKafka from ClientsModule.
 *
 * Guarantees: at-least-once. The transport's KafkaJS consumer commits an offset (autoCommit, after each batch)
 * only after the handler resolved, i.e. after the PostgreSQL commit and the output's acknowledgement. A crash
 * (or a rebalance, or a handler error: KafkaJS retries, then restarts the consumer) between the PostgreSQL commit
 * and the offset commit redelivers the event. The ledger's payment_id check makes the redelivery a no-op for the
 * balance; the handler then publishes the outcome the ledger holds again (merely skipping, as consumer-app's
 * exactly-once handler may, would lose the outcome of a crash between the PostgreSQL commit and the publish). So
 * no outcome is lost, but one may be on the output twice or more (also when KafkaJS's non-idempotent producer
 * retries a send that was in fact written); the same goes for a payment republished under another message id.
 * Nothing is transactional across Kafka and PostgreSQL. A handler error (Nest's RpcExceptionsHandler logs it and
 * hands KafkaJS only {status: 'error', message: 'Internal server error'}) blocks its partition: KafkaJS retries
 * and restarts the consumer on that offset until the handler succeeds; an undecodable record is a poison pill
 * (the stock transport has no dead-letter topic).
 *
 * Nest/KafkaJS defaults kept: `partitionsConsumedConcurrently` 1 (KafkaJS's default; Nest sets none), so one
 * event at a time per process, in offset order per partition; autoCommit on with KafkaJS's default interval and
 * threshold (none: it commits after every fetched batch); heartbeats, session timeout, retry/restart-on-failure
 * of KafkaJS; the default serializer (a Buffer value and a string key go out as they are); the producer as
 * KafkaJS makes it (not idempotent, acks -1, default murmur2 partitioner); Nest's default logger (KafkaJS logs
 * through it). Changed, and why:
 *   - `postfixId: ''` on the server: otherwise Nest appends "-server" to the groupId (and clientId), and the
 *     group whose offsets are committed would not be BENCH_GROUP.
 *   - `parser: { keepBinary: true }`: the default parser turns every value into a string (or JSON), which
 *     mangles Avro bytes that do not start with 0x00 (single-object encoding starts with C3 01).
 *   - `subscribe: { fromBeginning: true }`: the input is preloaded before the app starts.
 *   - the ClientKafka in `producerOnlyMode`: it only emits; without it, it would also start a consumer in group
 *     "<groupId>-client" ("nestjs-group-client" when none is given) to wait for replies that never come.
 */
require('reflect-metadata');
const { readFileSync } = require('fs');
const { join } = require('path');
const avro = require('avsc');
const { Pool } = require('pg');
const { lastValueFrom } = require('rxjs');
const { Controller, Inject, Injectable, Logger, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { ClientKafka, ClientsModule, Ctx, EventPattern, KafkaContext, Payload, Transport } = require('@nestjs/microservices');
const { benchEnv, onStop } = require('./common');

// What tsc emits for parameter decorators and decorator metadata (emitDecoratorMetadata).
const param = (index, decorator) => (target, key) => decorator(target, key, index);
const metadata = (key, value) => Reflect.metadata(key, value);

// --- Avro single-object encoding: C3 01, the schema's CRC-64-AVRO fingerprint (8 bytes LE), the binary body.
const SCHEMAS = join(__dirname, '../../schemas');
const MAGIC = Buffer.from([0xc3, 0x01]);
const RABIN_EMPTY = 0xc15d213aa4d7a795n;
const RABIN_TABLE = Array.from({ length: 256 }, (_, i) => {
  let fp = BigInt(i);
  for (let j = 0; j < 8; j++) fp = (fp >> 1n) ^ (RABIN_EMPTY & -(fp & 1n));
  return fp;
});
function avroSchema(file) {
  const type = avro.Type.forSchema(JSON.parse(readFileSync(join(SCHEMAS, file), 'utf8')));
  let fp = RABIN_EMPTY;
  for (const byte of Buffer.from(JSON.stringify(type.getSchema()), 'utf8')) fp = (fp >> 8n) ^ RABIN_TABLE[Number((fp ^ BigInt(byte)) & 0xffn)];
  const fingerprint = Buffer.alloc(8);
  fingerprint.writeBigUInt64LE(fp);
  return {
    type,
    encode: (value) => Buffer.concat([MAGIC, fingerprint, type.toBuffer(value)]),
    decode: (bytes) => {
      if (!Buffer.isBuffer(bytes) || bytes.length < 10 || !bytes.subarray(0, 2).equals(MAGIC) || !bytes.subarray(2, 10).equals(fingerprint)) {
        throw new Error(`not a single-object encoded ${type.name}`);
      }
      return type.fromBuffer(bytes.subarray(10));
    },
  };
}
const PaymentRequested = avroSchema('payment-requested.v1.avsc');
const PaymentProcessed = avroSchema('payment-processed.v1.avsc');

const PAYMENTS_OUT = 'PAYMENTS_OUT';

function buildAppModule(env) {
  // --- The database: a pg Pool, the tables created at start, one transaction per unit of work.
  class Database {
    constructor() {
      this.pool = new Pool({ connectionString: env.databaseUrl });
    }

    async onModuleInit() {
      await this.pool.query(`
        CREATE TABLE IF NOT EXISTS accounts (account_id text PRIMARY KEY, balance_cents bigint NOT NULL);
        CREATE TABLE IF NOT EXISTS ledger (payment_id text PRIMARY KEY, account_id text NOT NULL, amount_cents bigint NOT NULL,
          status text NOT NULL, balance_after_cents bigint NOT NULL, processed_at timestamptz NOT NULL)`);
    }

    async transaction(work) {
      const client = await this.pool.connect();
      try {
        await client.query('BEGIN');
        const result = await work(client);
        await client.query('COMMIT');
        client.release();
        return result;
      } catch (err) {
        await client.query('ROLLBACK').then(
          () => client.release(),
          (rollbackErr) => client.release(rollbackErr),
        );
        throw err;
      }
    }

    async onApplicationShutdown() {
      await this.pool.end();
    }
  }
  Reflect.decorate([Injectable()], Database);

  // --- The ledger rule of consumer-app's PaymentsHandler, then the outcome published.
  class PaymentsService {
    constructor(db, client) {
      this.db = db;
      this.client = client;
      this.logger = new Logger(PaymentsService.name);
    }

    async onModuleInit() {
      await this.client.connect();
    }

    async apply(event) {
      const outcome = await this.db.transaction(async (tx) => {
        // Same payment again (a redelivery, or republished under another message id): a no-op for the balance, but
        // its outcome is published again, as the first delivery may have stopped between the commit and the publish.
        const seen = await tx.query('SELECT account_id, amount_cents, status, balance_after_cents FROM ledger WHERE payment_id = $1', [event.paymentId]);
        if (seen.rowCount > 0) {
          const [row] = seen.rows;
          this.logger.warn(`payment ${event.paymentId} is already in the ledger; publishing its outcome again`);
          return { paymentId: event.paymentId, accountId: row.account_id, amountCents: BigInt(row.amount_cents), status: row.status, balanceAfterCents: BigInt(row.balance_after_cents) };
        }
        // Creates the account when it is new and locks its row either way, returning the balance to judge against.
        const { rows } = await tx.query(
          'INSERT INTO accounts (account_id, balance_cents) VALUES ($1, 0) ON CONFLICT (account_id) DO UPDATE SET account_id = EXCLUDED.account_id RETURNING balance_cents',
          [event.accountId],
        );
        const balance = BigInt(rows[0].balance_cents);
        const amount = BigInt(event.amountCents);
        const candidate = balance + amount;
        const accepted = candidate >= 0n;
        if (accepted) await tx.query('UPDATE accounts SET balance_cents = $2 WHERE account_id = $1', [event.accountId, candidate.toString()]);
        const result = {
          paymentId: event.paymentId,
          accountId: event.accountId,
          amountCents: amount,
          status: accepted ? 'ACCEPTED' : 'REJECTED_INSUFFICIENT_FUNDS',
          balanceAfterCents: accepted ? candidate : balance,
        };
        await tx.query('INSERT INTO ledger (payment_id, account_id, amount_cents, status, balance_after_cents, processed_at) VALUES ($1, $2, $3, $4, $5, now())', [
          result.paymentId,
          result.accountId,
          result.amountCents.toString(),
          result.status,
          result.balanceAfterCents.toString(),
        ]);
        return result;
      });
      // After the commit: a crash from here to the offset commit redelivers, and the outcome is published again.
      const value = PaymentProcessed.encode({ ...outcome, amountCents: Number(outcome.amountCents), balanceAfterCents: Number(outcome.balanceAfterCents) });
      await lastValueFrom(this.client.emit(env.output, { key: outcome.accountId, value }));
    }
  }
  Reflect.decorate([Injectable(), param(0, Inject(Database)), param(1, Inject(PAYMENTS_OUT)), metadata('design:paramtypes', [Database, ClientKafka])], PaymentsService);

  // --- The controller: the topic is known only at run time, so the class is decorated here.
  class PaymentsController {
    constructor(payments) {
      this.payments = payments;
    }

    async onPaymentRequested(value, context) {
      void context; // KafkaContext: topic, partition, offset are there if needed (logging, tracing)
      await this.payments.apply(PaymentRequested.decode(value));
    }
  }
  Reflect.decorate(
    [
      EventPattern(env.input),
      param(0, Payload()),
      param(1, Ctx()),
      metadata('design:type', Function),
      metadata('design:paramtypes', [Buffer, KafkaContext]),
      metadata('design:returntype', Promise),
    ],
    PaymentsController.prototype,
    'onPaymentRequested',
    Object.getOwnPropertyDescriptor(PaymentsController.prototype, 'onPaymentRequested'),
  );
  Reflect.decorate([Controller(), param(0, Inject(PaymentsService)), metadata('design:paramtypes', [PaymentsService])], PaymentsController);

  class AppModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          ClientsModule.register([
            {
              name: PAYMENTS_OUT,
              transport: Transport.KAFKA,
              options: { client: { clientId: 'bench-nest-transport', brokers: env.brokers }, producerOnlyMode: true },
            },
          ]),
        ],
        controllers: [PaymentsController],
        providers: [Database, PaymentsService],
      }),
    ],
    AppModule,
  );
  return AppModule;
}

async function main() {
  const env = benchEnv();
  const app = await NestFactory.createMicroservice(buildAppModule(env), {
    transport: Transport.KAFKA,
    options: {
      client: { clientId: 'bench-nest-transport', brokers: env.brokers },
      consumer: { groupId: env.group },
      postfixId: '',
      subscribe: { fromBeginning: true },
      parser: { keepBinary: true },
      // The stock default, spelled out (Nest sets none; KafkaJS's is 1): one event at a time per process.
      run: { partitionsConsumedConcurrently: 1 },
    },
  });
  onStop(() => app.close());
  await app.listen();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
