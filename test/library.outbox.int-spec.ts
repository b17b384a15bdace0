import { ConfigResourceTypes } from 'kafkajs';
import type { KafkaClient } from 'kafka-exactly-once/kafkajs';
import { EventValidationError, OutboxHealthIndicator, OutboxWriteError, UndeclaredTopicError } from 'kafka-exactly-once';
import { runKafkaEo } from 'kafka-exactly-once/cli/kafka-eo.command';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { MARK_STATEMENT, RELAY_SESSION_SETTINGS } from 'kafka-exactly-once/outbox/outbox-relay';
import { Client } from 'pg';
import { createSuiteDatabase } from './support/database';
import { createTopics, quietAfter, readTopic, withAdmin } from './support/kafka';
import { CapturingLogger, queryDatabase } from './support/library';
import { outboxSuite } from './support/outbox';
import { waitUntil } from './support/payments';
import { kafkaControlAsync } from './support/broker';

/**
 * The transactional outbox against the real broker and PostgreSQL: an event written with `Outbox.add` in the
 * caller's transaction reaches Kafka exactly once (read committed) if and only if that transaction committed,
 * the events of a key in their writers' commit order, whatever the relay crashes on; a relay that is not the
 * active one sends nothing; an event Kafka refuses for good is set aside and the others move.
 */
