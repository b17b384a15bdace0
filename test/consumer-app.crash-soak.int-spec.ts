import { Kafka } from 'kafkajs';
import { createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { processSuite } from './support/suite';
import { checkPaymentInvariants, generatePayments, groupLag, prng, publishPayments, waitForGroupCaughtUp } from './support/payments';

const PAYMENTS = 40000;
const KILLS = 5;

/**
 * 40,000 payments over 200 accounts while consumer-app is killed with SIGKILL again and again: every payment
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
    // Every payment published while no consumer runs (the first start creates the topics and stops): the whole
    // backlog is there for the kills. Published while the consumer ran, on a loaded machine the consumer kept up
    // with the publisher, and the backlog left was smaller than what five restarts take in their first units (a
    // kill then found no work left).
    await (await startConsumerApp(processes, scope)).stop();
    const published = await publishPayments(kafka, topic, generatePayments(PAYMENTS, 200, 3));
    let app = await startConsumerApp(processes, scope);

    const random = prng(99);
    const lagAtKill: bigint[] = [];
    // One admin client kept connected: a probe of the lag takes milliseconds, so a kill follows the progress it
    // waits for closely. With a fresh client per probe (a few hundred ms each) a consumer at thousands of records
    // a second finished the whole backlog between a kill's trigger and the kill.
    const admin = kafka.admin();
    await admin.connect();
    try {
      // A restarted consumer takes every partition at once and commits their first units together, a few thousand
      // records in one step: the backlog must outlast five of those.
      let previous = await groupLag(admin, scope.groupId, topic);
      for (let kill = 0; kill < KILLS; kill++) {
        // Kill only once the restarted consumer is committing again (400 records since the last kill, or less when
        // fewer are left: a share that leaves work for the kills still to come), at a random moment, so that each
        // kill lands in the middle of the work rather than during start-up.
        const step = [400n, previous / BigInt(KILLS - kill + 1)].reduce((a, b) => (a < b ? a : b));
        const deadline = Date.now() + 120000;
        while ((await groupLag(admin, scope.groupId, topic)) > previous - step) {
          if (Date.now() > deadline) throw new Error(`kill ${kill + 1}: the consumer made no progress in 120 s`);
          await new Promise((r) => setTimeout(r, 10));
        }
        await new Promise((r) => setTimeout(r, Math.floor(random() * 150)));
        await app.kill();
        previous = await groupLag(admin, scope.groupId, topic);
        lagAtKill.push(previous);
        app = await startConsumerApp(processes, scope);
      }
    } finally {
      await admin.disconnect();
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
