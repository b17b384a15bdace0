import { Kafka } from 'kafkajs';
import { Client } from 'pg';
import { consumerAppPort, createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { AppProcess } from './support/processes';
import { processSuite } from './support/suite';
import { generatePayments, publishPayments, waitForGroupCaughtUp, waitUntil } from './support/payments';

interface Health {
  status: number;
  body: {
    status: string;
    error?: { kafka?: { message?: string } };
    details: { kafka: { partitions: Array<{ topic: string; partition: number; stalled: boolean; lag: number | null; lastError: { message: string; kind: string } | null }> } };
  };
}

async function health(app: AppProcess): Promise<Health> {
  const response = await fetch(`http://127.0.0.1:${consumerAppPort(app)}/health`);
  return { status: response.status, body: (await response.json()) as Health['body'] };
}

/**
 * Two consumer-app instances share six partitions. The test holds a row lock on one account, so the partition
 * of that account cannot commit (each attempt ends in lock_timeout, an infrastructure fault retried without
 * end): the instance that owns it reports 503 naming the partition and the lock timeout, the other partitions
 * keep committing, and health comes back once the lock is released.
 */
describe('consumer-app: a stalled partition shows in /health', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('turns /health down for the stalled partition only, names it, and recovers', async () => {
    const scope = await createConsumerAppScope('stall');
    const env = { KAFKA_STALL_AFTER_MS: '6000', INBOX_LOCK_TIMEOUT_MS: '500' };
    // Both at the same moment on fresh topics: each may find the topics it creates not served yet, or created by
    // the other; neither may exit for it.
    const apps = await Promise.all([startConsumerApp(processes, scope, env), startConsumerApp(processes, scope, env)]);
    const topic = scope.topic('payments.requested');
    const warmUp = await publishPayments(kafka, topic, generatePayments(60, 12, 5));
    await waitForGroupCaughtUp(kafka, scope.groupId, topic);

    const stuckAccount = warmUp[0].payment.accountId;
    const lock = new Client({ connectionString: scope.databaseUrl });
    await lock.connect();
    let locked = true;
    try {
      await lock.query('BEGIN');
      await lock.query('SELECT * FROM accounts WHERE account_id = $1 FOR UPDATE', [stuckAccount]);
      const stuckPayments = generatePayments(5, 1, 6).map((p) => ({ ...p, accountId: stuckAccount }));
      const others = generatePayments(200, 12, 7).filter((p) => p.accountId !== stuckAccount);
      await publishPayments(kafka, topic, [...stuckPayments, ...others]);

      // Down on exactly one instance, naming one partition and the lock timeout.
      let down: Health | undefined;
      await waitUntil(async () => {
        const results = await Promise.all(apps.map(health));
        down = results.find((h) => h.status === 503);
        return down !== undefined;
      }, 60000, 'a 503 from /health');
      const results = await Promise.all(apps.map(health));
      expect(results.map((h) => h.status).sort()).toEqual([200, 503]);
      const stalled = (down as Health).body.details.kafka.partitions.filter((p) => p.stalled);
      expect(stalled).toHaveLength(1);
      expect(stalled[0]).toMatchObject({ topic, lastError: { kind: 'infrastructure' } });
      expect(stalled[0].lastError?.message).toMatch(/lock timeout/);
      expect((down as Health).body.error?.kafka?.message).toMatch(new RegExp(`stalled: .*payments\\.requested\\[${stalled[0].partition}\\].*lock timeout`));

      // The other partitions did not wait: every one of them commits while the lock is held.
      await waitUntil(async () => {
        const admin = kafka.admin();
        await admin.connect();
        try {
          const ends = await admin.fetchTopicOffsets(topic);
          const [committed] = await admin.fetchOffsets({ groupId: scope.groupId, topics: [topic] });
          return ends
            .filter((e) => e.partition !== stalled[0].partition)
            .every((e) => committed.partitions.find((p) => p.partition === e.partition)?.offset === e.high);
        } finally {
          await admin.disconnect();
        }
      }, 60000, 'the other partitions to catch up');
      expect((await Promise.all(apps.map(health))).filter((h) => h.status === 503)).toHaveLength(1);

      await lock.query('COMMIT');
      locked = false;
    } finally {
      if (locked) await lock.query('ROLLBACK').catch(() => undefined);
      await lock.end();
    }
    await waitForGroupCaughtUp(kafka, scope.groupId, topic);
    await waitUntil(async () => (await Promise.all(apps.map(health))).every((h) => h.status === 200), 30000, 'health to come back');
  }, 300000);
});
