import { Test, TestingModule } from '@nestjs/testing';
import { randomUUID } from 'crypto';
import { Kafka } from 'kafkajs';
import { EventPublisher, EventValidationError, KafkaExactlyOnceModule, MissingKeyError, PublishError } from 'kafka-exactly-once';
import { join } from 'path';
import { REPO_ROOT, kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic, withAdmin, topicSize } from './support/kafka';
import { ProcessGroup } from './support/processes';
import { newSpoolDirectory, postJson, startProducerApp } from './support/producer-app';

/** Invalid events are refused with the names of the bad fields and nothing is sent; publishAll is all or nothing. */
describe('publisher: validation and atomic batches', () => {
  const processes = new ProcessGroup();
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let publisher: EventPublisher;
  const prefix = `${uniqueTopic('validation')}.`;

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [`${prefix}payments.requested`, `${prefix}payments.processed`, `${prefix}users.signed-up`], 3);
    moduleRef = await Test.createTestingModule({
      imports: [
        KafkaExactlyOnceModule.forRoot({
          driver: testDriver(),
          kafka: { clientId: 'validation-test', brokers: kafkaBrokers() },
          transactionalIdPrefix: 'validation-test',
          schemas: { directory: join(REPO_ROOT, 'schemas') },
          topicPrefix: prefix,
          topics: {
            'payments.requested': { schema: 'com.example.PaymentRequested', key: (e: { accountId: string }) => e.accountId },
            'payments.processed': { schema: 'com.example.PaymentProcessed' },
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
    await processes.killAll();
  });

  it('refuses an invalid event naming each bad field (missing, wrong type, enum out of range) and sends nothing', async () => {
    const attempt = publisher.publish(
      'payments.processed',
      { paymentId: 'p', accountId: 'a', amountCents: 'ten', status: 'MAYBE' },
      { key: 'a' },
    );
    await expect(attempt).rejects.toBeInstanceOf(EventValidationError);
    await expect(attempt).rejects.toMatchObject({
      fieldErrors: [
        { path: 'amountCents', problem: 'expected a "long", got "ten"' },
        { path: 'status', problem: 'expected one of ["ACCEPTED","REJECTED_INSUFFICIENT_FUNDS"], got "MAYBE"' },
        { path: 'balanceAfterCents', problem: 'is missing (expected a "long")' },
      ],
    });
    await expect(publisher.publish('payments.processed', { paymentId: 'p', accountId: 'a', amountCents: 1, status: 'ACCEPTED', balanceAfterCents: 1 })).rejects.toBeInstanceOf(
      MissingKeyError,
    );
    expect(await topicSize(kafka, `${prefix}payments.processed`)).toBe(0);
    expect(publisher.status().spool.records).toBe(0);
  });

  it('answers 400 with the field errors over HTTP and publishes nothing', async () => {
    const { baseUrl } = await startProducerApp(processes, { topicPrefix: prefix, spoolDir: newSpoolDirectory(), label: 'validation' });
    const missing = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), amountCents: 100 });
    expect(missing.status).toBe(400);
    // accountId is both the key and a field: the key function finds none, so the request fails before validation.
    expect(missing.body.message).toMatch(/needs a key|accountId/);
    const wrongType = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId: 'acc-1', amountCents: 12.5 });
    expect(wrongType).toMatchObject({ status: 400, body: { fieldErrors: [{ path: 'amountCents', problem: 'expected a "long", got 12.5' }] } });
    const notUuid = await postJson(`${baseUrl}/payments`, { paymentId: 'nope', accountId: 'acc-1', amountCents: 5 });
    expect(notUuid).toMatchObject({ status: 400, body: { fieldErrors: [{ path: 'paymentId' }] } });
    const badUser = await postJson(`${baseUrl}/users/signups`, { userId: 'seven', userEmail: 'a@example.com' });
    expect(badUser).toMatchObject({ status: 400, body: { fieldErrors: [{ path: 'userId', problem: 'expected a "int", got "seven"' }] } });
    expect(await topicSize(kafka, `${prefix}payments.requested`)).toBe(0);
    expect(await topicSize(kafka, `${prefix}users.signed-up`)).toBe(0);

    const request = { paymentId: randomUUID(), accountId: 'acc-1', amountCents: '9007199254740993' };
    const accepted = await postJson(`${baseUrl}/payments`, request, { 'Idempotency-Key': 'key-1' });
    expect(accepted).toMatchObject({ status: 202, body: { messageId: expect.stringMatching(/^idem-[0-9a-f]{40}$/), status: 'sent' } });
    // The Idempotency-Key is scoped: the same request sent again with it (a retry after a lost answer) is the same
    // event, while another client's request with the same key is another event, never dropped as a duplicate.
    const retried = await postJson(`${baseUrl}/payments`, { amountCents: request.amountCents, accountId: 'acc-1', paymentId: request.paymentId }, { 'Idempotency-Key': 'key-1' });
    expect(retried.body.messageId).toBe(accepted.body.messageId);
    const otherRequest = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId: 'acc-2', amountCents: 7 }, { 'Idempotency-Key': 'key-1' });
    const otherClient = await postJson(`${baseUrl}/payments`, request, { 'Idempotency-Key': 'key-1', 'X-Client-Id': 'client-b' });
    const otherRoute = await postJson(`${baseUrl}/users/signups`, { userId: 8, userEmail: 'u8@example.com', timestamp: '2026-01-01T00:00:00Z' }, { 'Idempotency-Key': 'key-1' });
    const ids = [accepted, otherRequest, otherClient, otherRoute].map((r) => r.body.messageId);
    expect(new Set(ids).size).toBe(4);
  });

  it('publishAll commits several events atomically', async () => {
    const accountId = `acc-${randomUUID()}`;
    const results = await publisher.publishAll([
      { topic: 'payments.requested', event: { paymentId: randomUUID(), accountId, amountCents: 1n, requestedAt: 'now' } },
      { topic: 'payments.requested', event: { paymentId: randomUUID(), accountId, amountCents: 2n, requestedAt: 'now' } },
    ]);
    const ids = results.map((r) => r.messageId);
    const read = await readTopic(kafka, `${prefix}payments.requested`, { until: (r) => ids.every((id) => r.some((x) => x.headers['message-id'] === id)) });
    expect(read.filter((r) => ids.includes(r.headers['message-id'])).map((r) => r.headers['message-id'])).toEqual(ids);
  });

  it('publishAll makes none of its events visible when one of them fails', async () => {
    const accountId = `acc-${randomUUID()}`;
    const failing = publisher.publishAll([
      { topic: 'payments.requested', event: { paymentId: randomUUID(), accountId, amountCents: 5n, requestedAt: 'now' } },
      // Larger than the broker's message.max.bytes: the broker takes the first event and refuses this one, so
      // the transaction holds a written record when it is aborted.
      {
        topic: 'payments.processed',
        event: { paymentId: 'x'.repeat(1_200_000), accountId, amountCents: 5n, status: 'ACCEPTED', balanceAfterCents: 5n },
        key: accountId,
      },
    ]);
    await expect(failing).rejects.toBeInstanceOf(PublishError);

    // A committed marker after the failed attempt: once a read-committed reader sees it, it has passed the aborted events.
    const [marker] = await publisher.publishAll([{ topic: 'payments.requested', event: { paymentId: randomUUID(), accountId, amountCents: 7n, requestedAt: 'now' } }]);
    const committed = await readTopic(kafka, `${prefix}payments.requested`, { until: (r) => r.some((x) => x.headers['message-id'] === marker.messageId) });
    expect(committed.filter((r) => r.key === accountId).map((r) => r.headers['message-id'])).toEqual([marker.messageId]);
    const uncommitted = await readTopic(kafka, `${prefix}payments.requested`, {
      readUncommitted: true,
      until: (r) => r.some((x) => x.headers['message-id'] === marker.messageId),
    });
    // The aborted event really reached the log: only read-committed isolation hides it.
    expect(uncommitted.filter((r) => r.key === accountId)).toHaveLength(2);
  });
});
