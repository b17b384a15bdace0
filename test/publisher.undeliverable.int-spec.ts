import { Test, TestingModule } from '@nestjs/testing';
import { randomUUID } from 'crypto';
import { existsSync, readdirSync, readFileSync } from 'fs';
import { ConfigResourceTypes, Kafka } from 'kafkajs';
import { EventPublisher, KafkaExactlyOnceModule, UndeliverableEventError } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { Spool, REFUSED_QUARANTINE } from 'kafka-exactly-once/spool/spool';
import { QuarantinedRecord, readFrame, SpooledRecord } from 'kafka-exactly-once/spool/spool-record';
import { join } from 'path';
import { kafkaControl } from './support/broker';
import { REPO_ROOT, kafkaBrokers } from './support/environment';
import { createTopics, readTopic, uniqueTopic, withAdmin } from './support/kafka';
import { demoSchemas } from './support/payments';
import { getJson, newSpoolDirectory, postJson, startProducerApp } from './support/producer-app';
import { Acknowledged, expectDeliveredInOrder, waitForEmptySpool } from './support/published';
import { processSuite } from './support/suite';

async function topicSize(kafka: Kafka, topic: string): Promise<number> {
  return withAdmin(kafka, async (admin) => (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0));
}

async function createTopicWith(kafka: Kafka, topic: string, configEntries: Array<{ name: string; value: string }>, numPartitions = 1): Promise<void> {
  await createTopics(kafka, [{ topic, numPartitions, configEntries }]);
}

const payment = (accountId: string, extra: Record<string, unknown> = {}) => ({
  paymentId: randomUUID(),
  accountId,
  amountCents: 100n,
  requestedAt: new Date().toISOString(),
  ...extra,
});

/**
 * Issue 7, publisher side: an event Kafka can never take is refused at once instead of being acknowledged,
 * and a spooled record the broker refuses for good is quarantined instead of blocking the spool.
 */
