import { OutboxHealthIndicator } from 'kafka-exactly-once';
import { FAULT_ENV } from 'kafka-exactly-once/kafka-exactly-once.constants';
import { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { join } from 'path';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { CapturingLogger, queryDatabase } from './support/library';
import { outboxSuite } from './support/outbox';
import { waitUntil } from './support/payments';
import { AppProcess } from './support/processes';

/**
 * The outbox relay's own hanging transaction when part of its batch is already committed in Kafka (a broker crash
 * left the commit markers written on some of the events' partitions only): the relay takes the committed events out
 * of the outbox before it aborts, however it is cut short: killed before or after the abort, the checkpoint read's
 * deadline too short, reads that fail, the outbox's table locked. library.outbox has the abort itself. (Minutes of
 * transaction timeouts: CI's first pass runs it, on Node.js 20 against Kafka 4.4.)
 */
describe('library: the outbox relay\'s own hanging transaction, its batch partly committed', () => {
  const { processes, prefix, dir, startApp, outboxEmpty, readIds, expectOnceInOrder, leaveBatchPartlyCommitted } = outboxSuite('outbox-partly');

  /** A relay of `databaseUrl` as a process of its own (its log its own), optionally armed to kill itself at `fault`. */
  function relayProcess(name: string, databaseUrl: string, checkpoints: string, extra: Record<string, string> = {}): AppProcess {
    const env = { DATABASE_URL: databaseUrl, KAFKA_BROKERS: kafkaBrokers().join(','), OUTBOX_PREFIX: prefix, OUTBOX_SCHEMAS: dir, OUTBOX_CHECKPOINTS: checkpoints, OUTBOX_TRANSACTION_TIMEOUT_MS: '5000', ...extra };
    return processes.add(new AppProcess(name, 'test/fixtures/outbox-app.js', env, join(REPO_ROOT, 'test-logs', `${name}.log`)));
  }

  const abortLines = (relay: AppProcess) => relay.logs().split('\n').filter((line) => line.includes('hanging transaction aborted {'));

  /**
   * The relay aborts such a transaction and sends the batch again: without the events Kafka already holds
   * committed, also when the relay that aborted it is killed right before or after the abort and another takes over.
   */
  async function killedAt(point: 'after-hanging-abort' | 'before-hanging-abort'): Promise<void> {
    const { databaseUrl, ids, checkpoints } = await leaveBatchPartlyCommitted(`outbox-sent-${point}`);
    const first = relayProcess(`outbox-hanging-${point}`, databaseUrl, checkpoints, { KAFKA_EO_FAULT: `${point}:1` });
    expect(await first.waitForExit(90000)).toBeNull(); // killed by its own SIGKILL
    expect(first.logs()).toContain(`fault injection: SIGKILL at ${point} #1`);
    // What the first relay left for the next: the row of the one event its producer had not committed.
    expect(await queryDatabase(databaseUrl, 'SELECT id, batch::int FROM kafka_eo_outbox')).toEqual([{ id: ids[2], batch: 1 }]);
    const next = relayProcess(`outbox-hanging-${point}-next`, databaseUrl, checkpoints);
    await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed');
    // Read committed: every event once, in order.
    expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    await next.stop(); // SIGTERM: its log whole
    // The first relay found them before its abort; the second aborted only when the first had not.
    expect(first.logs()).toMatch(/2 events of the outbox found committed in Kafka by its own producer/);
    expect(abortLines(next)).toHaveLength(point === 'before-hanging-abort' ? 1 : 0);
  }

  /**
   * The read of what its producer committed has time of its own: a checkpoint read's deadline (outbox.sendTimeoutMs)
   * too short for it, the abort coming due anywhere in it, cuts it short no more.
   */
  async function shortSendTimeout(): Promise<void> {
    const { databaseUrl, ids, checkpoints } = await leaveBatchPartlyCommitted('outbox-sent-short');
    const relay = relayProcess('outbox-hanging-short', databaseUrl, checkpoints, { OUTBOX_SEND_TIMEOUT_MS: '5000' });
    await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed');
    expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    await relay.stop(); // SIGTERM: its log whole
    expect(relay.logs()).toMatch(/: 2 events of the outbox found committed in Kafka by its own producer/);
    expect(abortLines(relay)).toHaveLength(1);
  }

  // Side by side (each waits out a transaction timeout, mostly idle; each has a database, an outbox id and so a
  // producer of its own): a failure names its case.
  it('aborts a hanging transaction of its own producer whose events are committed on some partitions, and sends only the others again: the relay killed at after-hanging-abort, at before-hanging-abort, and reading what its own producer committed in time of its own, however little the checkpoint read has left', async () => {
    const cases: Array<[string, () => Promise<void>]> = [
      ['killed at after-hanging-abort', () => killedAt('after-hanging-abort')],
      ['killed at before-hanging-abort', () => killedAt('before-hanging-abort')],
      ['a 5 s sendTimeoutMs', shortSendTimeout],
    ];
    const outcomes = await Promise.allSettled(cases.map(([, run]) => run()));
    const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [`${cases[i][0]}: ${(o.reason as Error)?.message ?? String(o.reason)}`] : []));
    expect(failed).toEqual([]);
  });

  /**
   * A read of what its producer committed that fails leaves the transaction open (the relay waits, health says why)
   * and is tried again; after COMMITTED_READS_BEFORE_ABORT (3) such reads in a row the relay aborts it anyway, at
   * error level, and sends the batch again: nothing lost, and the events its producer had committed, which no read
   * found, a second time (with the same message ids), as the error says.
   */
  it('leaves its own hanging transaction open while reads of what its producer committed fail, health saying why; after the third, aborts it anyway at error level, losing nothing', async () => {
    const { databaseUrl, ids, checkpoints } = await leaveBatchPartlyCommitted('outbox-sent-unread');
    const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
    // Every read fails (the relay's fault injector, armed as it is made).
    process.env[FAULT_ENV] = 'hanging-read:1:fail';
    let moduleRef: TestingModule;
    try {
      ({ moduleRef } = await startApp(databaseUrl, { relay: true, checkpointTopic: checkpoints, transactionTimeoutMs: 5000, logger }));
    } finally {
      delete process.env[FAULT_ENV];
    }
    let lastError = '';
    await waitUntil(
      async () => {
        lastError = ((await moduleRef.get(OutboxHealthIndicator).isHealthy('outbox')).outbox as { lastError?: string }).lastError ?? '';
        return /is not aborted yet/.test(lastError);
      },
      60000,
      'health naming the read that failed',
    );
    expect(lastError).toMatch(/the events its producer already committed were not read \(fault injection: a failure at hanging-read\); the relay reads them again in 10 s \(read 1 of 3;/);
    expect(logger.lines.filter((l) => l.message.includes('hanging transaction aborted'))).toEqual([]);
    await waitUntil(() => outboxEmpty(databaseUrl), 120000, 'the outbox relayed');
    const waited = logger.lines.filter((l) => l.level === 'warn' && /is not aborted yet/.test(l.message)).map((l) => /\(read (\d) of 3;/.exec(l.message)?.[1]);
    expect(waited).toEqual(['1', '2']);
    expect(logger.lines.filter((l) => l.level === 'error' && /is aborted anyway, so that the relay moves/.test(l.message))).toHaveLength(1);
    const counts = new Map<string, number>();
    for (const r of await readIds(ids, { quietMs: 3000 })) counts.set(r.headers['message-id'], (counts.get(r.headers['message-id']) ?? 0) + 1);
    expect(ids.map((id) => counts.get(id))).toEqual([2, 2, 1]);
  });

  /**
   * Taking the committed events out of the outbox fails for a while (here: a lock held on the outbox table, so the
   * relay's DELETE runs into its statement timeout): the relay says what is happening, once, not at every try,
   * and aborts nothing until it can; then every event once.
   */
  it('says, once, that its own hanging transaction waits while the events already committed cannot be taken out of the outbox, and aborts it once they are', async () => {
    const { databaseUrl, ids, checkpoints } = await leaveBatchPartlyCommitted('outbox-sent-locked');
    const lock = new Client({ connectionString: databaseUrl });
    await lock.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE kafka_eo_outbox IN SHARE MODE'); // reads go on, writes wait
      const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
      const { moduleRef } = await startApp(databaseUrl, { relay: true, checkpointTopic: checkpoints, transactionTimeoutMs: 5000, sendTimeoutMs: 5000, logger });
      const waiting = () => logger.lines.filter((l) => /could not be taken out of the outbox first/.test(l.message));
      await waitUntil(async () => waiting().length > 0, 60000, 'the relay saying why it waits');
      expect(waiting()[0].message).toMatch(/its own hanging transaction \S+ on \S+\[0\] is not ended yet \(the events its producer already committed could not be taken out of the outbox first \(.*statement timeout.*\), so it is not aborted yet\); the relay tries again/);
      const health = (await moduleRef.get(OutboxHealthIndicator).isHealthy('outbox')).outbox as { lastError?: string };
      expect(health.lastError).toContain('could not be taken out of the outbox first');
      // It tries again meanwhile (a try every few seconds here), without saying it again each time.
      await new Promise((r) => setTimeout(r, 20000));
      expect(waiting()).toHaveLength(1);
      expect(logger.lines.filter((l) => l.message.includes('hanging transaction aborted'))).toEqual([]);
      await lock.query('COMMIT');
      await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed');
      expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    } finally {
      await lock.end();
    }
  });
});
