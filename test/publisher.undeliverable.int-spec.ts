import { Test, TestingModule } from '@nestjs/testing';
import { randomUUID } from 'crypto';
import { existsSync, readdirSync, readFileSync } from 'fs';
import { ConfigResourceTypes, Kafka } from 'kafkajs';
import { EventPublisher, InvalidPublishOptionsError, KafkaExactlyOnceModule, PublishError, SpoolFullError, UndeliverableEventError } from 'kafka-exactly-once';
import { runKafkaEo } from 'kafka-exactly-once/cli/kafka-eo.command';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { Spool, REFUSED_QUARANTINE } from 'kafka-exactly-once/spool/spool';
import { QuarantinedRecord, readFrame, SpooledRecord } from 'kafka-exactly-once/spool/spool-record';
import { join } from 'path';
import { kafkaControl, kafkaFreeze } from './support/broker';
import { REPO_ROOT, kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, uniqueTopic, withAdmin, topicSize } from './support/kafka';
import { demoSchemas } from './support/payments';
import { getJson, newSpoolDirectory, postJson, startProducerApp } from './support/producer-app';
import { Acknowledged, expectDeliveredInOrder, waitForEmptySpool } from './support/published';
import { processSuite } from './support/suite';

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
    kafkaFreeze('SIGCONT');
    kafkaControl('start'); // never leave the broker down (or frozen) for the next suite
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
            driver: testDriver(),
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

    it('refuses header values and message ids Kafka cannot carry at the call, naming them, and sends and spools nothing', async () => {
      const before = await topicSize(kafka, requested);
      const refusals = [
        publisher.publish('payments.requested', payment('acc-h'), { headers: { attempt: 3 } as never }),
        publisher.publish('payments.requested', payment('acc-h'), { headers: { retried: true } as never }),
        publisher.publish('payments.requested', payment('acc-h'), { headers: { gone: null } as never }),
        publisher.publish('payments.requested', payment('acc-h'), { messageId: 123 as never }),
        publisher.publish('payments.requested', payment('acc-h'), { messageId: '' }),
        publisher.publishAll([
          { topic: 'payments.requested', event: payment('acc-h') },
          { topic: 'payments.requested', event: payment('acc-h'), headers: { attempt: 3 } as never },
        ]),
      ];
      const errors = await Promise.all(refusals.map((attempt) => attempt.then(() => undefined, (err: unknown) => err)));
      expect(errors.map((e) => (e as Error)?.name)).toEqual(Array(6).fill('InvalidPublishOptionsError'));
      expect(errors.map((e) => (e as InvalidPublishOptionsError).field)).toEqual(['headers', 'headers', 'headers', 'messageId', 'messageId', 'headers']);
      expect((errors[0] as Error).message).toMatch(/^publish to topic "payments\.requested" refused, nothing was sent or spooled: header "attempt" has a number \(3\)/);
      expect((errors[3] as Error).message).toMatch(/messageId must be a string, got a number \(123\)/);
      expect(publisher.status()).toMatchObject({ spool: { records: 0 }, spooled: 0, quarantined: 0 });
      expect(await topicSize(kafka, requested)).toBe(before);

      // Bytes are taken, and reach Kafka byte for byte; an undefined header is left out.
      const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x41]);
      const sent = await publisher.publish('payments.requested', payment('acc-h'), { headers: { raw: bytes, view: new Uint8Array([7, 8]), none: undefined } });
      expect(sent.status).toBe('sent');
      const [record] = (await readTopic(kafka, requested, { until: (r) => r.some((x) => x.headers['message-id'] === sent.messageId) })).filter((r) => r.headers['message-id'] === sent.messageId);
      expect(record.rawHeaders.raw).toEqual(bytes);
      expect(record.rawHeaders.view).toEqual(Buffer.from([7, 8]));
      expect(record.rawHeaders).not.toHaveProperty('none');
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
    expect(tooLarge).toMatchObject({ status: 413, body: { reason: 'too-large', messageId: expect.stringMatching(/^idem-/), limitBytes: 10000 } });
    expect(tooLarge.body.recordBytes).toBeGreaterThan(12000);
    expect(tooLarge.body.message).toMatch(/over the limit of 10000 bytes/);

    const missing = await postJson(`${baseUrl}/users/signups`, { userId: 1, userEmail: 'u1@example.com' }, { 'Idempotency-Key': 'user-1' });
    expect(missing).toMatchObject({ status: 422, body: { reason: 'unknown-topic', messageId: expect.stringMatching(/^idem-/) } });
    expect(missing.body.message).toContain(`Topic "${prefix}users.signed-up" does not exist`);

    const fits = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId: 'acc-1', amountCents: 5 }, { 'Idempotency-Key': 'fits-1' });
    expect(fits).toMatchObject({ status: 202, body: { messageId: expect.stringMatching(/^idem-/), status: 'sent' } });
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

  it('sets aside a spooled record no version can send (a number header an older version spooled), keeps bytes exact through the spool, and the line moves', async () => {
    const prefix = `${uniqueTopic('unsendable')}.`;
    const requested = `${prefix}payments.requested`;
    await createTopics(kafka, [requested], 1);
    const schema = demoSchemas().current('com.example.PaymentRequested');
    const spoolDir = newSpoolDirectory();
    // As a version before 0.5 left its spool: a Buffer header value spooled as JSON, and a number header value
    // (both accepted at the call then). The number one can never be sent.
    const spooled = (key: string, headers: Record<string, unknown>): SpooledRecord => {
      const messageId = randomUUID();
      return {
        topic: requested,
        key: Buffer.from(key).toString('base64'),
        value: encodeSingleObject(schema, payment(key)).toString('base64'),
        headers: { ...headers, 'message-id': messageId, 'event-type': schema.name } as SpooledRecord['headers'],
        messageId,
        spooledAt: Date.now(),
      };
    };
    const legacyBytes = spooled('acc-a', JSON.parse(JSON.stringify({ trace: Buffer.from([0, 255, 1]) })));
    const unsendable = spooled('acc-a', { attempt: 3 });
    const spool = new Spool({ directory: spoolDir, maxBytes: 64 * 1024 * 1024, segmentBytes: 1024 * 1024 });
    await spool.append(legacyBytes);
    await spool.append(unsendable);
    await spool.close();

    // This version, while Kafka cannot be reached: byte header values are spooled, behind the older records.
    const bytes = Buffer.from([0xff, 0x00, 0xfe]);
    const offline = await Test.createTestingModule({
      imports: [
        KafkaExactlyOnceModule.forRoot({
          driver: testDriver(),
          kafka: { clientId: 'unsendable-offline', brokers: ['127.0.0.1:1'], retry: { retries: 0 }, connectionTimeout: 500 },
          transactionalIdPrefix: 'unsendable-offline',
          schemas: { directory: join(REPO_ROOT, 'schemas') },
          topicPrefix: prefix,
          topics: { 'payments.requested': { schema: 'com.example.PaymentRequested', key: (e: { accountId: string }) => e.accountId } },
          publisher: { spool: { directory: spoolDir }, sendTimeoutMs: 1000 },
        }),
      ],
    }).compile();
    await offline.init();
    let after: Acknowledged[];
    try {
      const publisher = offline.get(EventPublisher);
      const a = await publisher.publish('payments.requested', payment('acc-a'), { headers: { bin: bytes } });
      const b = await publisher.publish('payments.requested', payment('acc-b'), { headers: { bin: bytes } });
      expect([a.status, b.status]).toEqual(['spooled', 'spooled']);
      after = [{ messageId: a.messageId, key: 'acc-a' }, { messageId: b.messageId, key: 'acc-b' }];
    } finally {
      await offline.close();
    }

    const { app, baseUrl } = await startProducerApp(processes, { topicPrefix: prefix, spoolDir, label: 'unsendable' });
    const health = await waitForEmptySpool(baseUrl);
    expect(health).toMatchObject({ status: 'up', quarantined: 1, drained: 3 });
    expect(health.lastQuarantineReason).toMatch(/^UNSENDABLE_RECORD: .*header "attempt" has a number \(3\)/);
    expect(app.logs()).toContain(`quarantined spooled record ${unsendable.messageId} of topic ${requested}: it can never be sent`);
    // Every other record in its key's order, the set-aside one's key included; header bytes as given.
    await expectDeliveredInOrder(kafka, requested, [{ messageId: legacyBytes.messageId, key: 'acc-a' }, ...after]);
    const records = await readTopic(kafka, requested, { until: (r) => r.length >= 3 });
    expect(records.find((r) => r.headers['message-id'] === legacyBytes.messageId)?.rawHeaders.trace).toEqual(Buffer.from([0, 255, 1]));
    for (const { messageId } of after) expect(records.find((r) => r.headers['message-id'] === messageId)?.rawHeaders.bin).toEqual(bytes);
    expect(records.some((r) => r.headers['message-id'] === unsendable.messageId)).toBe(false);

    // Visible in metrics and in kafka-eo, with its reason.
    const metrics = await fetch(`${baseUrl}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/^kafka_eo_spool_quarantined_records\{client="[^"]+"\} 1$/m);
    const out: string[] = [];
    const code = await runKafkaEo(['spool', 'show', spoolDir, '--json'], process.env, { out: (t) => out.push(t), err: (t) => out.push(t) });
    expect(code).toBe(0);
    const shown = JSON.parse(out.join('\n'));
    expect(shown).toMatchObject({ waiting: { records: 0 }, quarantined: [{ messageId: unsendable.messageId, topic: requested, key: 'acc-a', reason: expect.stringMatching(/header "attempt"/) }] });
  });

  it('rejects a publish the spool cannot take after its live send went out unanswered with its message id and outcome unknown; a retry with that id is one event', async () => {
    const prefix = `${uniqueTopic('spool-full')}.`;
    const requested = `${prefix}payments.requested`;
    await createTopics(kafka, [requested], 1);
    const moduleRef = await Test.createTestingModule({
      imports: [
        KafkaExactlyOnceModule.forRoot({
          driver: testDriver(),
          kafka: { clientId: 'spool-full-test', brokers: kafkaBrokers() },
          transactionalIdPrefix: 'spool-full-test',
          schemas: { directory: join(REPO_ROOT, 'schemas') },
          topicPrefix: prefix,
          topics: { 'payments.requested': { schema: 'com.example.PaymentRequested', key: (e: { accountId: string }) => e.accountId } },
          // Room in the spool for one of these records, not two; a breaker that stays closed meanwhile.
          publisher: { spool: { directory: newSpoolDirectory(), maxBytes: 1500 }, sendTimeoutMs: 1500, breaker: { consecutiveFailures: 10 } },
        }),
      ],
    }).compile();
    await moduleRef.init();
    const publisher = moduleRef.get(EventPublisher);
    try {
      expect((await publisher.publish('payments.requested', payment('acc-0'))).status).toBe('sent');
      const first = payment('acc-1', { requestedAt: 'f'.repeat(500) });
      const second = payment('acc-2', { requestedAt: 's'.repeat(500) });
      let outcomes: unknown[];
      kafkaFreeze('SIGSTOP');
      try {
        // Published together, they go out in one request on the connected producer, which the frozen broker never
        // answers: both may be written. The first fills the spool, the second cannot be spooled.
        outcomes = await Promise.all([
          publisher.publish('payments.requested', first),
          publisher.publish('payments.requested', second, { messageId: 'retry-me' }).then(() => undefined, (err: unknown) => err),
        ]);
      } finally {
        kafkaFreeze('SIGCONT');
      }
      expect(outcomes[0]).toMatchObject({ status: 'spooled' });
      const failure = outcomes[1];
      expect(failure).toBeInstanceOf(SpoolFullError);
      expect(failure).toBeInstanceOf(PublishError);
      expect(failure).toMatchObject({ messageId: 'retry-me', messageIds: ['retry-me'], outcome: 'unknown', retriable: true });
      expect((failure as Error).message).toMatch(/event retry-me was not spooled, and its send to Kafka failed without an answer, so it may be in Kafka already\. Retry later with the same messageId \(retry-me\)/);
      // The caller retries with the id it was given: whether or not the first send landed, consumers see one event.
      await publisher.flush(60000);
      expect((await publisher.publish('payments.requested', second, { messageId: 'retry-me' })).status).toBe('sent');
      const records = await readTopic(kafka, requested, { until: (r) => r.filter((x) => x.headers['message-id'] === 'retry-me').length >= 1 });
      expect(new Set(records.filter((r) => r.key === 'acc-2').map((r) => r.headers['message-id']))).toEqual(new Set(['retry-me']));
    } finally {
      kafkaFreeze('SIGCONT');
      await moduleRef.close();
    }
  });

  it('spools an over-limit event while Kafka is down and its topic was never looked up; back online, the drainer quarantines it and delivers the rest in order', async () => {
    const prefix = `${uniqueTopic('undeliverable-offline')}.`;
    const requested = `${prefix}payments.requested`;
    await createTopicWith(kafka, requested, [{ name: 'max.message.bytes', value: '10000' }], 3);
    const spoolDir = newSpoolDirectory();
    const acknowledged: Acknowledged[] = [];
    const post = async (accountId: string, extra: Record<string, unknown> = {}) => {
      const res = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId, amountCents: 5, ...extra }, { 'Idempotency-Key': randomUUID() });
      expect(res).toMatchObject({ status: 202, body: { messageId: expect.stringMatching(/^idem-/), status: 'spooled' } });
      return res.body.messageId as string;
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
