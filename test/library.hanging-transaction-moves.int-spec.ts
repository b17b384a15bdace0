import { TestingModule } from '@nestjs/testing';
import { join } from 'path';
import { Kafka } from 'kafkajs';
import { REPO_ROOT } from './support/environment';
import { expectFiledOnce, filingSetup, handledThenHanging } from './support/filing';
import { KafkaHealthIndicator } from 'kafka-exactly-once';
import { createTopics, withAdmin } from './support/kafka';
import { CapturingLogger, queryDatabase, startLibraryModule } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';

/**
 * A hanging transaction of a partition's own producer when the partition moves (the member that aborts it dies at
 * each step, the next takes over) and when what its producer committed cannot be read: the committed outputs are
 * never sent again. Kept apart from library.hanging-transaction for its length (each case waits out a transaction
 * timeout and runs a member of its own): run on the first CI pass only.
 */

// The member each test starts in-process and the processes it starts, closed and killed after each test.
const processes = new ProcessGroup();
let moduleRef: TestingModule | undefined;

afterEach(async () => {
  await moduleRef?.close();
  moduleRef = undefined;
  await processes.killAll();
});

/**
 * What the abort learnt outlives the member that made it: the member that aborted the hanging transaction is
 * killed (a process of its own, SIGKILL at a fault point) before its replay of the records commits in Kafka, and
 * another member takes the partition and replays them. Whichever point the first died at, the outputs already
 * committed are not sent again.
 */
describe('library: a hanging transaction of the partition\'s own producer, aborted by a member that dies before its replay commits', () => {
  const POINTS = [
    ['after-hanging-abort', 'hanging-aborted'],
    ['after-db-commit', 'hanging-replayed'],
    ['before-hanging-abort', 'hanging-read'],
  ] as const;

  /** One kill point, with topics, group and database of its own; each member a process of its own, and so its log. */
  async function killedAt(point: (typeof POINTS)[number][0], label: string): Promise<void> {
    const setup = await filingSetup(label, ['n-1', 'n-2']);
    const hanging = await handledThenHanging(setup);
    const { kafka, group, topic, env } = setup;

    const first = processes.add(new AppProcess(`hanging-${point}`, 'test/fixtures/filing-app.js', { ...env, KAFKA_EO_FAULT: `${point}:1` }, join(REPO_ROOT, 'test-logs', `hanging-moved-${point}.log`)));
    expect(await first.waitForExit(90000)).toBeNull(); // killed by its own SIGKILL
    expect(first.logs()).toContain(`fault injection: SIGKILL at ${point} #1`);
    // What the first member left in PostgreSQL for the next: the two outputs found committed, counted once each
    // (offset -1), and, its replay committed in PostgreSQL, what each replayed record took (at its offset).
    const kept = await queryDatabase<{ offset: number; count: number }>(setup.databaseUrl, `SELECT "offset"::int, count FROM kafka_eo_committed_outputs ORDER BY "offset", count`);
    expect(kept).toEqual(point === 'after-db-commit' ? [{ offset: -1, count: 0 }, { offset: -1, count: 0 }, { offset: 0, count: 1 }, { offset: 1, count: 1 }] : [{ offset: -1, count: 1 }, { offset: -1, count: 1 }]);

    const next = processes.add(new AppProcess(`hanging-${point}-next`, 'test/fixtures/filing-app.js', env, join(REPO_ROOT, 'test-logs', `hanging-moved-${point}-next.log`)));
    await waitForGroupCaughtUp(kafka, group, topic, 90000);
    await expectFiledOnce(setup);
    // Past the records they were for, the rows are gone.
    await waitUntil(async () => (await queryDatabase(setup.databaseUrl, 'SELECT 1 FROM kafka_eo_committed_outputs')).length === 0, 10000, 'the rows deleted');
    await next.stop(); // SIGTERM: its log whole
    // The first member read what its producer had committed before its abort; the next one aborted only when the first had not.
    expect(first.logs()).toContain(': 2 records of its own producer found committed since ');
    if (point !== 'before-hanging-abort') expect(first.logs()).toContain(`hanging transaction aborted {"group":"${group}"`);
    const abortedNext = next.logs().split('\n').filter((line) => line.includes('hanging transaction aborted {'));
    if (point === 'before-hanging-abort') {
      expect(abortedNext).toHaveLength(1);
      expect(abortedNext[0]).toContain(`"producerId":"${hanging.producerId}"`);
    } else expect(abortedNext).toEqual([]);
  }

  // The three points side by side (each waits out a transaction timeout, mostly idle): a failure names its point.
  it(`killed at ${POINTS.map(([point]) => point).join(', ')} (the abort written, nothing replayed yet; its replay committed in PostgreSQL, not in Kafka; what its producer committed kept, the abort not written: the next member finds the transaction and aborts it): the next member sends none of the committed outputs again`, async () => {
    const outcomes = await Promise.allSettled(POINTS.map(([point, label]) => killedAt(point, label)));
    const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [`killed at ${POINTS[i][0]}: ${(o.reason as Error)?.message ?? String(o.reason)}`] : []));
    expect(failed).toEqual([]);
  });
});

