import { Kafka } from 'kafkajs';
import { createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { processSuite } from './support/suite';
import { checkPaymentInvariants, generatePayments, groupLag, prng, publishPayments, waitForGroupCaughtUp, waitUntil } from './support/payments';

const PAYMENTS = 20000;
const KILLS = 5;

/**
 * 20,000 payments over 200 accounts while consumer-app is killed with SIGKILL again and again: every payment
 * must still have exactly one ledger row and one PaymentProcessed, balances must equal the in-order fold, and
 * each account's outputs must come in input order.
 */
describe('consumer-app: SIGKILL soak', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('keeps exactly-once effects and per-account order across repeated SIGKILLs', async () => {
    const scope = await createConsumerAppScope('soak');
    const topic = scope.topic('payments.requested');
    let app = await startConsumerApp(processes, scope);
    const published = await publishPayments(kafka, topic, generatePayments(PAYMENTS, 200, 3));

    const random = prng(99);
    const lagAtKill: bigint[] = [];
    let previous = BigInt(published.length);
    for (let kill = 0; kill < KILLS; kill++) {
      // Kill only once the restarted consumer is committing again (400 records since the last kill, or less when
      // fewer are left: a share that leaves work for the kills still to come), at a random moment, so that each
      // kill lands in the middle of the work rather than during start-up. A fixed 400 could never be reached
      // once fewer than 400 were left, as a fast consumer made happen.
      const step = [400n, previous / BigInt(KILLS - kill + 1)].reduce((a, b) => (a < b ? a : b));
      await waitUntil(async () => (await groupLag(kafka, scope.groupId, topic)) <= previous - step, 120000);
      await new Promise((r) => setTimeout(r, Math.floor(random() * 300)));
      await app.kill();
      previous = await groupLag(kafka, scope.groupId, topic);
      lagAtKill.push(previous);
      app = await startConsumerApp(processes, scope);
    }
    // Every kill hit a consumer with work left to do and after progress since the previous one.
    expect(lagAtKill).toHaveLength(KILLS);
    expect(lagAtKill.every((lag) => lag > 0n)).toBe(true);
    expect([...lagAtKill].sort((a, b) => (a > b ? -1 : a < b ? 1 : 0))).toEqual(lagAtKill);

    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 300000);
    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), published);
    expect(summary).toMatchObject({ ledgerRows: PAYMENTS, outputs: PAYMENTS });
    expect(summary.accepted).toBeGreaterThan(0);
    expect(summary.rejected).toBeGreaterThan(0);
    process.stdout.write(`soak: lag at each kill ${lagAtKill.join(', ')}; ${summary.accepted} accepted, ${summary.rejected} rejected\n`);
  }, 600000);
});
