import { randomUUID } from 'crypto';
import { appendFileSync, readdirSync } from 'fs';
import { join } from 'path';
import { Kafka } from 'kafkajs';
import { kafkaControl } from './support/broker';
import { createTopics, uniqueTopic } from './support/kafka';
import { processSuite } from './support/suite';
import { getJson, newSpoolDirectory, postJson, startProducerApp } from './support/producer-app';
import { Acknowledged, expectDeliveredInOrder, waitForEmptySpool } from './support/published';

async function postPayments(baseUrl: string, accounts: string[], count: number, into: Acknowledged[]): Promise<string[]> {
  const statuses: string[] = [];
  for (let i = 0; i < count; i++) {
    const accountId = accounts[i % accounts.length];
    const res = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId, amountCents: 100 + i }, { 'Idempotency-Key': randomUUID() });
    expect(res.status).toBe(202);
    expect(res.body.messageId).toMatch(/^idem-[0-9a-f]{40}$/);
    into.push({ messageId: res.body.messageId, key: accountId });
    statuses.push(res.body.status);
  }
  return statuses;
}

/**
 * producer-app against a broker that goes away (scripts/kafka/kafka.sh stop): publishes are spooled to disk,
 * survive a SIGKILL and a torn spool tail, and reach Kafka in per-key order when the broker is back.
 */
describe('publisher: Kafka outages', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  afterAll(async () => {
    kafkaControl('start'); // never leave the broker down for the next suite
  });

  it('spools while Kafka is stopped and delivers everything, in per-key order, when it is back', async () => {
    const prefix = `${uniqueTopic('outage')}.`;
    const topic = `${prefix}payments.requested`;
    await createTopics(kafka, [topic], 6);
    const { app, baseUrl } = await startProducerApp(processes, { topicPrefix: prefix, spoolDir: newSpoolDirectory(), label: 'outage' });
    const accounts = ['acc-1', 'acc-2', 'acc-3', 'acc-4', 'acc-5'];
    const sent: Acknowledged[] = [];

    expect(new Set(await postPayments(baseUrl, accounts, 20, sent))).toEqual(new Set(['sent']));
    kafkaControl('stop');
    try {
      expect(new Set(await postPayments(baseUrl, accounts, 60, sent))).toEqual(new Set(['spooled']));
      const health = await getJson(`${baseUrl}/health`);
      expect(health.body.details.publisher).toMatchObject({ status: 'up', breaker: 'open', spool: { records: 60 } });
    } finally {
      kafkaControl('start');
    }
    // Right after the outage the keys still have spooled records: new events queue behind them.
    await postPayments(baseUrl, accounts, 20, sent);
    await waitForEmptySpool(baseUrl);
    await expectDeliveredInOrder(kafka, topic, sent);
    expect(app.logs()).toMatch(/spool drained/);
  });

  it('survives a SIGKILL during an outage, a torn spool tail and a restart while Kafka is still down: the tail is quarantined, everything else delivered', async () => {
    const prefix = `${uniqueTopic('outage-kill')}.`;
    const topic = `${prefix}payments.requested`;
    await createTopics(kafka, [topic], 6);
    const spoolDir = newSpoolDirectory();
    const first = await startProducerApp(processes, { topicPrefix: prefix, spoolDir, label: 'outage-kill' });
    const accounts = ['acc-a', 'acc-b', 'acc-c'];
    const sent: Acknowledged[] = [];
    let second: Awaited<ReturnType<typeof startProducerApp>>;

    kafkaControl('stop');
    try {
      expect(new Set(await postPayments(first.baseUrl, accounts, 45, sent))).toEqual(new Set(['spooled']));
      await first.app.kill();
      // A write cut short by the crash: half a frame at the end of the newest segment.
      const segments = readdirSync(spoolDir).filter((f) => f.startsWith('segment-')).sort();
      appendFileSync(join(spoolDir, segments[segments.length - 1]), Buffer.from([0, 0, 1, 0, 0xde, 0xad, 0xbe, 0xef, 0x7b]));
      // Restarted before Kafka is back: it must start, keep spooling, and connect once Kafka answers.
      second = await startProducerApp(processes, { topicPrefix: prefix, spoolDir, label: 'outage-kill' });
      expect(new Set(await postPayments(second.baseUrl, accounts, 15, sent))).toEqual(new Set(['spooled']));
      // Long enough for the app's first connect() to give up (KafkaJS retries for about 10 s).
      await new Promise((r) => setTimeout(r, 12000));
    } finally {
      kafkaControl('start');
    }
    await waitForEmptySpool(second.baseUrl);
    await expectDeliveredInOrder(kafka, topic, sent);
    expect(second.app.logs()).toMatch(/torn record .* moved 9 bytes to .*quarantine-/);
    expect(readdirSync(spoolDir).filter((f) => f.startsWith('quarantine-'))).toHaveLength(1);
    expect(second.app.running).toBe(true);
  });
});