/**
 * A topic the partition's producer may write, deleted once the member has started (its boot checks passed): no read
 * of what that producer committed is whole while it is gone (its partitions cannot be read).
 */
async function deleteTopic(kafka: Kafka, topic: string): Promise<void> {
  await withAdmin(kafka, (admin) => admin.deleteTopics({ topics: [topic], timeout: 30000 }));
  await waitUntil(async () => !(await withAdmin(kafka, (admin) => admin.listTopics())).includes(topic), 30000, `${topic} deleted`);
}

/**
 * The library reads what the partition's own producer committed before it aborts the producer's hanging
 * transaction; a read that fails or stops short would leave outputs Kafka already holds out of what it keeps, and
 * the replay would send them again. So the abort waits (the partition held, health saying why) and the partition
 * reads again; after COMMITTED_READS_BEFORE_ABORT (3) such reads in a row it aborts anyway, saying so at error level,
 * and what an earlier member read whole is kept.
 */
describe('library: a hanging transaction of the partition\'s own producer, what it committed not readable', () => {
  const abortedLines = (logger: CapturingLogger) => logger.lines.filter((l) => l.message.startsWith('hanging transaction aborted'));
  const abortedAnyway = (logger: CapturingLogger) => logger.lines.filter((l) => l.level === 'error' && /its hanging transaction is aborted anyway/.test(l.message));

  it('is not aborted while the read fails, health saying why; read whole once the topic is back, aborted, and nothing is sent again', async () => {
    const setup = await filingSetup('hanging-unread', ['n-1', 'n-2']);
    await handledThenHanging(setup);
    const { kafka, group, topic, archive, FilingModule } = setup;
    const logger = new CapturingLogger({ logLevels: ['log', 'warn', 'error'] });
    moduleRef = await startLibraryModule(FilingModule, logger);
    await deleteTopic(kafka, archive);
    const health = moduleRef.get(KafkaHealthIndicator);
    let message = '';
    await waitUntil(
      async () => {
        message = ((await health.isHealthy('kafka')).kafka as { message?: string }).message ?? '';
        return /did not abort it yet/.test(message);
      },
      60000,
      'health naming the read that failed',
    );
    expect(message).toMatch(/the outputs its own producer already committed were not (all )?read \(.*\); it reads them again \(read 1 of 3\)/);
    expect(message).toContain(archive);
    expect(abortedLines(logger)).toEqual([]);
    // The way out: the topic is back (its partitions readable); the next read is whole.
    await createTopics(kafka, [archive], 1);
    await waitForGroupCaughtUp(kafka, group, topic, 90000);
    await expectFiledOnce(setup);
    expect(abortedLines(logger)).toHaveLength(1);
    expect(abortedAnyway(logger)).toEqual([]);
  });

  it('after the last read in a row that fails, aborted anyway at error level; what a member read whole before it died is kept, and nothing is sent again', async () => {
    const setup = await filingSetup('hanging-unread-kept', ['n-1', 'n-2']);
    await handledThenHanging(setup);
    const { kafka, group, topic, env, databaseUrl } = setup;
    // A member reads whole what the producer committed, keeps it in PostgreSQL, and dies before its abort.
    const first = processes.add(new AppProcess('hanging-unread-first', 'test/fixtures/filing-app.js', { ...env, KAFKA_EO_FAULT: 'before-hanging-abort:1' }, join(REPO_ROOT, 'test-logs', 'hanging-unread-first.log')));
    expect(await first.waitForExit(90000)).toBeNull();
    expect(await queryDatabase(databaseUrl, `SELECT "offset"::int, count FROM kafka_eo_committed_outputs`)).toEqual([{ offset: -1, count: 1 }, { offset: -1, count: 1 }]);
    // The next one's reads all fail.
    const next = processes.add(new AppProcess('hanging-unread-next', 'test/fixtures/filing-app.js', { ...env, KAFKA_EO_FAULT: 'hanging-read:1:fail' }, join(REPO_ROOT, 'test-logs', 'hanging-unread-next.log')));
    await waitForGroupCaughtUp(kafka, group, topic, 120000);
    await expectFiledOnce(setup);
    const logs = next.logs();
    expect([...logs.matchAll(/its hanging transaction is not aborted yet: the partition waits and reads them again \(read (\d) of 3;/g)].map((m) => m[1])).toEqual(['1', '2']);
    expect(logs.match(/its hanging transaction is aborted anyway/g)).toHaveLength(1);
    expect(logs).toContain('were not read (fault injection: a failure at hanging-read), 3 reads in a row: its hanging transaction is aborted anyway');
    expect(logs.match(/hanging transaction aborted \{/g)).toHaveLength(1);
  });
});
