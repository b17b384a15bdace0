import { createHash } from 'crypto';
import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { InboxHealthIndicator, OperatorStore, OutboxHealthIndicator, pgPoolSql, type SqlClient } from 'kafka-exactly-once';
import { COUNT_CAP } from 'kafka-exactly-once/admin/capped-count';
import { MessageStories } from 'kafka-exactly-once/admin/message-story';
import { OperatorOverview } from 'kafka-exactly-once/admin/operator-overview';
import { runInboxMigrations } from 'kafka-exactly-once/inbox/inbox-migrator';
import { OutboxOperations } from 'kafka-exactly-once/outbox/outbox-operations';
import { createSuiteDatabase } from './support/database';

/** Rows in the inbox: enough that PostgreSQL reads a table through an index only when it has one that serves. */
const INBOX_ROWS = 50_000;
const OUTBOX_ROWS = 20_000;
/** Parked keys and records of a second group: more than the overview counts up to. */
const MANY_PARKED = COUNT_CAP + 50;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  /** Blocks the node and its children read, from PostgreSQL's cache or not. */
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

/**
 * An SqlClient that runs every statement that reads (with its parameters) under EXPLAIN (ANALYZE, BUFFERS) first,
 * keeping its plan: what it read, and how.
 */
function explaining(pool: Pool): { sql: SqlClient; plans: Array<{ text: string; plan: PlanNode }> } {
  const base = pgPoolSql(pool);
  const plans: Array<{ text: string; plan: PlanNode }> = [];
  const sql: SqlClient = {
    query: async (text, params) => {
      if (/^\s*(SELECT|WITH)\b/i.test(text)) {
        const { rows } = await pool.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, params);
        plans.push({ text, plan: rows[0]['QUERY PLAN'][0].Plan });
      }
      return base.query(text, params);
    },
    transaction: (work) => base.transaction(work),
  };
  return { sql, plans };
}

/** The tables of `tables` that a plan reads whole (a sequential scan), with the statement that does. */
function wholeTableScans(plans: Array<{ text: string; plan: PlanNode }>, tables: string[]): Array<{ table: string; statement: string }> {
  const found: Array<{ table: string; statement: string }> = [];
  const walk = (node: PlanNode, text: string) => {
    if (node['Node Type'] === 'Seq Scan' && tables.includes(node['Relation Name'] ?? '')) found.push({ table: node['Relation Name']!, statement: text.replace(/\s+/g, ' ').slice(0, 160) });
    for (const child of node.Plans ?? []) walk(child, text);
  };
  for (const { text, plan } of plans) walk(plan, text);
  return found;
}

/** The statements that read more than `max` blocks (of any table or index). */
function largeReads(plans: Array<{ text: string; plan: PlanNode }>, max: number): Array<{ blocks: number; statement: string }> {
  return plans
    .map(({ text, plan }) => ({ blocks: plan['Shared Hit Blocks'] + plan['Shared Read Blocks'], statement: text.replace(/\s+/g, ' ').slice(0, 160) }))
    .filter((r) => r.blocks > max);
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The operator tools' requests (the console's pages, the admin API, `kafka-eo`) on an inbox of 50,000 rows and an
 * outbox of 20,000: each reads through an index, never the whole inbox (nor, for a story, the whole outbox); a
 * story says when it left records off, ordered, and a key's story and a parked key's records page with a cursor;
 * an offset beyond a bigint is refused as a bad request, not a failure of the server.
 */