describe('library: the transactional outbox', () => {
  const suite = outboxSuite();
  const { prefix, checkpointTopic, schema, startApp, startRelay, write, outboxEmpty, readIds, expectOnceInOrder, leaveRelayHanging } = suite;
  let kafka: KafkaClient;

  beforeAll(() => {
    kafka = suite.kafka();
  });

  it('commits an event with the caller\'s transaction, with the direct path\'s key, value and headers; a rolled-back one never appears; a bad one throws before the commit', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-write');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const { outbox, dataSource, moduleRef } = await startApp(databaseUrl, { relay: true });

    const committed: string[] = [];
    for (let n = 1; n <= 12; n++) committed.push(...(await write(dataSource, outbox, [{ account: `acct-${n % 3}`, n, note: 'ok' }])));
    const rolledBack: string[] = [];
    for (let n = 100; n < 104; n++) rolledBack.push(...(await write(dataSource, outbox, [{ account: `acct-${n % 3}`, n }], { rollBack: true })));

    // Refused before anything is written, and the caller's transaction goes on.
    let kept = '';
    await dataSource.transaction(async (manager) => {
      await expect(outbox.add(manager, 'nope', { account: 'a', n: 1 })).rejects.toBeInstanceOf(UndeclaredTopicError);
      await expect(outbox.add(manager, 'entries', { account: 'a', n: 'one' })).rejects.toBeInstanceOf(EventValidationError);
      await expect(outbox.add(manager, 'small', { account: 'a', n: 1 })).rejects.toThrow(/key/);
      await expect(outbox.add(manager, 'entries', { account: 'a', n: 1 }, { messageId: 'a\u0000b' })).rejects.toMatchObject({ refusal: 'invalid-message-id' });
      kept = (await outbox.add(manager, 'entries', { account: 'acct-0', n: 1000 }, { messageId: 'given-id-\u00e9', headers: { 'x-trace': 'abc\u0000def' } })).messageId;
    });
    committed.push(kept);
    await expect(outbox.add(dataSource.manager, 'entries', { account: 'a', n: 1 })).rejects.toMatchObject({ refusal: 'not-in-transaction' });
    await expect(outbox.add(dataSource.manager, 'entries', { account: 'a', n: 1 })).rejects.toBeInstanceOf(OutboxWriteError);

    const everything = await readTopic(kafka, `${prefix}entries`, { until: quietAfter(committed.length, 2000), pollIdleMs: 250, timeoutMs: 60000 });
    const records = everything.filter((r) => committed.includes(r.headers['message-id']));
    expectOnceInOrder(records, committed);
    for (const id of rolledBack) expect(everything.map((r) => r.headers['message-id'])).not.toContain(id);
    const given = records.find((r) => r.headers['message-id'] === 'given-id-\u00e9')!;
    expect(given.value).toEqual(encodeSingleObject(schema, { account: 'acct-0', n: 1000, note: '' }));
    expect(given.headers['event-type']).toBe('test.outbox.Entry');
    expect(given.headers['x-trace']).toBe('abc\u0000def');
    await waitUntil(() => outboxEmpty(databaseUrl), 15000, 'the relayed rows cleaned up');
    const [relay] = await queryDatabase(databaseUrl, 'SELECT name, relayed::int FROM kafka_eo_outbox_relay');
    expect(relay).toEqual({ name: `${prefix}app`, relayed: committed.length });
    const health = await moduleRef.get(OutboxHealthIndicator).isHealthy('outbox');
    expect(health.outbox).toMatchObject({ status: 'up', waiting: 0, relay: 'active', setAside: 0 });
    await moduleRef.close();
  });

  it('keeps per-key commit order when writers interleave, and never skips an event whose transaction commits late', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-order');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    await queryDatabase(databaseUrl, 'CREATE TABLE counters (account text PRIMARY KEY, n int NOT NULL)');
    await queryDatabase(databaseUrl, 'CREATE TABLE commits (account text, n int, message_id text, position bigint)');
    const { outbox, dataSource, moduleRef } = await startApp(databaseUrl, { relay: true });

    // T1 writes first (an event of account A, then one of K); T2 writes K in between and commits first.
    const t1 = dataSource.createQueryRunner();
    const t2 = dataSource.createQueryRunner();
    await t1.startTransaction();
    await t2.startTransaction();
    const a1 = await outbox.add(t1, 'entries', { account: 'A', n: 1, note: 't1' });
    const k2 = await outbox.add(t2, 'entries', { account: 'K', n: 1, note: 't2' });
    let k1Done = false;
    const k1 = outbox.add(t1, 'entries', { account: 'K', n: 2, note: 't1' }).then((r) => ((k1Done = true), r));
    await new Promise((r) => setTimeout(r, 500));
    expect(k1Done).toBe(false); // waits for T2, which holds K
    await t2.commitTransaction();
    const k1Result = await k1;
    expect(BigInt(k1Result.position)).toBeGreaterThan(BigInt(k2.position));
    expect(BigInt(a1.position)).toBeLessThan(BigInt(k2.position));
    // The relay moves past T2's event while T1 is still open.
    await readIds([k2.messageId], { quietMs: 0 });
    await t1.commitTransaction();
    await t1.release();
    await t2.release();
    const records = await readIds([a1.messageId, k2.messageId, k1Result.messageId]);
    const ids = records.map((r) => r.headers['message-id']);
    expect([...ids].sort()).toEqual([a1.messageId, k2.messageId, k1Result.messageId].sort());
    expect(records.filter((r) => r.key === 'K').map((r) => r.headers['message-id'])).toEqual([k2.messageId, k1Result.messageId]);

    // Many writers over few accounts; each takes its commit turn (a counter's row lock) only after its add, and
    // some roll back: per account, Kafka's order must be the counters' order.
    const accounts = ['P', 'Q', 'R'];
    await queryDatabase(databaseUrl, `INSERT INTO counters VALUES ${accounts.map((a) => `('${a}', 0)`).join(', ')}`);
    const writer = async (w: number) => {
      for (let i = 0; i < 15; i++) {
        const account = accounts[(w + i) % accounts.length];
        await dataSource
          .transaction(async (manager) => {
            const { messageId, position } = await outbox.add(manager, 'entries', { account, n: 1, note: `w${w}` });
            await new Promise((r) => setTimeout(r, (w * 7 + i * 3) % 11));
            await manager.query('WITH c AS (UPDATE counters SET n = n + 1 WHERE account = $1 RETURNING n) INSERT INTO commits SELECT $1, n, $2, $3 FROM c', [account, messageId, position]);
            if ((w + i) % 5 === 0) throw new Error('rolled back on purpose');
          })
          .catch((err) => {
            if (!/on purpose/.test(err.message)) throw err;
          });
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(writer));
    const commits = await queryDatabase<{ account: string; n: number; message_id: string; position: string }>(databaseUrl, 'SELECT account, n, message_id, position::text FROM commits ORDER BY account, n');
    // The positions follow the commit order of each account's writers.
    for (const account of accounts) {
      const positions = commits.filter((c) => c.account === account).map((c) => BigInt(c.position));
      expect(positions).toEqual([...positions].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    }
    expect(commits.length).toBe(6 * 15 - 18);
    const all = await readIds(commits.map((c) => c.message_id));
    for (const account of accounts) {
      const inKafka = all.filter((r) => r.key === account).map((r) => r.headers['message-id']);
      expect(inKafka).toEqual(commits.filter((c) => c.account === account).map((c) => c.message_id));
    }
    await moduleRef.close();
  });

  it('sends every event exactly once, in order, whatever the relay is killed at', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-crash');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const { outbox, dataSource } = await startApp(databaseUrl, { relay: false });
    const ids: string[] = [];
    let n = 0;
    const writeSome = async (count: number) => {
      for (let i = 0; i < count; i++) {
        n++;
        ids.push(...(await write(dataSource, outbox, [{ account: `acct-${n % 4}`, n }])));
      }
    };
    // Between its Kafka commit and its clean-up; before its Kafka commit (the batch aborted, sent again); after
    // a clean-up; and once more before a commit with the batch of an earlier relay still pending.
    for (const fault of ['outbox-after-kafka-commit:2', 'outbox-before-kafka-commit:2', 'outbox-after-cleanup:3', 'outbox-before-kafka-commit:1']) {
      await writeSome(20);
      const relay = startRelay(databaseUrl, fault);
      expect(await relay.waitForExit(60000)).toBeNull(); // killed by its own SIGKILL
      expect(relay.logs()).toContain(`fault injection: SIGKILL at ${fault.split(':')[0]}`);
    }
    await writeSome(10);
    const relay = startRelay(databaseUrl);
    await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed');
    expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    // The batches cut short before their commit were written, and aborted: a read-uncommitted reader sees them.
    expect((await readIds(ids, { readUncommitted: true })).length).toBeGreaterThan(ids.length);
    expect(await relay.stop()).toBe(0);
  });

  it('gives out each batch from the waiting index, in position order, whatever the table\'s statistics say (no read or sort of the whole backlog)', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-plan');
    await startApp(databaseUrl, { relay: false }); // the outbox's tables
    // Statistics of an empty outbox, then a backlog they do not know of (as after a Kafka outage).
    await queryDatabase(databaseUrl, `INSERT INTO kafka_eo_outbox_relay (id, name) VALUES (1, 'plan')`);
    await queryDatabase(databaseUrl, 'ANALYZE kafka_eo_outbox');
    await queryDatabase(databaseUrl, `INSERT INTO kafka_eo_outbox (id, aggregatetype, aggregateid, type, payload, headers) SELECT 'e' || g, 't', '\\x00', 'T', '\\x00', '\\x00' FROM generate_series(1, 50000) g`);
    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      for (const setting of RELAY_SESSION_SETTINGS) await db.query(setting);
      await db.query('BEGIN');
      const [{ 'QUERY PLAN': plan }] = (await db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${MARK_STATEMENT}`, [500, 512 * 1024])).rows;
      await db.query('ROLLBACK');
      // The first 500 waiting events read by the waiting index (one more for the window), never all 50,000.
      const nodes: Array<Record<string, any>> = [];
      const walk = (node: Record<string, any>) => {
        nodes.push(node);
        for (const child of node.Plans ?? []) walk(child);
      };
      walk(plan[0].Plan);
      expect(nodes.filter((n) => n['Node Type'] === 'Sort')).toEqual([]);
      const scans = nodes.filter((n) => n['Relation Name'] === 'kafka_eo_outbox' && n['Node Type'] !== 'ModifyTable' && n['Index Name'] !== 'kafka_eo_outbox_pkey');
      expect(scans.map((n) => [n['Node Type'], n['Index Name'], n['Actual Rows']])).toEqual([['Index Scan', 'kafka_eo_outbox_waiting', 501]]);
    } finally {
      await db.end();
    }
  });

  it('has one active relay however many run; a standby takes over when the active one dies, and nothing is sent twice', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-two');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const { outbox, dataSource } = await startApp(databaseUrl, { relay: false });
    const first = startRelay(databaseUrl);
    await first.waitForLog(/outbox relay .* active/, 30000);
    const second = startRelay(databaseUrl);
    const ids: string[] = [];
    let n = 0;
    const writing = (async () => {
      for (let i = 0; i < 120; i++) {
        n++;
        ids.push(...(await write(dataSource, outbox, [{ account: `acct-${n % 5}`, n }])));
        if (i === 60) await first.kill();
      }
    })();
    await writing;
    await second.waitForLog(/outbox relay .* active/, 30000);
    expect(first.logs()).toMatch(/outbox relay .* active/);
    await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed');
    expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    // Its connection cut (a PostgreSQL restart, as the relay sees it): the relay starts over and loses nothing.
    await queryDatabase(databaseUrl, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kafka-eo outbox relay' AND datname = current_database()`);
    const later = await write(dataSource, outbox, [{ account: 'acct-9', n: 1 }, { account: 'acct-9', n: 2 }]);
    await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed after the cut');
    expectOnceInOrder(await readIds([...ids, ...later]), [...ids, ...later]);
    await second.stop();
  });

  it('keeps taking writes while the broker is killed, and relays them once, in order, when it is back', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-broker');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const { outbox, dataSource, moduleRef } = await startApp(databaseUrl, { relay: true });
    const ids: string[] = [];
    for (let n = 1; n <= 20; n++) ids.push(...(await write(dataSource, outbox, [{ account: `acct-${n % 4}`, n }])));
    await kafkaControlAsync('kill');
    // Writes commit in PostgreSQL while Kafka is away; the relay fails its sends and waits.
    for (let n = 21; n <= 60; n++) ids.push(...(await write(dataSource, outbox, [{ account: `acct-${n % 4}`, n }])));
    const [{ waiting }] = await queryDatabase(databaseUrl, 'SELECT count(*)::int AS waiting FROM kafka_eo_outbox');
    expect(waiting).toBeGreaterThan(0);
    await kafkaControlAsync('start');
    for (let n = 61; n <= 70; n++) ids.push(...(await write(dataSource, outbox, [{ account: `acct-${n % 4}`, n }])));
    await waitUntil(() => outboxEmpty(databaseUrl), 90000, 'the outbox relayed after the broker came back');
    expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    await moduleRef.close();
  });

  it('reads its checkpoint past another producer\'s open transaction on the checkpoint partition, and sends nothing twice', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-lso');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const { outbox, dataSource } = await startApp(databaseUrl, { relay: false });
    const first = startRelay(databaseUrl, 'outbox-after-kafka-commit:1');
    await first.waitForLog(/outbox relay .* active/, 30000);
    // Another application's relay, stalled inside its Kafka transaction on the shared checkpoint topic.
    const other = kafka.producer({ transactionalId: `${prefix}other-relay`, maxInFlightRequests: 1, idempotent: true });
    await other.connect();
    const open = await other.transaction();
    await open.send({ topic: checkpointTopic, messages: [{ key: 'another-relay:x', value: '{"batch":"1"}' }] });
    // This relay's batch and checkpoint commit after the other's transaction began; it is killed before its clean-up.
    const ids: string[] = [];
    await dataSource.transaction(async (manager) => {
      for (let n = 1; n <= 7; n++) ids.push((await outbox.add(manager, 'entries', { account: `acct-${n % 3}`, n })).messageId);
    });
    expect(await first.waitForExit(60000)).toBeNull();
    const second = startRelay(databaseUrl);
    // It waits, the last stable offset held by the open transaction, and names its holder (DescribeProducers and
    // ListTransactions), as it would a hanging one.
    const escaped = `${prefix}other-relay`.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    await second.waitForLog(new RegExp(`holds an open transaction \\(last stable offset \\d+, high watermark \\d+\\), held by transactional id ${escaped} \\(producer id \\d+, epoch \\d+, since offset \\d+, Ongoing\\); waiting for it to end`), 30000);
    expect(second.logs()).not.toMatch(/outbox relay .* active/);
    await open.abort();
    await other.disconnect();
    await second.waitForLog(/outbox relay .* active.*batch 1 is the last in Kafka/, 30000);
    await waitUntil(() => outboxEmpty(databaseUrl), 30000, 'the outbox cleaned up');
    expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    await second.stop();
  });

  it('aborts a hanging transaction of its own producer whose batch is still in the outbox, and relays every event once', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-hanging');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const writer = await startApp(databaseUrl, { relay: false });
    const ids = await write(writer.dataSource, writer.outbox, [1, 2, 3].map((n) => ({ account: `acct-${n}`, n })));
    const checkpoints = `${prefix}checkpoints-hanging`;
    const { own } = await leaveRelayHanging(databaseUrl, checkpoints, { batch: 1, relayed: 0 });
    const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
    await startApp(databaseUrl, { relay: true, checkpointTopic: checkpoints, transactionTimeoutMs: 5000, logger });
    await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed');
    const aborted = logger.lines.find((l) => l.message.includes('hanging transaction aborted'));
    expect(aborted?.message).toContain(`"transactionalId":"${own}"`);
    expect(aborted?.message).toContain(`${checkpoints}[0]`);
    expect(aborted?.message).toContain(`${prefix}entries[1]`);
    // Read committed, every event once and in order; the hanging transaction's records were aborted, not committed.
    expectOnceInOrder(await readIds(ids, { quietMs: 2000 }), ids);
    const committed = await readTopic(kafka, `${prefix}entries`, { until: quietAfter(0, 2000), pollIdleMs: 250, timeoutMs: 30000 });
    expect(committed.filter((r) => r.key === 'hanging')).toEqual([]);
  });

  it('commits a hanging transaction of its own producer whose batch the database counts relayed: its event appears once', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-hanging-done');
    const checkpoints = `${prefix}checkpoints-hanging-done`;
    // Batch 1 was answered committed (the database counts it relayed, its rows deleted), and its markers never written.
    const id = `hanging-done-${Date.now()}`;
    const value = encodeSingleObject(schema, { account: 'acct-done', n: 1 });
    await startApp(databaseUrl, { relay: false });
    const { own } = await leaveRelayHanging(databaseUrl, checkpoints, { batch: 1, relayed: 1, records: [{ topic: `${prefix}entries`, partition: 1, key: 'acct-done', value, headers: { 'message-id': id } }] });
    const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
    await startApp(databaseUrl, { relay: true, checkpointTopic: checkpoints, transactionTimeoutMs: 5000, logger });
    await waitUntil(async () => logger.lines.some((l) => /outbox relay .* active/.test(l.message)) || logger.lines.some((l) => l.message.includes('hanging transaction committed')), 60000, 'the hanging transaction ended');
    const ended = logger.lines.find((l) => l.message.includes('hanging transaction committed'));
    expect(ended?.message).toContain(`"transactionalId":"${own}"`);
    expect(ended?.message).toContain(`${prefix}entries[1]`);
    expect(logger.lines.filter((l) => l.message.includes('hanging transaction aborted'))).toEqual([]);
    // The event of the committed batch is visible once, read committed.
    expect((await readIds([id], { quietMs: 2000 })).map((r) => r.headers['message-id'])).toEqual([id]);
  });

  it('refuses to relay a database restored from an earlier backup (its checkpoint is ahead), and a checkpoint topic that is not compact only (delete, compact,delete)', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-restored');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const first = await startApp(databaseUrl, { relay: true });
    const ids = await write(first.dataSource, first.outbox, [{ account: 'r', n: 1 }]);
    await waitUntil(() => outboxEmpty(databaseUrl), 30000, 'relayed');
    await first.moduleRef.close();
    // As the database was before that batch: no batch given out, and an event written since the backup.
    await queryDatabase(databaseUrl, 'UPDATE kafka_eo_outbox_relay SET last_batch = 0, relayed_batch = 0');
    const again = await startApp(databaseUrl, { relay: true });
    await write(again.dataSource, again.outbox, [{ account: 'r', n: 2 }]);
    await waitUntil(async () => /checkpoint-ahead|restored from an earlier backup/.test(again.outbox.relayStatus()?.lastError ?? ''), 30000, 'the relay refusing');
    const [{ waiting }] = await queryDatabase(databaseUrl, 'SELECT count(*)::int AS waiting FROM kafka_eo_outbox');
    expect(waiting).toBe(1); // nothing deleted, nothing sent
    expect((await readIds(ids)).length).toBe(1);
    await again.moduleRef.close();

    // A checkpoint topic whose policy deletes (delete, or compact,delete: an idle outbox's newest checkpoint would
    // go with retention, and the relay would stop for good) is refused at the relay's start, nothing sent.
    const deleting = `${prefix}checkpoints-delete`;
    const compactDelete = `${prefix}checkpoints-compact-delete`;
    await createTopics(kafka, [deleting], 1);
    await createTopics(kafka, [{ topic: compactDelete, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact,delete' }] }]);
    for (const [topic, policy] of [[deleting, 'delete'], [compactDelete, 'compact,delete']]) {
      const policyDatabase = await createSuiteDatabase('outbox-cp-policy');
      await queryDatabase(policyDatabase, 'CREATE TABLE business (account text, n int)');
      const other = await startApp(policyDatabase, { relay: true, checkpointTopic: topic });
      const refusedIds = await write(other.dataSource, other.outbox, [{ account: 'p', n: 1 }]);
      await waitUntil(async () => (other.outbox.relayStatus()?.lastError ?? '').includes(`cleanup.policy=${policy}:`), 30000, `the relay refusing the topic with cleanup.policy=${policy}`);
      expect(other.outbox.relayStatus()?.lastError).toMatch(/Set cleanup\.policy=compact \(compact only\)/);
      await other.moduleRef.close();
      const [{ waiting }] = await queryDatabase(policyDatabase, 'SELECT count(*)::int AS waiting FROM kafka_eo_outbox');
      expect(waiting).toBe(1);
      expect(await withAdmin(kafka, async (admin) => Number((await admin.fetchTopicOffsets(topic))[0].high))).toBe(0);
      expect(refusedIds).toHaveLength(1);
    }
  });

  it('sets aside an event Kafka refuses for good, moves the others, and lets an operator retry or discard it, audited', async () => {
    const databaseUrl = await createSuiteDatabase('outbox-refused');
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const { outbox, dataSource, moduleRef } = await startApp(databaseUrl, { relay: false, name: 'refusing' });
    const big = 'x'.repeat(4000);
    const before = await write(dataSource, outbox, [{ account: 'r-1', n: 1 }]);
    const large = await write(dataSource, outbox, [{ account: 'r-1', n: 2, note: big }]);
    const large2 = await write(dataSource, outbox, [{ account: 'r-2', n: 3, note: big }]);
    const after = await write(dataSource, outbox, [{ account: 'r-1', n: 4 }, { account: 'r-2', n: 5 }]);
    await withAdmin(kafka, (admin) =>
      admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: `${prefix}entries`, configEntries: [{ name: 'max.message.bytes', value: '2000' }] }] }),
    );
    const relay = startRelay(databaseUrl, undefined, 'refusing');
    await waitUntil(() => outboxEmpty(databaseUrl), 60000, 'the outbox relayed but for the refused');
    const io = { out: [] as string[], err: [] as string[] };
    const cli = (...argv: string[]) => runKafkaEo([...argv, '--json'], { ...process.env, DATABASE_URL: databaseUrl }, { out: (t) => io.out.push(t), err: (t) => io.err.push(t) });
    expect(await cli('outbox', 'list')).toBe(0);
    const listed = JSON.parse(io.out.pop()!);
    expect(listed.map((e: { messageId: string }) => e.messageId).sort()).toEqual([...large, ...large2].sort());
    expect(listed[0].reason).toMatch(/MESSAGE_TOO_LARGE|larger than/);
    expect(relay.logs()).toMatch(/set aside/);

    // Discard one (a reason is required), retry the other once the topic takes it.
    expect(await cli('outbox', 'discard', listed[1].position)).toBe(2);
    expect(await cli('outbox', 'discard', listed[1].position, '--reason', 'superseded', '--actor', 'ops')).toBe(0);
    await withAdmin(kafka, (admin) =>
      admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: `${prefix}entries`, configEntries: [{ name: 'max.message.bytes', value: '100000' }] }] }),
    );
    expect(await cli('outbox', 'retry', listed[0].position, '--actor', 'ops')).toBe(0);
    expect(await cli('outbox', 'retry', listed[0].position)).toBe(4); // retried already
    const records = await readIds([...before, ...after, listed[0].messageId], { quietMs: 2000 });
    expect(records.map((r) => r.headers['message-id']).sort()).toEqual([...before, ...after, listed[0].messageId].sort());
    // The retried event went back behind the events of its key written since.
    expect(records.filter((r) => r.key === 'r-1').map((r) => r.headers['message-id'])).toEqual([before[0], after[0], listed[0].messageId]);
    expect(await cli('outbox', 'list', '--state', 'all')).toBe(0);
    const audited = JSON.parse(io.out.pop()!);
    expect(audited.map((e: { state: string; resolvedBy: string }) => [e.state, e.resolvedBy])).toEqual([
      ['retried', 'ops'],
      ['discarded', 'ops'],
    ]);

    // Once the topic's limit is known, an event over it is refused at the write, before the caller commits.
    await withAdmin(kafka, (admin) =>
      admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: `${prefix}small`, configEntries: [{ name: 'max.message.bytes', value: '1500' }] }] }),
    );
    await moduleRef.close();
    const restarted = await startApp(databaseUrl, { relay: false, name: 'refusing' });
    await waitUntil(
      async () => {
        try {
          await restarted.dataSource.transaction((m) => restarted.outbox.add(m, 'small', { account: 's', n: 1, note: big }, { key: 's' }).then(() => Promise.reject(new Error('written'))));
        } catch (err) {
          if (err instanceof OutboxWriteError && err.refusal === 'too-large') return true;
        }
        return false;
      },
      15000,
      'the write refused as too large',
    );
    expect(await relay.stop()).toBe(0);
  });
});
