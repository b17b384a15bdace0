import { Kafka } from 'kafkajs';
import { createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { processSuite } from './support/suite';
import { checkPaymentInvariants, generatePayments, groupLag, publishPayments, waitForGroupCaughtUp, waitUntil } from './support/payments';

/** Waits until the group's lag is at most `below`, and returns it. */
async function waitForProgress(kafka: Kafka, groupId: string, topic: string, below: bigint): Promise<bigint> {
  let lag = 0n;
  await waitUntil(async () => (lag = await groupLag(kafka, groupId, topic)) <= below, 120000, `lag <= ${below}`);
  return lag;
}

/** Scaling consumer-app 1 → 3 → 1 during a run moves partitions twice; nothing may be lost, doubled or reordered. */
describe('consumer-app: rebalance', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('keeps the invariants while scaling 1 → 3 → 1, with a graceful stop and a crash', async () => {
    const scope = await createConsumerAppScope('rebalance');
    const topic = scope.topic('payments.requested');
    const first = await startConsumerApp(processes, scope);
    const published = await publishPayments(kafka, topic, generatePayments(6000, 120, 6));
    let lag = await waitForProgress(kafka, scope.groupId, topic, 5600n);

    // 1 → 3
    const second = await startConsumerApp(processes, scope);
    const third = await startConsumerApp(processes, scope);
    lag = await waitForProgress(kafka, scope.groupId, topic, lag - 600n);

    // 3 → 1: one leaves gracefully (SIGTERM: finish the chunk, commit, leave the group), one crashes.
    await second.stop();
    expect(second.logs()).toMatch(/consumer stopped: in-flight work committed or rolled back[\s\S]*disconnected from Kafka/);
    await third.kill();
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 180000);
    expect(first.running).toBe(true);

    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
    expect(summary).toMatchObject({ ledgerRows: 6000, outputs: 6000 });
    expect(second.logs()).toMatch(/assigned [^\n]*\bpayments\.requested\[/);
    expect(third.logs()).toMatch(/assigned [^\n]*\bpayments\.requested\[/);
  });
});
