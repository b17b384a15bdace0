import { randomUUID } from 'crypto';
import { readFileSync } from 'fs';
import { Kafka } from 'kafkajs';
import { INSTANCE_ID_FILE } from 'kafka-exactly-once/spool/instance-id';
import { join } from 'path';
import { createTopics, readTopic, uniqueTopic } from './support/kafka';
import { newSpoolDirectory, postJson, startProducerApp } from './support/producer-app';
import { processSuite } from './support/suite';

/**
 * publishAll's transactional id is stable for an instance (kept in its spool directory), so that a restart
 * settles the transaction a crash left open at once, instead of read-committed readers waiting for its timeout.
 */
describe('publisher: stable publishAll transactional id', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  // The transactional id of this version ({prefix}.%publisher.{instanceId}) and the one of versions before 0.3,
  // which a rolling upgrade finds open: both are settled at boot.
  it.each([
    ['this version', (instanceId: string) => `producer-app.%publisher.${instanceId}`],
    ['a version before 0.3', (instanceId: string) => `producer-app.publisher.${instanceId}`],
  ])('a restart with the same spool directory aborts the transaction a crash (of %s) left open, so readers move on at once', async (_version, transactionalId) => {
    const prefix = `${uniqueTopic('instance-id')}.`;
    const topic = `${prefix}payments.requested`;
    await createTopics(kafka, [topic], 1);
    const spoolDir = newSpoolDirectory();
    const first = await startProducerApp(processes, { topicPrefix: prefix, spoolDir, label: 'instance-id' });
    const instanceId = readFileSync(join(spoolDir, INSTANCE_ID_FILE), 'utf8').trim();
    await first.app.kill();

    // What a SIGKILL in the middle of publishAll leaves behind: a transaction of this instance's id, open, with
    // a record written, and a timeout (10 min) far longer than this test may wait.
    const crashed = kafka.producer({ transactionalId: transactionalId(instanceId), idempotent: true, maxInFlightRequests: 1, transactionTimeout: 600000 });
    await crashed.connect();
    const txn = await crashed.transaction();
    await txn.send({ topic, acks: -1, messages: [{ key: 'acc-1', value: Buffer.from('half of a publishAll'), headers: { 'message-id': 'left-open' } }] });
    await crashed.disconnect(); // no commit, no abort: the process is gone

    const second = await startProducerApp(processes, { topicPrefix: prefix, spoolDir, label: 'instance-id' });
    expect(readFileSync(join(spoolDir, INSTANCE_ID_FILE), 'utf8').trim()).toBe(instanceId);
    const res = await postJson(`${second.baseUrl}/payments`, { paymentId: randomUUID(), accountId: 'acc-1', amountCents: 5 }, { 'Idempotency-Key': randomUUID() });
    expect(res).toMatchObject({ status: 202, body: { status: 'sent' } });
    const after: string = res.body.messageId;

    // A read-committed reader reaches the later record: the open transaction no longer holds it back (it would
    // for 10 minutes, had the restarted instance used another transactional id).
    const committed = await readTopic(kafka, topic, { timeoutMs: 60000, until: (r) => r.some((x) => x.headers['message-id'] === after) });
    expect(committed.map((r) => r.headers['message-id'])).toEqual([after]); // the half-written record was aborted
    const uncommitted = await readTopic(kafka, topic, { readUncommitted: true, until: (r) => r.some((x) => x.headers['message-id'] === after) });
    expect(uncommitted.map((r) => r.headers['message-id'])).toEqual(['left-open', after]);
  });

  it('two spool directories, two instances, two ids', async () => {
    const prefix = `${uniqueTopic('instance-ids')}.`;
    const [a, b] = [newSpoolDirectory(), newSpoolDirectory()];
    const first = await startProducerApp(processes, { topicPrefix: prefix, spoolDir: a, label: 'instance-ids' });
    const second = await startProducerApp(processes, { topicPrefix: prefix, spoolDir: b, label: 'instance-ids' });
    expect(readFileSync(join(a, INSTANCE_ID_FILE), 'utf8').trim()).not.toBe(readFileSync(join(b, INSTANCE_ID_FILE), 'utf8').trim());
    await Promise.all([first.app.stop(), second.app.stop()]);
  });
});
