import { Kafka } from 'kafkajs';
import { Client } from 'pg';
import { UNIT_OF_WORK_FAULT_POINTS } from 'kafka-exactly-once/testing';
import { consumerAppPort, createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import type { AppProcess, ProcessGroup } from './support/processes';
import { processSuite } from './support/suite';
import { checkPaymentInvariants, generatePayments, groupLag, publishPayments, republish, waitForGroupCaughtUp } from './support/payments';
import { readTopic } from './support/kafka';

/** How consumer-app handles payments.requested: its @IdempotentHandler, or an @EventPattern handler under KafkaExactlyOnceServer. */
const TRANSPORTS = [
  { transport: 'module', env: {} },
  { transport: 'microservice', env: { CONSUMER_APP_TRANSPORT: 'microservice' } },
] as const;

/** What consumer-app's handlers write through besides TypeORM (DATA_LAYER): the payments' ledger in that ORM only. */
const DATA_LAYERS = ['prisma', 'drizzle', 'kysely'] as const;

/**
 * A message id published 3 times is handled once: one ledger row and one PaymentProcessed per payment, one inbox
 * row per message id. `label` names the scope; `env` is consumer-app's (transport, data layer).
 */
async function duplicatesHandledOnce(processes: ProcessGroup, kafka: Kafka, label: string, env: Record<string, string>, options: { handlerCalls?: boolean } = {}): Promise<AppProcess> {
  const scope = await createConsumerAppScope(`dup-${label}`);
  const app = await startConsumerApp(processes, scope, env);
  const port = consumerAppPort(app);
  const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as { details: { kafka: { assignment: Record<string, number[]> } } };
  expect(health).toMatchObject({
    status: 'ok',
    details: { kafka: { status: 'up', consumer: 'running', brokers: 1 }, database: { status: 'up' } },
  });
  expect(health.details.kafka.assignment[scope.topic('payments.requested')]).toEqual([0, 1, 2, 3, 4, 5]);
  const topic = scope.topic('payments.requested');
  // Adjacent copies (same chunk) of every payment, then the whole list again twice (later chunks).
  const published = await publishPayments(kafka, topic, generatePayments(40, 8, 1), { duplicates: (i) => (i % 4 === 0 ? 2 : 0) });
  await republish(kafka, topic, published);
  await republish(kafka, topic, published);
  await waitForGroupCaughtUp(kafka, scope.groupId, topic);

  const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
  expect(summary).toMatchObject({ ledgerRows: 40, outputs: 40 });

  const db = new Client({ connectionString: scope.databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query(`SELECT count(*)::int AS n, count(DISTINCT message_id)::int AS ids FROM kafka_eo_inbox WHERE topic = $1`, [topic]);
    expect(rows[0]).toEqual({ n: 40, ids: 40 });
  } finally {
    await db.end();
  }
  if (options.handlerCalls) {
    // The interceptor around the @EventPattern handler counted one call per payment: duplicates never reach it.
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/^consumer_app_payment_handler_calls_total 40$/m);
  }
  return app;
}

/** SIGKILL at `point` of the third unit of work, then a restart: one effect per payment, balances the in-order fold. */
async function recoversAfterCrash(processes: ProcessGroup, kafka: Kafka, label: string, env: Record<string, string>, point: (typeof UNIT_OF_WORK_FAULT_POINTS)[number]): Promise<void> {
  const scope = await createConsumerAppScope(`fault-${point}-${label}`);
  const crashing = await startConsumerApp(processes, scope, { ...env, KAFKA_EO_FAULT: `${point}:3` });
  const topic = scope.topic('payments.requested');
  const published = await publishPayments(kafka, topic, generatePayments(400, 25, 2));

  expect(await crashing.waitForExit(60000)).toBeNull(); // killed by the signal, not exited
  expect(crashing.logs()).toContain(`fault injection: SIGKILL at ${point} #3`);

  const restarted = await startConsumerApp(processes, scope, env);
  await waitForGroupCaughtUp(kafka, scope.groupId, topic);
  const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
  expect(summary.ledgerRows).toBe(400);
  expect(summary.rejected).toBeGreaterThan(0); // the workload exercises both outcomes

  if (point !== 'mid-chunk') {
    // PostgreSQL had committed the crashed chunk: its outputs were re-sent from the inbox, not re-handled.
    expect(restarted.logs()).toMatch(/[1-9]\d* replayed from the inbox/);
  }
  await restarted.stop();
}

/**
 * consumer-app as a real process against the real broker and PostgreSQL: duplicate publishes and a crash at
 * each commit point of the unit of work (docs/protocol.md) must leave exactly one effect per payment. Twice:
 * with payments handled by an @IdempotentHandler, and by an @EventPattern handler of a hybrid application
 * under KafkaExactlyOnceServer (the same harness and checks).
 */
describe.each(TRANSPORTS)('consumer-app: exactly-once effects, payments through the $transport', ({ transport, env }) => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('handles a message id published 3 times once: one ledger row and one PaymentProcessed', async () => {
    await duplicatesHandledOnce(processes, kafka, transport, env, { handlerCalls: transport === 'microservice' });
  });

  describe.each(UNIT_OF_WORK_FAULT_POINTS)('crash at %s', (point) => {
    it('recovers after a restart with exactly one effect per payment and balances equal to the in-order fold', async () => {
      await recoversAfterCrash(processes, kafka, transport, env, point);
    });
  });
});

