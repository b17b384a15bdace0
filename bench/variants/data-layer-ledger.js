'use strict';
/**
 * Variants DT, DP, DD and DK: consumer-app's payments handler (D's: a batch handler, `@OrderedEvent` by account,
 * PaymentsLedger's set-based statements) on one data layer each, BENCH_DATA_LAYER = typeorm | prisma | drizzle |
 * kysely. The handler is the same code in every variant: consumer-app's own PaymentsLedger (its build), given
 * consumer-app's TypeORM DemoStore (typeorm.store.ts: raw SQL, each statement one `query(sql, params)`) over the
 * unit's transaction as each data layer runs a raw statement:
 *   typeorm  ctx.manager (TypeORM's EntityManager, as consumer-app does)
 *   prisma   ctx.db.$queryRawUnsafe(sql, ...params) (a PrismaClient, `prismaDatabase`)
 *   drizzle  ctx.db.execute(sql`...`) (a Drizzle node-postgres database, `drizzleDatabase`)
 *   kysely   ctx.db.executeQuery(CompiledQuery.raw(sql, params)) (a Kysely instance, `kyselyDatabase`)
 * So the statements, their parameters and the rows they touch are the same in each: what differs is the data
 * layer (the library's adapter and the ORM's path for a statement), and, for the three that are not TypeORM, the
 * library's own statements (inbox, unit of work) running on node-postgres directly instead of a TypeORM
 * QueryRunner. The ledger's statements are raw SQL in every ORM because they are set-based (unnest, INSERT ...
 * SELECT ... ON CONFLICT ... RETURNING, UPDATE ... FROM): none of the three query builders writes them as such.
 *
 * The module's options are consumer-app's where they bear on the payments (Avro in and out, metrics on, its
 * inbox and session settings, a pool of 40); its tables are made by its own migrations before the module starts.
 */
require('reflect-metadata');
const { join } = require('path');
const Module = require('module');
const { Injectable, Module: NestModule } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { Pool } = require('pg');
const { benchEnv, onStop } = require('./common');

const DIST = join(__dirname, '../../dist');
const LIBRARY = join(DIST, 'libs/kafka-exactly-once');
const APP = join(DIST, 'apps/consumer-app/apps/consumer-app/src');
const library = require(LIBRARY);
const { IdempotentHandler, KafkaExactlyOnceModule, OrderedEvent } = library;

/**
 * consumer-app's build imports the library as its own copy (dist/apps/consumer-app/libs/...): that copy is made
 * the library's build here, so that the ledger and the module are one library, as in consumer-app.
 */
function consumerApp(path) {
  const appLibrary = require.resolve(join(DIST, 'apps/consumer-app/libs/kafka-exactly-once/src'));
  if (!require.cache[appLibrary]) {
    const aliased = new Module(appLibrary, module);
    aliased.filename = appLibrary;
    aliased.exports = library;
    aliased.loaded = true;
    require.cache[appLibrary] = aliased;
  }
  return require(join(APP, path));
}

/** The data layer `kind` over `pool`: the module's `database` option, and the ledger's `query` of a unit. */
function dataLayer(kind, pool, databaseUrl) {
  if (kind === 'typeorm') {
    const { TypeOrmModule } = require('@nestjs/typeorm');
    return {
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 40 } })],
      options: {},
      sql: (ctx) => ctx.manager,
    };
  }
  if (kind === 'prisma') {
    const { prismaDatabase } = require(`${LIBRARY}/prisma`);
    const { PrismaClient } = require('./prisma/generated');
    return {
      imports: [],
      options: { database: prismaDatabase({ pool, client: (settings) => new PrismaClient(settings) }) },
      sql: (ctx) => ({ query: (text, params = []) => ctx.db.$queryRawUnsafe(text, ...params) }),
    };
  }
  if (kind === 'drizzle') {
    const { drizzleDatabase } = require(`${LIBRARY}/drizzle`);
    const { drizzle } = require('drizzle-orm/node-postgres');
    // The library's own: a statement with `$1`... placeholders as a drizzle `sql`, each value one parameter.
    const { drizzleSql: statement } = require(`${LIBRARY}/database/drizzle.database`);
    return {
      imports: [],
      options: { database: drizzleDatabase({ pool, drizzle: (client) => drizzle(client) }) },
      sql: (ctx) => ({ query: async (text, params) => (await ctx.db.execute(statement(text, params))).rows }),
    };
  }
  if (kind === 'kysely') {
    const { kyselyDatabase } = require(`${LIBRARY}/kysely`);
    const { CompiledQuery, Kysely, PostgresDialect } = require('kysely');
    return {
      imports: [],
      options: { database: kyselyDatabase({ pool, kysely: (unitPool) => new Kysely({ dialect: new PostgresDialect({ pool: unitPool }) }) }) },
      sql: (ctx) => ({ query: async (text, params = []) => (await ctx.db.executeQuery(CompiledQuery.raw(text, params))).rows }),
    };
  }
  throw new Error(`BENCH_DATA_LAYER must be typeorm, prisma, drizzle or kysely, got ${JSON.stringify(kind)}`);
}

