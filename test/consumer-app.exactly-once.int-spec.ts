import { Kafka } from 'kafkajs';
import { Client } from 'pg';
import { UNIT_OF_WORK_FAULT_POINTS } from 'kafka-exactly-once/testing';
import { consumerAppPort, createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { processSuite } from './support/suite';
import { checkPaymentInvariants, generatePayments, publishPayments, republish, waitForGroupCaughtUp } from './support/payments';

/**
 * consumer-app as a real process against the real broker and PostgreSQL: duplicate publishes and a crash at
 * each commit point of the unit of work (docs/protocol.md) must leave exactly one effect per payment.
 */
describe('consumer-app: exactly-once effects', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('handles a message id published 3 times once: one ledger row and one PaymentProcessed', async () => {
    const scope = await createConsumerAppScope('dup');
    const app = await startConsumerApp(processes, scope);
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
  });

  describe.each(UNIT_OF_WORK_FAULT_POINTS)('crash at %s', (point) => {
    it('recovers after a restart with exactly one effect per payment and balances equal to the in-order fold', async () => {
      const scope = await createConsumerAppScope(`fault-${point}`);
      const crashing = await startConsumerApp(processes, scope, { KAFKA_EO_FAULT: `${point}:3` });
      const topic = scope.topic('payments.requested');
      const published = await publishPayments(kafka, topic, generatePayments(400, 25, 2));

      expect(await crashing.waitForExit(60000)).toBeNull(); // killed by the signal, not exited
      expect(crashing.logs()).toContain(`fault injection: SIGKILL at ${point} #3`);

      const restarted = await startConsumerApp(processes, scope);
      await waitForGroupCaughtUp(kafka, scope.groupId, topic);
      const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
      expect(summary.ledgerRows).toBe(400);
      expect(summary.rejected).toBeGreaterThan(0); // the workload exercises both outcomes

      if (point !== 'mid-chunk') {
        // PostgreSQL had committed the crashed chunk: its outputs were re-sent from the inbox, not re-handled.
        expect(restarted.logs()).toMatch(/[1-9]\d* replayed from the inbox/);
      }
      await restarted.stop();
    });
  });
});