/**
 * The same with consumer-app's handlers writing through Prisma, Drizzle or Kysely (DATA_LAYER, the module's
 * `database` option; `ctx.db` only): the duplicates, and a SIGKILL between the PostgreSQL and the Kafka commit,
 * whose recovery re-sends the outputs the ORM's committed writes recorded. The verify matrix runs the rest of the
 * faults for each layer (npm run verify -- --data-layer LAYER, docs/verification.md).
 */
describe.each(DATA_LAYERS)('consumer-app: exactly-once effects, handlers writing through %s (DATA_LAYER)', (layer) => {
  const { processes, kafka: client } = processSuite();
  const env = { DATA_LAYER: layer };
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('handles a message id published 3 times once: one ledger row and one PaymentProcessed', async () => {
    const app = await duplicatesHandledOnce(processes, kafka, layer, env);
    expect(app.logs()).toContain(`data layer: ${layer} (DATA_LAYER)`);
  });

  it('recovers from a crash after the PostgreSQL commit with exactly one effect per payment and balances equal to the in-order fold', async () => {
    await recoversAfterCrash(processes, kafka, layer, env, 'after-db-commit');
  });
});

/**
 * consumer-app as a hybrid application (HTTP and KafkaExactlyOnceServer): a guard's refusal is dead-lettered
 * with its reason and parks the account, and SIGTERM stops it cleanly.
 */
describe('consumer-app: payments through KafkaExactlyOnceServer in a hybrid application', () => {
  const { processes, kafka: client } = processSuite();
  const env = { CONSUMER_APP_TRANSPORT: 'microservice' };
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('dead-letters the payments its guard refuses, with the guard\'s reason, and parks the frozen account; the others flow', async () => {
    const scope = await createConsumerAppScope('guard');
    const app = await startConsumerApp(processes, scope, env);
    const topic = scope.topic('payments.requested');
    const frozen = generatePayments(3, 1, 7).map((p) => ({ ...p, accountId: 'frozen-1' }));
    const frozenPublished = await publishPayments(kafka, topic, frozen);
    const published = await publishPayments(kafka, topic, generatePayments(60, 6, 8));
    await waitForGroupCaughtUp(kafka, scope.groupId, topic);
    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
    expect(summary).toMatchObject({ ledgerRows: 60, outputs: 60 });

    const letters = await readTopic(kafka, `${topic}.dlq`, { until: (rs) => rs.length >= 3, timeoutMs: 30000, pollIdleMs: 2000 });
    expect(letters.map((l) => l.headers['message-id'])).toEqual(frozenPublished.map((p) => p.messageId));
    expect(letters[0].headers).toMatchObject({
      'dlq-reason': 'handler-failed',
      'dlq-error-class': 'ForbiddenException',
      'dlq-error-message': 'account frozen-1 is frozen: payments to it are refused',
      'dlq-attempts': '1', // a guard's refusal is not retried
    });
    expect(letters.slice(1).map((l) => l.headers['dlq-reason'])).toEqual(['key-parked', 'key-parked']);
    const health = (await (await fetch(`http://127.0.0.1:${consumerAppPort(app)}/health`)).json()) as { details: { inbox: { parkedKeys?: number } } };
    expect(JSON.stringify(health)).toContain('frozen-1');
    await app.stop();
  });

  it('stops cleanly on SIGTERM mid-stream (in-flight work settled, PostgreSQL and Kafka agree) and a restart re-handles nothing', async () => {
    const scope = await createConsumerAppScope('sigterm');
    const first = await startConsumerApp(processes, scope, env);
    const topic = scope.topic('payments.requested');
    const published = await publishPayments(kafka, topic, generatePayments(1500, 30, 9));
    const db = new Client({ connectionString: scope.databaseUrl });
    await db.connect();
    try {
      const count = async (sql: string, params: unknown[] = []) => (await db.query(sql, params)).rows[0].n as number;
      const deadline = Date.now() + 60000;
      while ((await count('SELECT count(*)::int AS n FROM ledger_entries')) < 150) {
        if (Date.now() > deadline) throw new Error('consumer-app did not apply 150 payments within 60 s');
        await new Promise((r) => setTimeout(r, 100));
      }
      // Nest's shutdown hooks settle the unit of work in flight, disconnect, then re-raise SIGTERM.
      await first.stop(30000);
      expect(first.running).toBe(false);
      expect(first.logs()).toMatch(/consumer stopped: in-flight work committed or rolled back/);
      // Whatever was handled is committed in both stores: every claimed record's offset is committed, no more.
      const handled = await count('SELECT count(*)::int AS n FROM kafka_eo_inbox WHERE topic = $1', [topic]);
      expect(handled).toBeLessThan(1500); // stopped mid-stream
      expect(await groupLag(kafka, scope.groupId, topic)).toBe(BigInt(1500 - handled));
    } finally {
      await db.end();
    }
    const restarted = await startConsumerApp(processes, scope, env);
    await waitForGroupCaughtUp(kafka, scope.groupId, topic);
    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
    expect(summary).toMatchObject({ ledgerRows: 1500, outputs: 1500 });
    expect(restarted.logs()).not.toMatch(/[1-9]\d* replayed from the inbox/);
    await restarted.stop(30000);
    expect(restarted.logs()).toMatch(/consumer stopped: in-flight work committed or rolled back/);
  });
});