async function main() {
  const env = benchEnv();
  const kind = process.env.BENCH_DATA_LAYER;
  const inputName = env.input.slice(env.prefix.length);
  const { PaymentsLedger } = consumerApp('payments/payments.ledger');
  const { typeormStore } = consumerApp('data-layer/typeorm.store');
  const { paymentRequested } = consumerApp('payments/payment-requested.dto');
  const { accountOrderingKey } = consumerApp('payments/payments.handler');
  const { DEMO_TOPICS } = consumerApp('topics/demo-topics');
  const { CreateDemoTables1764400100000 } = consumerApp('migrations/1764400100000-create-demo-tables');
  const { CreatePaymentApprovals1764400500000 } = consumerApp('migrations/1764400500000-create-payment-approvals');
  if (inputName !== DEMO_TOPICS.paymentsRequested) throw new Error(`the input must be ${DEMO_TOPICS.paymentsRequested} under the prefix, got ${env.input}`);

  const pool = new Pool({ connectionString: env.databaseUrl, max: 40 });
  // consumer-app's tables, by its own migrations (they only send statements).
  for (const Migration of [CreateDemoTables1764400100000, CreatePaymentApprovals1764400500000]) await new Migration().up({ query: (text, params) => pool.query(text, params).then((r) => r.rows) });

  const layer = dataLayer(kind, pool, env.databaseUrl);
  const ledger = new PaymentsLedger(BigInt(process.env.PAYMENT_APPROVAL_LIMIT_CENTS || '1000000'), 'avro');
  // consumer-app's PaymentsHandler, its ledger given the unit's transaction through this data layer.
  class PaymentsHandler {
    async onPaymentsRequested(events, ctx) {
      await ledger.apply(
        events.map(({ event, ctx: eventCtx }) => ({ event: paymentRequested(event), ctx: eventCtx })),
        typeormStore(layer.sql(ctx)),
      );
    }
  }
  Reflect.decorate(
    [IdempotentHandler({ topic: DEMO_TOPICS.paymentsRequested, schema: 'com.example.PaymentRequested', batch: true }), OrderedEvent({ key: accountOrderingKey })],
    PaymentsHandler.prototype,
    'onPaymentsRequested',
    Object.getOwnPropertyDescriptor(PaymentsHandler.prototype, 'onPaymentsRequested'),
  );
  Reflect.decorate([Injectable()], PaymentsHandler);

  class BenchModule {}
  Reflect.decorate(
    [
      NestModule({
        imports: [
          ...layer.imports,
          KafkaExactlyOnceModule.forRoot({
            kafka: { clientId: `bench-ledger-${kind}`, brokers: env.brokers },
            groupId: env.group,
            transactionalIdPrefix: env.group,
            schemas: { directory: join(__dirname, '../../schemas') },
            topicPrefix: env.prefix,
            topics: { [DEMO_TOPICS.paymentsProcessed]: { schema: 'com.example.PaymentProcessed' } },
            consumer: { sessionTimeout: 30000 },
            inbox: { idleInTransactionTimeoutMs: 30000 },
            metrics: {},
            ...layer.options,
          }),
        ],
        providers: [PaymentsHandler],
      }),
    ],
    BenchModule,
  );

  const app = await NestFactory.createApplicationContext(BenchModule, { logger: ['error', 'warn'] });
  onStop(async () => {
    await app.close();
    await pool.end();
  });
}

module.exports = { dataLayer, consumerApp };

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
