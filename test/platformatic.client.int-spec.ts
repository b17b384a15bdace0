import { spawnSync } from 'child_process';
import { randomUUID } from 'crypto';
import { Kafka } from 'kafkajs';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic } from './support/kafka';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { nodeBinary } = require('../scripts/node/node-binary.js') as { nodeBinary(major: string): string };

interface Attempt {
  label: string;
  committed: boolean;
  producerEpoch?: number;
  error?: { message: string; kafkaErrors: string[] };
  retried: Array<{ operation: string; kafkaErrors: string[] }>;
}

/**
 * @platformatic/kafka (2.12.1, pinned: the maintained client issue 55 brings in as a second driver) against the real
 * broker, at the points where it is wrong or needs the driver's help: each probe (test/fixtures/platformatic-probe.mjs)
 * runs on Node.js 24, which the client needs, shows the defect and what the driver does about it. A release of the
 * client that fixes one turns its test red: the driver's answer can then go.
 */
describe('@platformatic/kafka against the real broker: what the driver answers', () => {
  let kafka: Kafka;
  let node: string;
  const topic = uniqueTopic('platformatic');

  beforeAll(async () => {
    kafka = testKafka();
    node = nodeBinary('24');
    await createTopics(kafka, [topic], 1);
  });

  function probe<T>(name: string, transactionalId: string, on = topic): T {
    const run = spawnSync(node, ['test/fixtures/platformatic-probe.mjs', name, on, transactionalId], {
      cwd: REPO_ROOT,
      env: { ...process.env, KAFKA_BROKERS: kafkaBrokers().join(',') },
      encoding: 'utf8',
      timeout: 120000,
    });
    if (run.status !== 0) throw new Error(`probe ${name} exited ${run.status} (${run.signal ?? 'no signal'}):\n${run.stdout}\n${run.stderr}`);
    return JSON.parse(run.stdout.trim().split('\n').pop() as string) as T;
  }

  it('refuses a new producer of a transactional id used before, even after a clean close (InitProducerId PRODUCER_FENCED: it asks with producer id 0 and epoch 0, not -1 and -1); asked with -1 and -1, it takes the id over and commits', async () => {
    const transactionalId = `platformatic-reuse-${randomUUID()}`;
    const { first, fresh, defaults, again } = probe<Record<'first' | 'fresh' | 'defaults' | 'again', Attempt>>('reuse-transactional-id', transactionalId);
    expect(first).toMatchObject({ committed: true, producerEpoch: 0 }); // a new id: the broker ignores what it is asked
    // The driver's answer: a new producer of that id asks as Kafka's own clients do (the epoch bumped, the last owner fenced).
    expect(fresh).toMatchObject({ committed: true, producerEpoch: 1 });
    expect(defaults.committed).toBe(false);
    expect(defaults.error?.kafkaErrors).toEqual(['PRODUCER_FENCED']);
    expect(defaults.error?.message).toContain('InitProducerId');
    expect(again).toMatchObject({ committed: true, producerEpoch: 2 });
    // Read committed: what it said committed is there, and the refused one is not.
    const records = await readTopic(kafka, topic, { until: quietAfter(3, 1500), pollIdleMs: 250, timeoutMs: 30000 });
    expect(records.map((r) => r.key?.toString())).toEqual(['first', 'fresh', 'again']);
  });

  it('answers the AddPartitionsToTxn that follows a commit with CONCURRENT_TRANSACTIONS (the coordinator still writing the markers), which its retryDelay getter sees with the operation, so that the driver waits milliseconds for it and not the default second', () => {
    const { committed, retried, error } = probe<{ committed: number; retried: Attempt['retried']; error?: unknown }>('concurrent-transactions', `platformatic-concurrent-${randomUUID()}`);
    expect(error).toBeUndefined();
    expect(committed).toBe(10);
    const concurrent = retried.filter((r) => r.kafkaErrors.includes('CONCURRENT_TRANSACTIONS'));
    expect(concurrent.length).toBeGreaterThan(0);
    expect(new Set(concurrent.map((r) => r.operation))).toEqual(new Set(['addPartitionsToTransaction']));
  });

  it("hands a read-committed stream the records of an aborted transaction when the same producer aborted two in one fetch (its filter keeps one aborted transaction per producer id); the driver's group, reading through the same client, leaves both out", async () => {
    const aborted = uniqueTopic('platformatic-aborted');
    await createTopics(kafka, [aborted], 1);
    const { client, driver } = probe<{ client: string[]; driver: string[] }>('aborted-twice', `platformatic-aborted-${randomUUID()}`, aborted);
    expect(client).toEqual(['aborted-1.0', 'aborted-1.1', 'committed.0', 'committed.1']);
    expect(driver).toEqual(['committed.0', 'committed.1']);
    // KafkaJS, read committed through the library's room (another client's filter): the same two.
    const records = await readTopic(kafka, aborted, { until: quietAfter(2, 1500), pollIdleMs: 250, timeoutMs: 30000 });
    expect(records.map((r) => r.key?.toString())).toEqual(['committed.0', 'committed.1']);
  });
});
