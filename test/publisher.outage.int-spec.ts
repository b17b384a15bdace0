import { randomUUID } from 'crypto';
import { appendFileSync, readdirSync } from 'fs';
import { join } from 'path';
import { Kafka } from 'kafkajs';
import { kafkaControl } from './support/broker';
import { createTopics, readTopic, uniqueTopic } from './support/kafka';
import { processSuite } from './support/suite';
import { getJson, newSpoolDirectory, postJson, startProducerApp } from './support/producer-app';

interface Sent {
  messageId: string;
  accountId: string;
}

async function postPayments(baseUrl: string, accounts: string[], count: number, into: Sent[]): Promise<string[]> {
  const statuses: string[] = [];
  for (let i = 0; i < count; i++) {
    const accountId = accounts[i % accounts.length];
    const messageId = randomUUID();
    const res = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId, amountCents: 100 + i }, { 'Idempotency-Key': messageId });
    expect(res.status).toBe(202);
    expect(res.body.messageId).toBe(messageId);
    into.push({ messageId, accountId });
    statuses.push(res.body.status);
  }
  return statuses;
}

async function waitForEmptySpool(baseUrl: string, timeoutMs = 90000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const health = await getJson(`${baseUrl}/health`).catch(() => undefined);
    const spool = health?.body?.details?.publisher?.spool;
    if (spool && spool.records === 0 && health?.body?.details?.publisher?.breaker === 'closed') return;
    if (Date.now() > deadline) throw new Error(`spool not drained: ${JSON.stringify(health?.body)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Every published message id arrives, and for each account the first arrivals come in publish order. */
async function expectDeliveredInOrder(kafka: Kafka, topic: string, sent: Sent[]): Promise<void> {
  const wanted = new Set(sent.map((s) => s.messageId));
  const records = await readTopic(kafka, topic, {
    timeoutMs: 90000,
    until: (r) => new Set(r.map((x) => x.headers['message-id']).filter((id) => wanted.has(id))).size === wanted.size,
  });
  const firstSeen: string[] = [];
  const seen = new Set<string>();
  for (const r of [...records].sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)))) {
    const id = r.headers['message-id'];
    if (!seen.has(id)) firstSeen.push(id);
    seen.add(id);
  }
  const account = new Map(sent.map((s) => [s.messageId, s.accountId]));
  const byAccount = (ids: string[]) => {
    const out = new Map<string, string[]>();
    for (const id of ids) out.set(account.get(id) as string, [...(out.get(account.get(id) as string) ?? []), id]);
    return out;
  };
  expect(byAccount(firstSeen)).toEqual(byAccount(sent.map((s) => s.messageId)));
  for (const r of records) expect(r.headers['event-type']).toBe('com.example.PaymentRequested');
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
    const sent: Sent[] = [];

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
    const sent: Sent[] = [];
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
