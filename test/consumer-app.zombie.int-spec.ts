import { Kafka } from 'kafkajs';
import { createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { processSuite } from './support/suite';
import { checkPaymentInvariants, generatePayments, publishPayments, waitForGroupCaughtUp } from './support/payments';

/**
 * Two consumer-app processes in one group; one freezes itself (SIGSTOP, by the test-only fault switch) inside a
 * unit of work and stays frozen past its session timeout, so the other takes its partitions. When it wakes up
 * (SIGCONT) it is a zombie: its late Kafka commit must be fenced, its stalled database transaction must not
 * have blocked the new owner for good, and every invariant must hold.
 */
describe('consumer-app: stalled zombie', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('fences the late commit of a member frozen after its PostgreSQL commit', async () => {
    const scope = await createConsumerAppScope('zombie-commit');
    const topic = scope.topic('payments.requested');
    const zombie = await startConsumerApp(processes, scope, { KAFKA_EO_FAULT: 'before-kafka-commit:2:stop' });
    const survivor = await startConsumerApp(processes, scope);
    const published = await publishPayments(kafka, topic, generatePayments(3000, 60, 4));

    await zombie.waitForLog(/fault injection: SIGSTOP at before-kafka-commit #2/, 60000);
    // Past the 6 s session timeout the survivor owns every partition and replays the zombie's recorded outputs.
    const mark = survivor.logs().length;
    await survivor.waitForLog(/assigned [^\n]*\bpayments\.requested\[0,1,2,3,4,5\]/, 60000, mark);
    await new Promise((r) => setTimeout(r, 3000));
    zombie.signal('SIGCONT');

    await zombie.waitForLog(/producer fenced, another member owns the partition/, 60000);
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 180000);
    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
    expect(summary).toMatchObject({ ledgerRows: 3000, outputs: 3000 });
    expect(survivor.logs()).toMatch(/[1-9]\d* replayed from the inbox/);
  });

  it('does not let a member frozen mid-chunk, holding row locks, block the new owner', async () => {
    const scope = await createConsumerAppScope('zombie-locks');
    const topic = scope.topic('payments.requested');
    const env = { INBOX_IDLE_IN_TRANSACTION_TIMEOUT_MS: '8000' };
    const zombie = await startConsumerApp(processes, scope, { ...env, KAFKA_EO_FAULT: 'mid-chunk:2:stop' });
    const survivor = await startConsumerApp(processes, scope, env);
    const published = await publishPayments(kafka, topic, generatePayments(3000, 60, 5));

    await zombie.waitForLog(/fault injection: SIGSTOP at mid-chunk #2/, 60000);
    const mark = survivor.logs().length;
    await survivor.waitForLog(/assigned [^\n]*\bpayments\.requested\[0,1,2,3,4,5\]/, 60000, mark);
    // The survivor finishes everything while the zombie is still frozen: PostgreSQL ended the zombie's
    // transaction after the idle timeout, releasing the inbox rows it had claimed.
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 180000);
    zombie.signal('SIGCONT');
    // Awake, the zombie finds its transaction gone and does not commit anything.
    await zombie.waitForLog(/rolled back|fenced|Kafka outcome unknown/, 60000);

    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
    expect(summary).toMatchObject({ ledgerRows: 3000, outputs: 3000 });
  });
});
