import { createHash } from 'crypto';
import { DataSource } from 'typeorm';
import { InboxRetention } from 'kafka-exactly-once/inbox/inbox-retention';
import { runInboxMigrations } from 'kafka-exactly-once/inbox/inbox-migrator';
import { Pool } from 'pg';
import { CoordinateIdentities1764400800000, CreateKafkaEoInbox1764400000000, OneOpenOperation1764400500000, OperatorStore, pgPoolSql, UnitOutputs1764400700000 } from 'kafka-exactly-once';
import { coordinatesDigest, identify } from 'kafka-exactly-once/engine/record-identity';
import { InboxRepository, keyOf, MissingUnitOutputsError } from 'kafka-exactly-once/inbox/inbox.repository';
import type { OutputRecord } from 'kafka-exactly-once/engine/output-record';
import { createSuiteDatabase } from './support/database';

/** The inbox table from the library's own migrations, and the retention job that keeps it small. */
describe('library: inbox migrations and retention', () => {
  let dataSource: DataSource;

  beforeAll(async () => {
    dataSource = await new DataSource({ type: 'postgres', url: await createSuiteDatabase('inbox') }).initialize();
  });

  afterAll(async () => {
    await dataSource?.destroy();
  });

  it('creates the inbox once, even when several instances boot at the same time', async () => {
    await Promise.all([runInboxMigrations(dataSource), runInboxMigrations(dataSource), runInboxMigrations(dataSource)]);
    const applied = await dataSource.query(`SELECT name FROM kafka_eo_migrations`);
    expect(applied).toEqual([{ name: 'CreateKafkaEoInbox1764400000000' }, { name: 'InboxMessageDigests1764400200000' }, { name: 'InboxTakeovers1764400300000' }, { name: 'ParkedKeys1764400400000' }, { name: 'OneOpenOperation1764400500000' }, { name: 'Outbox1764400600000' }, { name: 'UnitOutputs1764400700000' }, { name: 'CoordinateIdentities1764400800000' }, { name: 'OperatorQueries1764400900000' }, { name: 'AuditDeclaredActor1764401000000' }, { name: 'OperatorPaging1764401100000' }, { name: 'CommittedOutputs1764401200000' }, { name: 'InstanceReports1764401300000' }, { name: 'BulkOperations1764401400000' }]);
    const columns = await dataSource.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'kafka_eo_inbox' ORDER BY ordinal_position`);
    expect(columns.map((c: { column_name: string }) => c.column_name)).toEqual([
      'consumer_group', 'message_id', 'topic', 'partition', 'offset', 'status', 'attempts', 'outputs', 'claimed_at', 'processed_at',
      'scope', 'id_digest', 'failures', 'last_error', 'taken_over', 'dlq_reason', 'dlq_error', 'replayed_at',
    ]);
    const tables = await dataSource.query(`SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'kafka_eo_%' ORDER BY table_name`);
    expect(tables.map((t: { table_name: string }) => t.table_name)).toEqual(
      expect.arrayContaining(['kafka_eo_audit', 'kafka_eo_committed_outputs', 'kafka_eo_inbox', 'kafka_eo_migrations', 'kafka_eo_parked_keys', 'kafka_eo_parked_records', 'kafka_eo_replays']),
    );
    const key = await dataSource.query(
      `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
       WHERE i.indrelid = 'kafka_eo_inbox'::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`,
    );
    expect(key.map((k: { attname: string }) => k.attname)).toEqual(['consumer_group', 'scope', 'id_digest']);
  });

  it('deletes processed rows older than the window, batch by batch, and keeps the rest', async () => {
    await runInboxMigrations(dataSource);
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, processed_at)
       SELECT 'g', 't', sha256(convert_to('old-' || n, 'UTF8')), 'old-' || n, 't', 0, n, 'processed', now() - interval '8 days' FROM generate_series(1, 25) n
       UNION ALL
       SELECT 'g', 't', sha256(convert_to('new-' || n, 'UTF8')), 'new-' || n, 't', 0, 100 + n, 'processed', now() - interval '6 days' FROM generate_series(1, 5) n`,
    );
    // The group committed every one of them in Kafka.
    const committed = async (_topic: string, partitions: number[]) => new Map(partitions.map((p) => [p, 1000n]));
    const retention = new InboxRetention(dataSource, 'g', committed, { retentionDays: 7, operationsRetentionDays: 30, retentionIntervalMs: 0, retentionBatchSize: 10 });
    expect(await retention.runOnce()).toBe(25);
    const left = await dataSource.query(`SELECT message_id FROM kafka_eo_inbox ORDER BY "offset"`);
    expect(left.map((r: { message_id: string }) => r.message_id)).toEqual(['new-1', 'new-2', 'new-3', 'new-4', 'new-5']);
    expect(await retention.runOnce()).toBe(0);
    // Another group's rows are its own retention's.
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, processed_at)
       VALUES ('other', 't', sha256(convert_to('x', 'UTF8')), 'x', 't', 0, 1, 'processed', now() - interval '8 days')`,
    );
    expect(await retention.runOnce()).toBe(0);
    await dataSource.query(`DELETE FROM kafka_eo_inbox`);
  });

  it('prunes settled operator rows older than operations.retentionDays, never open ones, and only its group', async () => {
    await runInboxMigrations(dataSource);
    const old = `now() - interval '31 days'`;
    await dataSource.query(
      `INSERT INTO kafka_eo_audit (consumer_group, action, topic, state, requested_at, finished_at) VALUES
         ('g', 'replay', 't', 'done', ${old}, ${old}), ('g', 'release', 't', 'failed', ${old}, ${old}),
         ('g', 'discard', 't', 'done', now(), now()), ('g', 'replay', 't', 'pending', ${old}, NULL),
         ('other', 'replay', 't', 'done', ${old}, ${old})`,
    );
    // An abort from the console whose process stopped half-way (running for an hour), and one in progress now.
    await dataSource.query(
      `INSERT INTO kafka_eo_audit (consumer_group, action, topic, state, requested_at, result) VALUES
         ('g', 'abort-transaction', 't', 'running', now() - interval '1 hour', '{"producerId": "7"}'), ('g', 'abort-transaction', 't', 'running', now(), NULL)`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_replays (consumer_group, topic, partition, audit_id, outputs, settled, created_at) VALUES
         ('g', 't', 0, 1, '[]', true, ${old}), ('g', 't', 0, 2, '[]', false, ${old}), ('g', 't', 0, 3, '[]', true, now())`,
    );
    const parked = (offset: number, state: string, resolved: string) =>
      `('g', 't', '\\x01', 0, ${offset}, 't', '\\x02', 'm-${offset}', 'handler-failed', '${state}', ${old}, ${resolved})`;
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, reason, state, parked_at, resolved_at) VALUES
         ${[parked(1, 'replayed', old), parked(2, 'discarded', old), parked(3, 'parked', 'NULL'), parked(4, 'replayed', 'now()')].join(', ')}`,
    );
    const bulk = (state: string, finished: string, group = 'g') =>
      `('${group}', 'dead-letters', 'replay', '{}', '${state}-${finished.length}', 'r', 1, '${state}', 1, now(), ${finished})`;
    await dataSource.query(
      `INSERT INTO kafka_eo_bulk_operations (consumer_group, kind, action, filter, filter_digest, reason, rate_per_second, state, matched, until, finished_at) VALUES
         ${[bulk('done', old), bulk('cancelled', old), bulk('done', 'now()'), bulk('running', 'NULL'), bulk('done', old, 'other')].join(', ')}`,
    );
    const retention = new InboxRetention(dataSource, 'g', async () => new Map(), { retentionDays: 7, operationsRetentionDays: 30, retentionIntervalMs: 0, retentionBatchSize: 1 });
    await retention.runOnce();
    expect(await dataSource.query(`SELECT consumer_group, state FROM kafka_eo_bulk_operations ORDER BY id`)).toEqual([
      { consumer_group: 'g', state: 'done' },
      { consumer_group: 'g', state: 'running' },
      { consumer_group: 'other', state: 'done' },
    ]);
    expect(await dataSource.query(`SELECT consumer_group, action, state FROM kafka_eo_audit ORDER BY id`)).toEqual([
      { consumer_group: 'g', action: 'discard', state: 'done' },
      { consumer_group: 'g', action: 'replay', state: 'pending' },
      { consumer_group: 'other', action: 'replay', state: 'done' },
      { consumer_group: 'g', action: 'abort-transaction', state: 'failed' },
      { consumer_group: 'g', action: 'abort-transaction', state: 'running' },
    ]);
    const [stale] = await dataSource.query(`SELECT result, finished_at FROM kafka_eo_audit WHERE action = 'abort-transaction' AND state = 'failed'`);
    expect(stale.result).toMatchObject({ producerId: '7', error: expect.stringContaining('stopped before it said how it ended') });
    expect(stale.finished_at).not.toBeNull();
    expect((await dataSource.query(`SELECT audit_id::int AS id FROM kafka_eo_replays ORDER BY seq`)).map((r: { id: number }) => r.id)).toEqual([2, 3]);
    expect((await dataSource.query(`SELECT "offset"::int AS o FROM kafka_eo_parked_records ORDER BY seq`)).map((r: { o: number }) => r.o)).toEqual([3, 4]);
  });
});

/** An inbox written by 0.1 (keyed by message id text) keeps deduplicating after the digest migration. */
describe('library: inbox migration from text message ids', () => {
  it('keys existing rows by the digest of their id, scoped by their topic', async () => {
    const dataSource = await new DataSource({ type: 'postgres', url: await createSuiteDatabase('inbox_upgrade') }).initialize();
    try {
      const runner = dataSource.createQueryRunner();
      await new CreateKafkaEoInbox1764400000000().up(runner);
      await runner.query(`CREATE TABLE kafka_eo_migrations (name text PRIMARY KEY, run_at timestamptz NOT NULL DEFAULT now())`);
      await runner.query(`INSERT INTO kafka_eo_migrations (name) VALUES ('CreateKafkaEoInbox1764400000000')`);
      await runner.query(
        `INSERT INTO kafka_eo_inbox (consumer_group, message_id, topic, partition, "offset", status, outputs)
         VALUES ('g', 'm-1', 'payments', 0, 5, 'processed', '[{"topic":"out","key":null,"value":null,"headers":{"message-id":"o-1"}}]'),
                ('g', 'm-dead', 'payments', 0, 6, 'dead-lettered',
                 '[{"topic":"payments.dlq","key":null,"value":"AQI=","headers":{"message-id":"m-dead","dlq-reason":"handler-failed","dlq-error-class":"Error","dlq-error-message":"boom"}}]')`,
      );
      await runner.release();
      await runInboxMigrations(dataSource);
      const inbox = new InboxRepository();
      const claimRunner = dataSource.createQueryRunner();
      await claimRunner.connect();
      try {
        const id = identify('payments', 0, { offset: '9', headers: { 'message-id': Buffer.from('m-1') } }, 'topic');
        const claimed = await inbox.claim(claimRunner, 'g', 'payments', 0, [{ ...id, offset: '9' }]);
        expect(claimed.claims.size).toBe(0); // a duplicate of the migrated row
        const rows = await inbox.find(claimRunner, 'g', [id]);
        expect([...rows.values()]).toEqual([
          { topic: 'payments', partition: 0, offset: '5', status: 'processed', outputs: [{ topic: 'out', key: null, value: null, headers: [['message-id', Buffer.from('o-1')]] }] },
        ]);
        // A dead letter recorded before the operator tools: listed with its reason and error after the upgrade.
        const dead = await claimRunner.query(`SELECT message_id, dlq_reason, dlq_error->>'name' AS name, dlq_error->>'message' AS message FROM kafka_eo_inbox WHERE status = 'dead-lettered'`);
        expect(dead).toEqual([{ message_id: 'm-dead', dlq_reason: 'handler-failed', name: 'Error', message: 'boom' }]);
        // The same id on another topic is another message.
        const other = identify('orders', 0, { offset: '9', headers: { 'message-id': Buffer.from('m-1') } }, 'topic');
        expect((await inbox.claim(claimRunner, 'g', 'orders', 0, [{ ...other, offset: '9' }])).claims.size).toBe(1);
        // With a group-wide scope, one id is one message whatever the topic.
        const onA = identify('a', 0, { offset: '1', headers: { 'message-id': Buffer.from('shared') } }, 'group');
        const onB = identify('b', 0, { offset: '1', headers: { 'message-id': Buffer.from('shared') } }, 'group');
        expect((await inbox.claim(claimRunner, 'g', 'a', 0, [{ ...onA, offset: '1' }])).claims.size).toBe(1);
        expect((await inbox.claim(claimRunner, 'g', 'b', 0, [{ ...onB, offset: '1' }])).claims.size).toBe(0);
      } finally {
        await claimRunner.release();
      }
    } finally {
      await dataSource.destroy();
    }
  });
});

/**
 * Rows versions before 0.5 wrote for records without a message id (keyed by the SHA-256 of their coordinates'
 * text, which a header spelling them also gets) are re-keyed into the coordinates' namespace by the migration:
 * such a record delivered again after the upgrade is a replay, and a header spelling its coordinates is not it.
 */
describe('library: inbox migration of records without a message id', () => {
  it('re-keys the rows of records known by their coordinates (at them, or on a retry tier), with their parked copies, and no header\'s row', async () => {
    const dataSource = await new DataSource({ type: 'postgres', url: await createSuiteDatabase('inbox_coordinates') }).initialize();
    const inbox = new InboxRepository();
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runInboxMigrations(dataSource);
      const legacyRow = (messageId: string, topic: string, offset: number, status = 'processed') =>
        runner.query(
          `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, attempts, outputs, processed_at)
           VALUES ('g', 'payments', sha256(convert_to($1, 'UTF8')), $1, $2, 0, $3, $4, 1, '[]'::jsonb, now())`,
          [messageId, topic, offset, status],
        );
      // As 0.4 left them: a record at payments/0/5 handled (its Kafka commit lost: it comes again), a header spelling
      // payments/0/7 on the record at offset 6, a record first consumed at payments/0/8 now handled on a retry tier,
      // and a parked record without a message id at payments/0/9.
      await legacyRow('payments/0/5', 'payments', 5);
      await legacyRow('payments/0/7', 'payments', 6);
      await legacyRow('payments/0/8', 'payments.retry.1', 0);
      await legacyRow('payments/0/9', 'payments', 9, 'parked');
      await runner.query(
        `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, reason, state)
         VALUES ('g', 'payments', '\\x01', 0, 9, 'payments', sha256(convert_to('payments/0/9', 'UTF8')), 'payments/0/9', 'handler-failed', 'parked')`,
      );
      await new CoordinateIdentities1764400800000().up(runner);
      await new CoordinateIdentities1764400800000().up(runner); // again: nothing more to do

      const digests = await runner.query(`SELECT message_id, encode(id_digest, 'hex') AS digest FROM kafka_eo_inbox ORDER BY message_id`);
      const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
      expect(digests).toEqual([
        { message_id: 'payments/0/5', digest: coordinatesDigest('payments/0/5') },
        { message_id: 'payments/0/7', digest: sha256('payments/0/7') },
        { message_id: 'payments/0/8', digest: coordinatesDigest('payments/0/8') },
        { message_id: 'payments/0/9', digest: coordinatesDigest('payments/0/9') },
      ]);
      expect(await runner.query(`SELECT encode(id_digest, 'hex') AS digest FROM kafka_eo_parked_records`)).toEqual([{ digest: coordinatesDigest('payments/0/9') }]);

      // The handled record, delivered again: a replay (not claimed). The record at payments/0/7: new, claimed,
      // although a header spelled its coordinates.
      const at = (offset: string) => identify('payments', 0, { offset, headers: {} }, 'topic');
      await runner.startTransaction();
      const claimed = await inbox.claim(runner, 'g', 'payments', 0, [
        { ...at('5'), offset: '5' },
        { ...at('7'), offset: '7' },
      ]);
      expect([...claimed.claims.values()].map((c) => c.offset)).toEqual(['7']);
      await runner.rollbackTransaction();

      // And back, for a downgrade.
      await new CoordinateIdentities1764400800000().down(runner);
      expect((await runner.query(`SELECT encode(id_digest, 'hex') AS digest FROM kafka_eo_inbox WHERE message_id = 'payments/0/5'`))[0].digest).toBe(sha256('payments/0/5'));
    } finally {
      await runner.release();
      await dataSource.destroy();
    }
  });
});

/** A claim that takes over a deferred or failing row, then is given back or fails, leaves it as it was. */
describe('library: inbox takeovers', () => {
  it('restores a taken-over row when the claim is released, and counts a takeover that fails', async () => {
    const dataSource = await new DataSource({ type: 'postgres', url: await createSuiteDatabase('inbox_takeover') }).initialize();
    const inbox = new InboxRepository();
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runInboxMigrations(dataSource);
      const id = identify('t', 0, { offset: '3', headers: { 'message-id': Buffer.from('m-deferred') } }, 'topic');
      // Dead-lettered at offset 3 for an unknown schema, with its dead letter recorded as output.
      await inbox.claim(runner, 'g', 't', 0, [{ ...id, offset: '3' }]);
      await inbox.complete(runner, 'g', [{ ...id, status: 'deferred', attempts: 1, outputs: [{ topic: 't.dlq', key: null, value: null, h: [] }] }]);
      const row = () => dataSource.query(`SELECT status, "offset"::text AS "offset", outputs, failures, taken_over FROM kafka_eo_inbox WHERE message_id = 'm-deferred'`);

      // The same coordinates again (a crash before the Kafka commit): a replay, not a takeover.
      expect((await inbox.claim(runner, 'g', 't', 0, [{ ...id, offset: '3' }])).claims.size).toBe(0);
      // Republished at offset 9: taken over; the chunk is cut before it is handled and the claim released.
      await runner.startTransaction();
      const takeover = await inbox.claim(runner, 'g', 't', 0, [{ ...id, offset: '9' }]);
      expect(takeover.claims.get(keyOf(id))).toMatchObject({ offset: '9', takenOver: true });
      await inbox.release(runner, 'g', [id], takeover.unit);
      await runner.commitTransaction();
      expect(await row()).toEqual([{ status: 'deferred', offset: '3', outputs: [{ topic: 't.dlq', key: null, value: null, h: [] }], failures: 0, taken_over: null }]);

      // Republished at offset 9 again, and its unit fails alone: counted as the new delivery's first failure.
      const failure = { name: 'Error', message: 'boom', stack: '', reason: 'handler-failed' };
      expect(await inbox.recordFailure(runner, 'g', { ...id, offset: '9', topic: 't', partition: 0 }, failure)).toBe(1);
      expect(await row()).toMatchObject([{ status: 'failing', offset: '9', failures: 1 }]);
      expect(await inbox.recordFailure(runner, 'g', { ...id, offset: '9', topic: 't', partition: 0 }, failure)).toBe(2);
      // The next claim takes the failing row over and sees its count.
      await runner.startTransaction();
      expect((await inbox.claim(runner, 'g', 't', 0, [{ ...id, offset: '9' }])).claims.get(keyOf(id))).toEqual({ offset: '9', failures: 2, lastError: failure, takenOver: true });
      await runner.rollbackTransaction();
    } finally {
      await runner.release();
      await dataSource.destroy();
    }
  });
});

/** A unit of work whose records are all handled plainly writes their rows once, and their outputs in one row. */
describe('library: a unit of work\'s outputs, recorded once', () => {
  it('writes a new record\'s row as handled at the claim and its outputs in the unit\'s row; gives back what was not handled; retention deletes the unit\'s row with its last record', async () => {
    const dataSource = await new DataSource({ type: 'postgres', url: await createSuiteDatabase('inbox_units') }).initialize();
    const inbox = new InboxRepository();
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runInboxMigrations(dataSource);
      const ids = ['a', 'b', 'c'].map((m, i) => identify('t', 0, { offset: String(10 + i), headers: { 'message-id': Buffer.from(`m-${m}`) } }, 'topic'));
      await runner.startTransaction();
      const { claims, unit } = await inbox.claim(runner, 'g', 't', 0, ids.map((id, i) => ({ ...id, offset: String(10 + i) })));
      expect([...claims.values()].map((c) => c.takenOver)).toEqual([false, false, false]);
      expect(unit).toMatch(/^[0-9]+$/);
      // c was not handled (the unit's time cap): given back, its row deleted.
      await inbox.release(runner, 'g', [ids[2]], unit);
      const out = (n: number): OutputRecord => ({ topic: 'out', key: Buffer.from(`k${n}`), value: Buffer.from([0, n, 0xff]), headers: [['message-id', Buffer.from(`o-${n}`)], ['empty', null]] });
      await inbox.recordUnitOutputs(runner, 'g', 't', 0, unit!, '11', [
        { offset: '10', outputs: [out(1), out(2)] },
        { offset: '11', outputs: [] },
      ]);
      await runner.commitTransaction();
      expect(await dataSource.query(`SELECT message_id, status, attempts, outputs FROM kafka_eo_inbox ORDER BY "offset"`)).toEqual([
        { message_id: 'm-a', status: 'processed', attempts: 1, outputs: [{ unit }] },
        { message_id: 'm-b', status: 'processed', attempts: 1, outputs: [{ unit }] },
      ]);

      // A redelivery at the same coordinates (the Kafka commit did not happen) finds each record's own outputs.
      const found = await inbox.find(runner, 'g', ids);
      expect(found.get(keyOf(ids[0]))?.outputs).toEqual([out(1), out(2)]);
      expect(found.get(keyOf(ids[1]))?.outputs).toEqual([]);
      expect(found.has(keyOf(ids[2]))).toBe(false);
      // A row whose unit's outputs are gone is an error, never a replay of nothing.
      await dataSource.query(`UPDATE kafka_eo_inbox SET outputs = '[{"unit":"987654321"}]' WHERE message_id = 'm-b'`);
      await expect(inbox.find(runner, 'g', [ids[1]])).rejects.toThrow(MissingUnitOutputsError);
      // ... but only where those outputs would be sent: a duplicate publish of m-b (another offset, or another
      // partition) is found without reading them, and skipped by the unit of work.
      const here = { topic: 't', partition: 0 };
      await expect(inbox.find(runner, 'g', [{ ...ids[1], offset: '11' }], here)).rejects.toThrow(MissingUnitOutputsError);
      const duplicate = await inbox.find(runner, 'g', [{ ...ids[1], offset: '500' }], here);
      expect(duplicate.get(keyOf(ids[1]))).toMatchObject({ offset: '11', status: 'processed', outputs: [] });
      expect((await inbox.find(runner, 'g', [{ ...ids[1], offset: '11' }], { topic: 't', partition: 1 })).get(keyOf(ids[1]))?.outputs).toEqual([]);
      await dataSource.query(`UPDATE kafka_eo_inbox SET outputs = $1::jsonb WHERE message_id = 'm-b'`, [JSON.stringify([{ unit }])]);
      // A unit's outputs are only ever read for a row of their own group and partition, at or below their last offset.
      await dataSource.query(`UPDATE kafka_eo_unit_outputs SET partition = 3`);
      await expect(inbox.find(runner, 'g', [{ ...ids[0], offset: '10' }], here)).rejects.toThrow(/not that record's: the row of t\[0\]@10 \(group g\) points to it, but it holds t\[3\] up to offset 11/);
      await dataSource.query(`UPDATE kafka_eo_unit_outputs SET partition = 0, last_offset = 9`);
      await expect(inbox.find(runner, 'g', [{ ...ids[0], offset: '10' }], here)).rejects.toThrow(/not that record's/);
      await dataSource.query(`UPDATE kafka_eo_unit_outputs SET last_offset = 11`);
      expect((await inbox.find(runner, 'g', [{ ...ids[0], offset: '10' }], here)).get(keyOf(ids[0]))?.outputs).toEqual([out(1), out(2)]);

      // The migration is not reverted while rows point to units' outputs (they would be lost with the table).
      const migration = new UnitOutputs1764400700000();
      await expect(migration.down(runner)).rejects.toThrow(/cannot be reverted: 2 inbox rows hold their outputs in kafka_eo_unit_outputs/);
      expect(await dataSource.query(`SELECT count(*)::int AS n FROM kafka_eo_unit_outputs`)).toEqual([{ n: 1 }]);

      // Retention: the unit's row stays while any of its records is at or above the committed offset.
      await dataSource.query(`UPDATE kafka_eo_inbox SET processed_at = now() - interval '8 days'`);
      await dataSource.query(`UPDATE kafka_eo_unit_outputs SET created_at = now() - interval '8 days'`);
      const retention = (offset: bigint) =>
        new InboxRetention(dataSource, 'g', async (_topic, partitions) => new Map(partitions.map((p) => [p, offset])), { retentionDays: 7, operationsRetentionDays: 30, retentionIntervalMs: 0, retentionBatchSize: 10 });
      expect(await retention(11n).runOnce()).toBe(1);
      expect(await dataSource.query(`SELECT count(*)::int AS n FROM kafka_eo_unit_outputs`)).toEqual([{ n: 1 }]);
      expect(await retention(12n).runOnce()).toBe(1);
      expect(await dataSource.query(`SELECT count(*)::int AS n FROM kafka_eo_unit_outputs`)).toEqual([{ n: 0 }]);
      // With no row pointing to a unit's outputs, it can be reverted (and applied again).
      await migration.down(runner);
      expect(await dataSource.query(`SELECT to_regclass('kafka_eo_unit_outputs') IS NULL AS gone`)).toEqual([{ gone: true }]);
      await migration.up(runner);
    } finally {
      await runner.release();
      await dataSource.destroy();
    }
  });
});

/** Operators asking at the same moment: one open replay per dead letter and one open release per parked key. */
describe('library: one open operator operation', () => {
  it('gives every one of many simultaneous requests the same queued replay or release, and the migration closes duplicates queued before it', async () => {
    const url = await createSuiteDatabase('inbox_open_operations');
    const dataSource = await new DataSource({ type: 'postgres', url }).initialize();
    const pool = new Pool({ connectionString: url, max: 12 });
    try {
      await runInboxMigrations(dataSource);
      // No consumer runs for group 'g': what is queued stays open.
      await dataSource.query(
        `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, processed_at, dlq_reason, outputs)
         VALUES ('g', 't', sha256('m-1'::bytea), 'm-1', 't', 0, 7, 'dead-lettered', now(), 'handler-failed', '[]'::jsonb)`,
      );
      await dataSource.query(
        `INSERT INTO kafka_eo_parked_keys (consumer_group, topic, key_digest, ordering_key, reason, partition, "offset", message_id)
         VALUES ('g', 't', sha256('acct-1'::bytea), 'acct-1', 'handler-failed', 0, 8, 'm-2')`,
      );
      const store = new OperatorStore(pgPoolSql(pool), 'g');
      const letter = createHash('sha256').update('m-1').digest('hex');
      const open = async (action: string) =>
        (await dataSource.query(`SELECT id::text FROM kafka_eo_audit WHERE consumer_group = 'g' AND action = $1 AND state IN ('pending', 'running') ORDER BY id`, [action])).map((r: { id: string }) => r.id);
      const replays = await Promise.all(Array.from({ length: 12 }, (_, i) => store.requestReplay(letter, { actor: `op-${i}` })));
      expect(new Set(replays.map((r) => r.id)).size).toBe(1);
      expect(await open('replay')).toEqual([replays[0].id]);
      const releases = await Promise.all(Array.from({ length: 12 }, (_, i) => store.requestRelease('t', 'acct-1', { actor: `op-${i}` })));
      expect(new Set(releases.map((r) => r.id)).size).toBe(1);
      expect(await open('release')).toEqual([releases[0].id]);

      // Duplicates queued before the indexes existed: the oldest stays open, the others fail naming it.
      const migration = new OneOpenOperation1764400500000();
      const runner = dataSource.createQueryRunner();
      try {
        await migration.down(runner);
        await dataSource.query(`INSERT INTO kafka_eo_audit (consumer_group, action, topic, scope, id_digest, message_id, state) VALUES ('g', 'replay', 't', 't', sha256('m-1'::bytea), 'm-1', 'pending')`);
        await dataSource.query(`INSERT INTO kafka_eo_audit (consumer_group, action, topic, key_digest, ordering_key, state) VALUES ('g', 'release', 't', sha256('acct-1'::bytea), 'acct-1', 'running')`);
        await migration.up(runner);
      } finally {
        await runner.release();
      }
      expect(await open('replay')).toEqual([replays[0].id]);
      expect(await open('release')).toEqual([releases[0].id]);
      const closed = await dataSource.query(`SELECT action, state, result FROM kafka_eo_audit WHERE consumer_group = 'g' AND state = 'failed' ORDER BY action`);
      expect(closed).toEqual([
        { action: 'release', state: 'failed', result: { error: { name: 'DuplicateRequest', message: `a second open release of the same key; operation ${releases[0].id} carries it out` } } },
        { action: 'replay', state: 'failed', result: { error: { name: 'DuplicateRequest', message: `a second open replay of the same dead letter; operation ${replays[0].id} carries it out` } } },
      ]);
      // The indexes hold again: a third open replay cannot be inserted by hand.
      await expect(dataSource.query(`INSERT INTO kafka_eo_audit (consumer_group, action, topic, scope, id_digest, state) VALUES ('g', 'replay', 't', 't', sha256('m-1'::bytea), 'pending')`)).rejects.toThrow(/kafka_eo_audit_open_replay/);
      expect((await store.requestReplay(letter)).id).toBe(replays[0].id);
    } finally {
      await pool.end();
      await dataSource.destroy();
    }
  });
});