describe('library: the operator tools read through indexes and page', () => {
  let dataSource: DataSource;
  let pool: Pool;

  beforeAll(async () => {
    const url = await createSuiteDatabase('console_queries');
    dataSource = await new DataSource({ type: 'postgres', url }).initialize();
    pool = new Pool({ connectionString: url, max: 4 });
    await runInboxMigrations(dataSource);
    // One record in 100 dead-lettered, one on a retry tier, the rest handled; keys acct-0 .. acct-4999 (ten dead
    // letters of acct-100).
    const letter = (topic: string) =>
      `jsonb_build_array(jsonb_build_object('topic', '${topic}', 'key', encode(convert_to('acct-' || (n % 5000), 'UTF8'), 'base64'), 'value', NULL, 'h', '[]'::jsonb))`;
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, outputs, claimed_at, processed_at, dlq_reason, dlq_error)
       SELECT 'g', 'orders', sha256(convert_to('m-' || n, 'UTF8')), 'm-' || n, 'orders', n % 8, n / 8,
              CASE n % 100 WHEN 0 THEN 'dead-lettered' WHEN 1 THEN 'retrying' ELSE 'processed' END,
              CASE n % 100 WHEN 0 THEN ${letter('orders.dlq')} WHEN 1 THEN ${letter('orders.retry.1')} ELSE '[]'::jsonb END,
              timestamptz '2026-01-01 00:00:00Z' + n * interval '1 ms', timestamptz '2026-01-01 00:00:00Z' + n * interval '1 ms',
              CASE WHEN n % 100 = 0 THEN 'handler-failed' END, CASE WHEN n % 100 = 0 THEN '{"name": "Error", "message": "refused"}'::jsonb END
       FROM generate_series(1, ${INBOX_ROWS}) n`,
    );
    // A key with seven dead letters; a message id in three scopes.
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, outputs, claimed_at, processed_at, dlq_reason)
       SELECT 'g', 'orders', sha256(convert_to('many-' || n, 'UTF8')), 'many-' || n, 'orders', 1, 100000 + n, 'dead-lettered',
              jsonb_build_array(jsonb_build_object('topic', 'orders.dlq', 'key', encode('acct-many'::bytea, 'base64'), 'value', NULL, 'h', '[]'::jsonb)),
              timestamptz '2026-02-01 00:00:00Z' + n * interval '1 s', timestamptz '2026-02-01 00:00:00Z' + n * interval '1 s', 'handler-failed'
       FROM generate_series(1, 7) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, claimed_at, processed_at)
       SELECT 'g', s, sha256('dup-id'::bytea), 'dup-id', CASE WHEN s = '' THEN 'payments' ELSE s END, 0, 200000 + k, 'processed', timestamptz '2026-03-01 00:00:00Z' + k * interval '1 s', now()
       FROM unnest(ARRAY['orders', 'payments', '']) WITH ORDINALITY AS x(s, k)`,
    );
    // A parked key with five records waiting.
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_keys (consumer_group, topic, key_digest, ordering_key, reason, partition, "offset", message_id)
       VALUES ('g', 'orders', sha256('acct-parked'::bytea), 'acct-parked', 'handler-failed', 2, 300000, 'parked-0')`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, record_key, reason)
       SELECT 'g', 'orders', sha256('acct-parked'::bytea), 2, 300000 + n, 'orders', sha256(convert_to('parked-' || n, 'UTF8')), 'parked-' || n, 'acct-parked'::bytea, 'key-parked'
       FROM generate_series(1, 5) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_outbox (id, aggregatetype, aggregateid, type, payload, headers)
       SELECT 'ob-' || n, 'orders', convert_to('acct-' || (n % 300), 'UTF8'), 'test.Order', '\\x00'::bytea, '\\x00'::bytea FROM generate_series(1, ${OUTBOX_ROWS}) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_outbox_set_aside (position, id, aggregatetype, aggregateid, type, payload, headers, created_at, reason)
       SELECT 1000000 + n, 'sa-' || n, 'orders', convert_to('acct-' || (n % 300), 'UTF8'), 'test.Order', '\\x00'::bytea, '\\x00'::bytea, now(), 'too large'
       FROM generate_series(1, 2000) n`,
    );
    // A key found in each of a key story's three places, set aside one after the other: acct-mix's dead letters
    // (record key acct-mix: at 1, 3 and 5 s), records parked under the ordering key acct-mix with another record key
    // (2, 4 and 6 s), and a record with the record key acct-mix parked under another ordering key (7 s: a dead
    // letter too, found twice). A parked record's inbox row is written by the unit that parks it: its processed_at
    // is the parked record's parked_at.
    const at = (s: number) => `timestamptz '2026-04-01 00:00:00Z' + interval '${s} s'`;
    const letterOf = (key: string) => `jsonb_build_array(jsonb_build_object('topic', 'orders.dlq', 'key', encode('${key}'::bytea, 'base64'), 'value', NULL, 'h', '[]'::jsonb))`;
    const mix: Array<[string, number, string, string | null]> = [
      ['mix-1', 1, 'acct-mix', null],
      ['mix-2', 2, 'other-key', 'acct-mix'],
      ['mix-3', 3, 'acct-mix', null],
      ['mix-4', 4, 'other-key', 'acct-mix'],
      ['mix-5', 5, 'acct-mix', null],
      ['mix-6', 6, 'other-key', 'acct-mix'],
      ['mix-7', 7, 'acct-mix', 'ordering-x'],
    ];
    for (const [id, s, recordKey, orderingKey] of mix) {
      await dataSource.query(
        `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, outputs, claimed_at, processed_at, dlq_reason)
         VALUES ('g', 'orders', sha256('${id}'::bytea), '${id}', 'orders', 5, 400000 + ${s}, '${orderingKey ? 'parked' : 'dead-lettered'}', ${letterOf(recordKey)}, ${at(s)}, ${at(s)}, '${orderingKey ? 'key-parked' : 'handler-failed'}')`,
      );
      if (orderingKey) {
        await dataSource.query(
          `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, record_key, reason, parked_at)
           VALUES ('g', 'orders', sha256('${orderingKey}'::bytea), 5, 400000 + ${s}, 'orders', sha256('${id}'::bytea), '${id}', '${recordKey}'::bytea, 'key-parked', ${at(s)})`,
        );
      }
    }
    // A key with 3,000 records parked under it (each a dead letter of the key too, as parking writes them), a
    // second group with more than 10,000 of everything the overview counts, and more than 10,000 events set aside.
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, outputs, claimed_at, processed_at, dlq_reason)
       SELECT 'g', 'orders', sha256(convert_to('big-' || n, 'UTF8')), 'big-' || n, 'orders', 6, 500000 + n, 'parked', ${letterOf('acct-big')},
              ${at(0)} + n * interval '1 ms', ${at(0)} + n * interval '1 ms', 'key-parked'
       FROM generate_series(1, 3000) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, record_key, reason, parked_at)
       SELECT 'g', 'orders', sha256('acct-big'::bytea), 6, 500000 + n, 'orders', sha256(convert_to('big-' || n, 'UTF8')), 'big-' || n, 'acct-big'::bytea, 'key-parked', ${at(0)} + n * interval '1 ms'
       FROM generate_series(1, 3000) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, outputs, claimed_at, processed_at, dlq_reason)
       SELECT 'many', 'orders', sha256(convert_to('many-group-' || n, 'UTF8')), 'many-group-' || n, 'orders', 0, n,
              CASE n % 2 WHEN 0 THEN 'dead-lettered' ELSE 'retrying' END, ${letterOf('acct-0')}, now(), now(), CASE WHEN n % 2 = 0 THEN 'handler-failed' END
       FROM generate_series(1, ${2 * (COUNT_CAP + 50)}) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_keys (consumer_group, topic, key_digest, ordering_key, reason, partition, "offset", message_id, parked_at)
       SELECT 'many', 'orders', sha256(convert_to('k-' || n, 'UTF8')), 'k-' || n, 'handler-failed', 0, n, 'many-group-' || n, ${at(0)} + n * interval '1 s' FROM generate_series(1, ${MANY_PARKED}) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, record_key, reason)
       SELECT 'many', 'orders', sha256(convert_to('k-' || n, 'UTF8')), 1, n, 'orders', sha256(convert_to('many-group-' || n, 'UTF8')), 'many-group-' || n, NULL, 'handler-failed'
       FROM generate_series(1, ${MANY_PARKED}) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_outbox_set_aside (position, id, aggregatetype, aggregateid, type, payload, headers, created_at, reason)
       SELECT 2000000 + n, 'cap-' || n, 'orders', convert_to('cap-' || n, 'UTF8'), 'test.Order', '\\x00'::bytea, '\\x00'::bytea, now(), 'too large'
       FROM generate_series(1, ${COUNT_CAP}) n`,
    );
    // As autovacuum leaves them: statistics, and the visibility map that lets an index answer alone.
    await dataSource.query(`VACUUM ANALYZE`);
  });

  afterAll(async () => {
    await pool?.end();
    await dataSource?.destroy();
  });

  it('reads every page of the console through indexes: no request reads the whole inbox, no story the whole outbox', async () => {
    const scans: Record<string, Array<{ table: string; statement: string }>> = {};
    const reads: Record<string, Array<{ blocks: number; statement: string }>> = {};
    // A statement reads at most a tenth of the inbox's blocks (an index's walk over every row, or every dead
    // letter's heap row, reads more).
    const [{ blocks }] = await dataSource.query(`SELECT pg_relation_size('kafka_eo_inbox') / 8192 AS blocks`);
    expect(Number(blocks)).toBeGreaterThan(500);
    const measure = async (label: string, tables: string[], request: (sql: SqlClient) => Promise<unknown>, maxBlocks = Number(blocks) / 10) => {
      const { sql, plans } = explaining(pool);
      await request(sql);
      expect(plans.length).toBeGreaterThan(0);
      scans[label] = wholeTableScans(plans, tables);
      reads[label] = largeReads(plans, maxBlocks);
    };
    const inbox = ['kafka_eo_inbox'];
    const everything = ['kafka_eo_inbox', 'kafka_eo_outbox', 'kafka_eo_outbox_set_aside'];
    const stories = (sql: SqlClient) => new MessageStories(sql, new OperatorStore(sql, 'g'));

    await measure('overview', inbox, async (sql) => {
      // Kafka is not asked here (the overview says it could not describe the group): its counts are what is measured.
      const kafka = { admin: () => ({ connect: async () => Promise.reject(new Error('no Kafka in this test')), disconnect: async () => undefined }) };
      const lifecycle = { groupId: 'g', status: () => undefined, startStatus: () => ({ phase: 'starting' }) };
      const overview = new OperatorOverview({ lifecycle: lifecycle as never, kafka: kafka as never, sql, outbox: new OutboxOperations(sql), indicators: {} });
      const document = await overview.read();
      await overview.close();
      expect(document.counts).toEqual({ parkedKeys: 1, parkedRecords: 5 + 4 + 3000, deadLetters: INBOX_ROWS / 100 + 7 + 3, retrying: INBOX_ROWS / 100, atLeast: {} });
      // The outbox's 20,000 waiting events and 12,000 set aside are counted up to the cap.
      expect(document.outbox).toMatchObject({ waiting: COUNT_CAP, setAside: COUNT_CAP, atLeast: { waiting: true, setAside: true } });
    });
    // A key of 3,000 records: a page of 50 reads its 50 (and the next one), each statement under 10 blocks a
    // record (the inbox row, its parked copy, their index entries); reading them all took 3,000 inbox rows.
    await measure(
      'story by key of 3,000 parked records',
      everything,
      async (sql) => {
        const story = await stories(sql).story({ key: 'acct-big' });
        expect({ records: story.records.length, next: story.next !== null }).toEqual({ records: 50, next: true });
      },
      500,
    );
    await measure('dead letters of a key of 3,000 records', inbox, async (sql) => expect((await new OperatorStore(sql, 'g').listDeadLetters({ key: 'acct-big' })).items).toHaveLength(50), 500);
    await measure('story by message id', everything, (sql) => stories(sql).story({ messageId: 'm-4200' }));
    await measure('story by key', everything, async (sql) => expect((await stories(sql).story({ key: 'acct-700' })).records).toHaveLength(10));
    await measure('story by coordinates', everything, (sql) => stories(sql).story({ topic: 'orders', partition: 3, offset: '100' }));
    await measure('dead letters', inbox, async (sql) => {
      const store = new OperatorStore(sql, 'g');
      const first = await store.listDeadLetters({ limit: 20 });
      await store.listDeadLetters({ limit: 20, after: first.next! });
    });
    await measure('dead letters of a key', inbox, async (sql) => expect((await new OperatorStore(sql, 'g').listDeadLetters({ key: 'acct-100' })).items).toHaveLength(10));
    await measure('dead letter', inbox, (sql) => new OperatorStore(sql, 'g').showDeadLetter(sha256('m-4200')));
    await measure('retry tiers', inbox, (sql) => new OperatorStore(sql, 'g').listRetrying({}));
    await measure('parked keys', inbox, (sql) => new OperatorStore(sql, 'g').listParkedKeys({}));
    await measure('a parked key', inbox, (sql) => new OperatorStore(sql, 'g').showParkedKey('orders', 'acct-parked'));

    // Every request named, each with the tables it reads whole and its statements that read too much (none).
    const none = Object.fromEntries(Object.keys(scans).map((label) => [label, []]));
    expect({ scans, reads }).toEqual({ scans: none, reads: none });
  });

  it('counts what the overview shows up to 10,000, its health details too, at a cost that does not grow with the tables', async () => {
    const read = async () => {
      const { sql, plans } = explaining(pool);
      // The health indicators the overview asks, on this statement log (each asks through a query runner of its own).
      const dataSource = { createQueryRunner: () => ({ query: (text: string, params?: unknown[]) => sql.query(text, params ?? []), release: async () => undefined }) };
      const lifecycle = { groupId: 'many', getDatabase: () => dataSource, status: () => undefined, startStatus: () => ({ phase: 'starting' }) };
      const kafka = { admin: () => ({ connect: async () => Promise.reject(new Error('no Kafka in this test')), disconnect: async () => undefined }) };
      const inboxHealth = new InboxHealthIndicator(lifecycle as never);
      const outboxHealth = new OutboxHealthIndicator({ outbox: { unhealthyAgeMs: 3_600_000 } } as never, lifecycle as never, { relayStatus: () => undefined } as never);
      const overview = new OperatorOverview({
        lifecycle: lifecycle as never,
        kafka: kafka as never,
        sql,
        outbox: new OutboxOperations(sql),
        indicators: { inbox: () => inboxHealth.isHealthy('inbox'), outbox: () => outboxHealth.isHealthy('outbox') },
      });
      const document = await overview.read();
      await overview.close();
      return { document, blocks: plans.reduce((n, { plan }) => n + plan['Shared Hit Blocks'] + plan['Shared Read Blocks'], 0) };
    };
    const { document, blocks } = await read();
    const all = { parkedKeys: true, parkedRecords: true, deadLetters: true, retrying: true };
    expect(document.counts).toEqual({ parkedKeys: COUNT_CAP, parkedRecords: COUNT_CAP, deadLetters: COUNT_CAP, retrying: COUNT_CAP, atLeast: all });
    expect(document.outbox).toMatchObject({ waiting: COUNT_CAP, setAside: COUNT_CAP, atLeast: { waiting: true, setAside: true } });
    expect(document.health.inbox).toMatchObject({ status: 'up', parkedKeys: COUNT_CAP, atLeast: { parkedKeys: true }, parked: Array.from({ length: 10 }, (_, i) => `orders k-${i + 1}`) });
    expect(document.health.outbox).toMatchObject({ status: 'up', waiting: COUNT_CAP, setAside: COUNT_CAP, atLeast: { waiting: true, setAside: true }, oldestTopic: 'orders' });

    // Four times as many of everything the overview counts: it reads no more than before (each count stops after
    // 10,001 rows, through an index or a table's first rows), where an exact count reads four times as much.
    const more = 3 * (COUNT_CAP + 50);
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, scope, id_digest, message_id, topic, partition, "offset", status, outputs, claimed_at, processed_at, dlq_reason)
       SELECT 'many', 'orders', sha256(convert_to('many-more-' || n, 'UTF8')), 'many-more-' || n, 'orders', 1, n, CASE n % 2 WHEN 0 THEN 'dead-lettered' ELSE 'retrying' END,
              '[]'::jsonb, now(), now(), CASE WHEN n % 2 = 0 THEN 'handler-failed' END
       FROM generate_series(1, ${2 * more}) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_keys (consumer_group, topic, key_digest, ordering_key, reason, partition, "offset", message_id, parked_at)
       SELECT 'many', 'orders', sha256(convert_to('more-' || n, 'UTF8')), 'more-' || n, 'handler-failed', 2, n, 'm', now() FROM generate_series(1, ${more}) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_parked_records (consumer_group, topic, key_digest, partition, "offset", scope, id_digest, message_id, reason)
       SELECT 'many', 'orders', sha256(convert_to('more-' || n, 'UTF8')), 2, n, 'orders', sha256(convert_to('more-' || n, 'UTF8')), 'more-' || n, 'handler-failed' FROM generate_series(1, ${more}) n`,
    );
    await dataSource.query(
      `INSERT INTO kafka_eo_outbox (id, aggregatetype, aggregateid, type, payload, headers)
       SELECT 'ob-more-' || n, 'orders', convert_to('more-' || n, 'UTF8'), 'test.Order', '\\x00'::bytea, '\\x00'::bytea FROM generate_series(1, ${more}) n`,
    );
    await dataSource.query(`VACUUM ANALYZE kafka_eo_inbox, kafka_eo_parked_keys, kafka_eo_parked_records, kafka_eo_outbox`);
    const after = await read();
    expect(after.document.counts).toEqual(document.counts);
    expect({ blocks: after.blocks, asBefore: after.blocks <= blocks * 1.25 + 20 }).toEqual({ blocks: after.blocks, asBefore: true });
  });

  it("says when a story left records off, and pages a key's records in the order they were set aside", async () => {
    const store = new OperatorStore(pgPoolSql(pool), 'g');
    const stories = new MessageStories(pgPoolSql(pool), store);

    const pages: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await stories.story({ key: 'acct-many', limit: 3, after });
      pages.push(page.records.map((r) => r.messageId));
      expect(page.truncated).toBe(page.next !== null);
      if (page.next === null) break;
      after = page.next;
    }
    expect(pages).toEqual([['many-1', 'many-2', 'many-3'], ['many-4', 'many-5', 'many-6'], ['many-7']]);

    // A key's records from its three places, merged in one order and each once (mix-7 is found twice).
    const mixed: string[][] = [];
    after = undefined;
    for (;;) {
      const page = await stories.story({ key: 'acct-mix', limit: 2, after });
      mixed.push(page.records.map((r) => r.messageId));
      if (page.next === null) break;
      after = page.next;
    }
    expect(mixed).toEqual([['mix-1', 'mix-2'], ['mix-3', 'mix-4'], ['mix-5', 'mix-6'], ['mix-7']]);

    // A key of 3,000 parked records, paged 500 at a time: each once, in the order they were parked.
    const big: string[] = [];
    after = undefined;
    for (;;) {
      const page = await stories.story({ key: 'acct-big', limit: 500, after });
      big.push(...page.records.map((r) => r.messageId));
      if (page.next === null) break;
      after = page.next;
    }
    expect(big).toEqual(Array.from({ length: 3000 }, (_, i) => `big-${i + 1}`));

    const twoOfThree = await stories.story({ messageId: 'dup-id', limit: 2 });
    expect(twoOfThree.records.map((r) => r.scope)).toEqual(['orders', 'payments']);
    expect(twoOfThree).toMatchObject({ truncated: true, next: null });
    expect(await stories.story({ messageId: 'dup-id' })).toMatchObject({ truncated: false, records: [{ scope: 'orders' }, { scope: 'payments' }, { scope: '' }] });

    // acct-7's outbox events (66 waiting, 7 set aside) are more than a story shows.
    const key = await stories.story({ key: 'acct-7' });
    expect(key.outbox).toHaveLength(50);
    expect(key.truncated).toBe(true);
    expect(key.outbox.map((e) => Number(e.position))).toEqual([...key.outbox.map((e) => Number(e.position))].sort((a, b) => a - b));

    const one = await stories.story({ topic: 'orders', partition: 3, offset: '100' });
    expect(one).toMatchObject({ truncated: false, next: null, records: [{ messageId: 'm-803' }] });
  });

  it("pages a parked key's records in release order", async () => {
    const store = new OperatorStore(pgPoolSql(pool), 'g');
    const first = await store.showParkedKey('orders', 'acct-parked', { limit: 2 });
    expect(first.parkedRecords).toBe(5);
    expect(first.records.map((r) => r.messageId)).toEqual(['parked-1', 'parked-2']);
    expect(first.next).not.toBeNull();
    const second = await store.showParkedKey('orders', 'acct-parked', { limit: 2, after: first.next! });
    expect(second.records.map((r) => r.messageId)).toEqual(['parked-3', 'parked-4']);
    const last = await store.showParkedKey('orders', 'acct-parked', { limit: 2, after: second.next! });
    expect(last.records.map((r) => r.messageId)).toEqual(['parked-5']);
    expect(last.next).toBeNull();
    expect((await store.showParkedKey('orders', 'acct-parked')).records).toHaveLength(5);
  });

  it('refuses an offset beyond a bigint as a bad request (400), in a story and in a divert', async () => {
    const store = new OperatorStore(pgPoolSql(pool), 'g');
    const stories = new MessageStories(pgPoolSql(pool), store);
    await expect(stories.story({ topic: 'orders', partition: 0, offset: '9999999999999999999' })).rejects.toMatchObject({ status: 400, field: 'offset' });
    await expect(stories.story({ topic: 'orders', partition: 0, offset: '9223372036854775808' })).rejects.toMatchObject({ status: 400, field: 'offset' });
    expect((await stories.story({ topic: 'orders', partition: 0, offset: '9223372036854775807' })).records).toEqual([]);
    await expect(store.divertOutputs({ topic: 'orders', partition: 0, offset: '9999999999999999999' }, 'orders.out', 'refused for good')).rejects.toMatchObject({ status: 400, field: 'offset' });
  });
});