describe('publisher: records Kafka can never take', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  afterAll(() => {
    kafkaControl('start'); // never leave the broker down for the next suite
  });

  describe('publish() refuses them at once', () => {
    let moduleRef: TestingModule;
    let publisher: EventPublisher;
    const prefix = `${uniqueTopic('undeliverable')}.`;
    const requested = `${prefix}payments.requested`;
    const processed = `${prefix}payments.processed`; // with a small max.message.bytes

    beforeAll(async () => {
      await createTopics(kafka, [requested], 3);
      await createTopicWith(kafka, processed, [{ name: 'max.message.bytes', value: '20000' }]);
      moduleRef = await Test.createTestingModule({
        imports: [
          KafkaExactlyOnceModule.forRoot({
            kafka: { clientId: 'undeliverable-test', brokers: kafkaBrokers() },
            transactionalIdPrefix: 'undeliverable-test',
            schemas: { directory: join(REPO_ROOT, 'schemas') },
            topicPrefix: prefix,
            topics: {
              'payments.requested': { schema: 'com.example.PaymentRequested', key: (e: { accountId: string }) => e.accountId },
              'payments.processed': { schema: 'com.example.PaymentProcessed', key: (e: { accountId: string }) => e.accountId },
              // Declared, but never created on the broker.
              'users.signed-up': { schema: 'com.example.UserSignedUp', key: (e: { userId: number }) => `user-${e.userId}` },
            },
            publisher: { spool: { directory: newSpoolDirectory() }, sendTimeoutMs: 3000 },
          }),
        ],
      }).compile();
      await moduleRef.init();
      publisher = moduleRef.get(EventPublisher);
    });

    afterAll(async () => {
      await moduleRef?.close();
    });

    it("refuses an event larger than the broker's default limit, naming topic, size and limit, and sends and spools nothing", async () => {
      const attempt = publisher.publish('payments.requested', payment('acc-big', { paymentId: 'x'.repeat(1_200_000) }));
      await expect(attempt).rejects.toBeInstanceOf(UndeliverableEventError);
      await expect(attempt).rejects.toMatchObject({ reason: 'too-large', topic: requested, limitBytes: 1048588, retriable: false });
      const err = (await attempt.catch((e) => e)) as UndeliverableEventError;
      expect(err.recordBytes).toBeGreaterThan(1_200_000);
      expect(err.message).toContain(`topic "${requested}"`);
      expect(err.message).toContain(`${err.recordBytes} bytes`);
      expect(err.message).toMatch(/limit of 1048588 bytes \(topic max\.message\.bytes\).*neither sent nor spooled/);
      // An event of the same key that fits goes through: the refusal blocked nothing.
      await expect(publisher.publish('payments.requested', payment('acc-big'))).resolves.toMatchObject({ status: 'sent' });
      expect(await topicSize(kafka, requested)).toBe(1);
      expect(publisher.status()).toMatchObject({ spool: { records: 0 }, spooled: 0 });
    });

    it("reads the topic's own max.message.bytes", async () => {
      const event = { paymentId: 'p', accountId: 'acc-1', amountCents: 1n, status: 'ACCEPTED', balanceAfterCents: 1n };
      const attempt = publisher.publish('payments.processed', { ...event, paymentId: 'y'.repeat(30_000) });
      await expect(attempt).rejects.toMatchObject({ reason: 'too-large', topic: processed, limitBytes: 20000 });
      await expect(publisher.publish('payments.processed', { ...event, paymentId: 'y'.repeat(15_000) })).resolves.toMatchObject({ status: 'sent' });
      expect(await topicSize(kafka, processed)).toBe(1);
      expect(publisher.status().spool.records).toBe(0);
    });

    it('groups concurrent publishes into one request and tells each its own partition and offset', async () => {
      const before = await topicSize(kafka, requested);
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => publisher.publish('payments.requested', payment(`acc-group-${i}`))));
      expect(results.every((r) => r.status === 'sent')).toBe(true);
      const records = await readTopic(kafka, requested, { until: (r) => r.length >= before + 40, timeoutMs: 30000 });
      const at = new Map(records.map((r) => [`${r.partition}/${r.offset}`, r.headers['message-id']]));
      // Every publish's partition and offset hold that very event.
      expect(results.map((r) => at.get(`${r.partition}/${r.offset}`))).toEqual(results.map((r) => r.messageId));
    });

    it('refuses only the record the broker refuses in a grouped request; the others are sent', async () => {
      // Lower the topic's limit behind the publisher's back (its facts are cached): the check before the send
      // passes, and the broker refuses the request that holds the large record.
      await withAdmin(kafka, (admin) => admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: processed, configEntries: [{ name: 'max.message.bytes', value: '12000' }] }] }));
      const before = await topicSize(kafka, processed);
      const event = (paymentId: string) => ({ paymentId, accountId: `acc-${paymentId.slice(0, 8)}`, amountCents: 1n, status: 'ACCEPTED', balanceAfterCents: 1n });
      const attempts = [
        ...Array.from({ length: 10 }, (_, i) => publisher.publish('payments.processed', event(`small-${i}`))),
        publisher.publish('payments.processed', event('z'.repeat(15_000))),
      ];
      const settled = await Promise.allSettled(attempts);
      expect(settled.slice(0, 10).map((r) => r.status === 'fulfilled' && r.value.status)).toEqual(Array(10).fill('sent'));
      expect(settled[10]).toMatchObject({ status: 'rejected', reason: expect.any(UndeliverableEventError) });
      expect(await topicSize(kafka, processed)).toBe(before + 10);
      expect(publisher.status().spool.records).toBe(0);
    });

    it('refuses an event for a topic that does not exist, saying to create it, and spools nothing', async () => {
      const attempt = publisher.publish('users.signed-up', { userId: 7, userEmail: 'u7@example.com', timestamp: new Date().toISOString() });
      await expect(attempt).rejects.toBeInstanceOf(UndeliverableEventError);
      await expect(attempt).rejects.toMatchObject({ reason: 'unknown-topic', topic: `${prefix}users.signed-up` });
      await expect(attempt).rejects.toThrow(/does not exist on the Kafka cluster.*Create the topic/);
      expect(publisher.status()).toMatchObject({ spool: { records: 0 }, spooled: 0 });
    });
  });

  it('producer-app answers 413 for an event over the topic limit and 422 for a missing topic, and publishes nothing', async () => {
    const prefix = `${uniqueTopic('undeliverable-http')}.`;
    const requested = `${prefix}payments.requested`;
    await createTopicWith(kafka, requested, [{ name: 'max.message.bytes', value: '10000' }], 3);
    // users.signed-up is not created.
    const { baseUrl } = await startProducerApp(processes, { topicPrefix: prefix, spoolDir: newSpoolDirectory(), label: 'undeliverable-http' });

    const tooLarge = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId: `acc-${'z'.repeat(6000)}`, amountCents: 5 }, { 'Idempotency-Key': 'big-1' });
    expect(tooLarge).toMatchObject({ status: 413, body: { reason: 'too-large', messageId: 'big-1', limitBytes: 10000 } });
    expect(tooLarge.body.recordBytes).toBeGreaterThan(12000);
    expect(tooLarge.body.message).toMatch(/over the limit of 10000 bytes/);

    const missing = await postJson(`${baseUrl}/users/signups`, { userId: 1, userEmail: 'u1@example.com' }, { 'Idempotency-Key': 'user-1' });
    expect(missing).toMatchObject({ status: 422, body: { reason: 'unknown-topic', messageId: 'user-1' } });
    expect(missing.body.message).toContain(`Topic "${prefix}users.signed-up" does not exist`);

    const fits = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId: 'acc-1', amountCents: 5 }, { 'Idempotency-Key': 'fits-1' });
    expect(fits).toMatchObject({ status: 202, body: { messageId: 'fits-1', status: 'sent' } });
    expect(await topicSize(kafka, requested)).toBe(1);
    const health = await getJson(`${baseUrl}/health`);
    expect(health.body.details.publisher).toMatchObject({ status: 'up', spool: { records: 0 }, spooled: 0, quarantined: 0 });
  });

  it('quarantines spooled records the broker refuses for good, delivers the other keys in order, and drains the spool', async () => {
    const prefix = `${uniqueTopic('quarantine')}.`;
    const requested = `${prefix}payments.requested`;
    const compacted = `${prefix}payments.compacted`; // refuses a record without a key: INVALID_RECORD
    const limited = `${prefix}payments.limited`; // max.message.bytes 20000
    const missing = `${prefix}payments.gone`; // never created
    await createTopics(kafka, [requested], 3);
    await createTopicWith(kafka, compacted, [{ name: 'cleanup.policy', value: 'compact' }]);
    await createTopicWith(kafka, limited, [{ name: 'max.message.bytes', value: '20000' }]);

    // The spool as a previous run (or an older version) left it: good records of three keys with, between
    // them, three records Kafka can never take. Written with the library's own spool.
    const schema = demoSchemas().current('com.example.PaymentRequested');
    const spoolDir = newSpoolDirectory();
    const spool = new Spool({ directory: spoolDir, maxBytes: 64 * 1024 * 1024, segmentBytes: 1024 * 1024 });
    const good: Acknowledged[] = [];
    const bad: Record<string, string> = {};
    const record = (topic: string, key: string | null, fields: Record<string, unknown> = {}): SpooledRecord => {
      const messageId = randomUUID();
      const value = encodeSingleObject(schema, payment(key ?? 'none', fields));
      return {
        topic,
        key: key === null ? null : Buffer.from(key).toString('base64'),
        value: value.toString('base64'),
        headers: { 'message-id': messageId, 'event-type': schema.name },
        messageId,
        spooledAt: Date.now(),
      };
    };
    const keys = ['acc-a', 'acc-b', 'acc-c'];
    for (let i = 0; i < 60; i++) {
      const r = record(requested, keys[i % keys.length]);
      await spool.append(r);
      good.push({ messageId: r.messageId, key: keys[i % keys.length] });
      if (i === 10) {
        const noKey = record(compacted, null);
        bad.invalid = noKey.messageId;
        await spool.append(noKey);
      }
      if (i === 25) {
        const large = record(limited, 'acc-a', { paymentId: 'q'.repeat(30_000) });
        bad.large = large.messageId;
        await spool.append(large);
      }
      if (i === 40) {
        const gone = record(missing, 'acc-b');
        bad.gone = gone.messageId;
        await spool.append(gone);
      }
    }
    await spool.close();

    // A missing topic is waited for (it may be created late) for MISSING_TOPIC_GRACE_MS, here 3 s, then set aside.
    const { app, baseUrl } = await startProducerApp(processes, { topicPrefix: prefix, spoolDir, label: 'quarantine', env: { MISSING_TOPIC_GRACE_MS: '3000' } });
    const health = await waitForEmptySpool(baseUrl);
    expect(health).toMatchObject({ status: 'up', quarantined: 3, drained: 60 });
    expect(health.lastQuarantineReason).toMatch(/UNKNOWN_TOPIC_OR_PARTITION/);

    await expectDeliveredInOrder(kafka, requested, good);
    expect(await topicSize(kafka, compacted)).toBe(0);
    expect(await topicSize(kafka, limited)).toBe(0);

    const logs = app.logs();
    expect(logs).toMatch(new RegExp(`WARN.*quarantined spooled record ${bad.invalid} of topic ${compacted.replace(/\./g, '\\.')}: .*INVALID_RECORD`));
    expect(logs).toMatch(new RegExp(`WARN.*quarantined spooled record ${bad.large} of topic ${limited.replace(/\./g, '\\.')}: .*MESSAGE_TOO_LARGE`));
    expect(logs).toMatch(new RegExp(`WARN.*quarantined spooled record ${bad.gone} of topic ${missing.replace(/\./g, '\\.')}: .*UNKNOWN_TOPIC_OR_PARTITION`));

    // The quarantine file keeps the three records, whole, with their reasons.
    const file = join(spoolDir, REFUSED_QUARANTINE);
    expect(existsSync(file)).toBe(true);
    const buf = readFileSync(file);
    const kept: QuarantinedRecord[] = [];
    for (let offset = 0; ; ) {
      const frame = readFrame(buf, offset);
      if (frame.kind !== 'record') break;
      kept.push(frame.record as QuarantinedRecord);
      offset = frame.next;
    }
    expect(kept.map((r) => r.messageId)).toEqual([bad.invalid, bad.large, bad.gone]);
    expect(kept.map((r) => r.quarantine.reason)).toEqual([expect.stringMatching(/INVALID_RECORD/), expect.stringMatching(/MESSAGE_TOO_LARGE/), expect.stringMatching(/UNKNOWN_TOPIC/)]);
    expect(readdirSync(spoolDir).filter((f) => f.startsWith('quarantine-'))).toEqual([REFUSED_QUARANTINE]);
  });

  it('spools an over-limit event while Kafka is down and its topic was never looked up; back online, the drainer quarantines it and delivers the rest in order', async () => {
    const prefix = `${uniqueTopic('undeliverable-offline')}.`;
    const requested = `${prefix}payments.requested`;
    await createTopicWith(kafka, requested, [{ name: 'max.message.bytes', value: '10000' }], 3);
    const spoolDir = newSpoolDirectory();
    const acknowledged: Acknowledged[] = [];
    const post = async (accountId: string, extra: Record<string, unknown> = {}) => {
      const messageId = randomUUID();
      const res = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId, amountCents: 5, ...extra }, { 'Idempotency-Key': messageId });
      expect(res).toMatchObject({ status: 202, body: { messageId, status: 'spooled' } });
      return messageId;
    };
    let baseUrl = '';
    let app: Awaited<ReturnType<typeof startProducerApp>>['app'];
    let tooLarge: string;
    kafkaControl('stop');
    try {
      ({ app, baseUrl } = await startProducerApp(processes, { topicPrefix: prefix, spoolDir, label: 'undeliverable-offline' }));
      for (const accountId of ['acc-1', 'acc-2', 'acc-3']) acknowledged.push({ messageId: await post(accountId), key: accountId });
      // The publisher cannot know the topic's limit now: it acknowledges what it cannot check (documented).
      tooLarge = await post('acc-2', { requestedAt: 'x'.repeat(12000) });
      for (const accountId of ['acc-2', 'acc-1', 'acc-3', 'acc-2']) acknowledged.push({ messageId: await post(accountId), key: accountId });
    } finally {
      kafkaControl('start');
    }
    const health = await waitForEmptySpool(baseUrl);
    expect(health).toMatchObject({ quarantined: 1, drained: 7 });
    // Set aside on the broker's own refusal, not on what the publisher believed about the topic's limit.
    expect(health.lastQuarantineReason).toMatch(/^MESSAGE_TOO_LARGE: /);
    expect(app.logs()).toContain(`quarantined spooled record ${tooLarge} of topic ${requested}`);
    await expectDeliveredInOrder(kafka, requested, acknowledged);
  });
});
