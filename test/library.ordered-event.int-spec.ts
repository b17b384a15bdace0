import { ConsoleLogger, Injectable, Module, ConsoleLoggerOptions } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { writeFileSync } from 'fs';
import { join } from 'path';
import { Kafka, Message } from 'kafkajs';
import { Pool } from 'pg';
import { BatchContext, BatchEvent, DEAD_LETTER_HEADERS, EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, NonRetriableHandlerError, OperatorRequestError, OperatorStore, OrderedEvent, SchemaRegistry, pgPoolSql } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { schemasDirectory, sendRaw } from './support/library';
import { APPLIED, ENTRY, Entry, LIMIT } from './support/ledger';

/** A newer version of Entry (a field with a default): its fingerprint is unknown until it is deployed. */
const ENTRY_V2 = { ...ENTRY, fields: [...ENTRY.fields, { name: 'memo', type: 'string', default: '' }] };

async function apply(event: Entry, ctx: EventContext): Promise<void> {
  if (event.amount > LIMIT && (await ctx.manager.query('SELECT 1 FROM approvals WHERE entry_id = $1', [event.entryId])).length === 0) {
    throw new NonRetriableHandlerError(`entry ${event.entryId} of ${event.amount} is over ${LIMIT} and not approved`);
  }
  const [{ balance }] = await ctx.manager.query(
    'INSERT INTO balances (account, balance) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET balance = balances.balance + EXCLUDED.balance RETURNING balance',
    [event.account, event.amount],
  );
  await ctx.manager.query('INSERT INTO applied (entry_id, account, replay) VALUES ($1, $2, $3)', [event.entryId, event.account, ctx.replay?.kind ?? null]);
  ctx.emit('ledger.applied', { entryId: event.entryId, balance }, { key: event.account });
}

/** The ordering key of an entry: its account; an empty key for 'no-key', and a key function that throws for 'throws-key'. */
function entryKey(e: Entry): string {
  if (e.account === 'throws-key') throw new Error(`entry ${e.entryId} names no ledger account`);
  return e.account === 'no-key' ? '' : e.account;
}

@Injectable()
class LedgerHandler {
  @IdempotentHandler({ topic: 'ledger.entries', schema: 'test.ledger.Entry', retry: { attempts: 1 } })
  @OrderedEvent({ key: entryKey })
  async onEntry(event: Entry, ctx: EventContext): Promise<void> {
    await apply(event, ctx);
  }
}

/** The same rule without @OrderedEvent: dead-letter and go on. */
@Injectable()
class TransfersHandler {
  @IdempotentHandler({ topic: 'ledger.transfers', schema: 'test.ledger.Entry', retry: { attempts: 1 } })
  async onTransfer(event: Entry, ctx: EventContext): Promise<void> {
    await apply(event, ctx);
  }
}

/** Sizes of the batches the batch handlers were called with, in call order. */
const batchSizes: number[] = [];

/**
 * The same rule set-based, as a batch handler: one statement for the approvals, one that creates and locks the
 * accounts, the running balances folded in offset order, one statement each for the balances and the applied
 * rows. It emits in reverse on purpose: outputs still go out in offset order, each under its own event.
 */
async function applyBatch(events: ReadonlyArray<BatchEvent<Entry>>, batch: BatchContext): Promise<void> {
  batchSizes.push(events.length);
  const accounts = [...new Set(events.map((e) => e.event.account))].sort();
  const rows: Array<{ account: string; balance: number }> = await batch.manager.query(
    'INSERT INTO balances (account, balance) SELECT unnest($1::text[]), 0 ON CONFLICT (account) DO UPDATE SET account = EXCLUDED.account RETURNING account, balance',
    [accounts],
  );
  const balances = new Map(rows.map((r) => [r.account, r.balance]));
  const after = events.map(({ event }) => {
    const balance = balances.get(event.account)! + event.amount;
    balances.set(event.account, balance);
    return balance;
  });
  await batch.manager.query('UPDATE balances b SET balance = v.balance FROM unnest($1::text[], $2::int[]) AS v(account, balance) WHERE b.account = v.account', [[...balances.keys()], [...balances.values()]]);
  await batch.manager.query('INSERT INTO applied (entry_id, account, replay) SELECT e, a, r FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS v(e, a, r, n) ORDER BY n', [
    events.map((e) => e.event.entryId),
    events.map((e) => e.event.account),
    events.map((e) => e.ctx.replay?.kind ?? null),
  ]);
  // Checked after the writes on purpose: a batch that fails half-way must leave nothing behind.
  const large = events.filter((e) => e.event.amount > LIMIT).map((e) => e.event.entryId);
  if (large.length > 0) {
    const approved = new Set((await batch.manager.query('SELECT entry_id FROM approvals WHERE entry_id = ANY($1)', [large])).map((r: { entry_id: string }) => r.entry_id));
    const refused = large.find((id) => !approved.has(id));
    if (refused) throw new NonRetriableHandlerError(`entry ${refused} is over ${LIMIT} and not approved`);
  }
  for (let i = events.length - 1; i >= 0; i--) events[i].ctx.emit('ledger.applied', { entryId: events[i].event.entryId, balance: after[i] }, { key: events[i].event.account });
}

@Injectable()
class LedgerBatchHandler {
  @IdempotentHandler({ topic: 'ledger.entries', schema: 'test.ledger.Entry', retry: { attempts: 1 }, batch: true })
  @OrderedEvent({ key: entryKey })
  async onEntries(events: BatchEvent<Entry>[], batch: BatchContext): Promise<void> {
    await applyBatch(events, batch);
  }
}

@Injectable()
class TransfersBatchHandler {
  @IdempotentHandler({ topic: 'ledger.transfers', schema: 'test.ledger.Entry', retry: { attempts: 1 }, batch: true })
  async onTransfers(events: BatchEvent<Entry>[], batch: BatchContext): Promise<void> {
    await applyBatch(events, batch);
  }
}

/** Key lanes: what the lanes handler saw, to show that keys ran at once and each key one after the other. */
const laneStats = { inFlight: 0, maxInFlight: 0, inFlightByKey: new Map<string, number>(), overlapWithinKey: 0, calls: new Map<string, number>() };

/**
 * The per-event rule in key lanes: each call first waits on a lookup (a remote call, simulated by a timer),
 * which is what lanes overlap; the handlers' statements share the unit's connection and transaction.
 */
@Injectable()
class LedgerLanesHandler {
  @IdempotentHandler({ topic: 'ledger.entries', schema: 'test.ledger.Entry', retry: { attempts: 1 } })
  @OrderedEvent({ key: entryKey, lanes: 8 })
  async onEntry(event: Entry, ctx: EventContext): Promise<void> {
    laneStats.calls.set(event.entryId, (laneStats.calls.get(event.entryId) ?? 0) + 1);
    const own = (laneStats.inFlightByKey.get(event.account) ?? 0) + 1;
    laneStats.inFlightByKey.set(event.account, own);
    if (own > 1) laneStats.overlapWithinKey++;
    laneStats.maxInFlight = Math.max(laneStats.maxInFlight, ++laneStats.inFlight);
    try {
      // A write before the lookup: a lane that fails later must leave nothing of it behind. The count of calls
      // in flight is committed with it, so the test sees concurrency of units that committed.
      await ctx.manager.query('INSERT INTO lane_log (entry_id, in_flight) VALUES ($1, $2)', [event.entryId, laneStats.inFlight]);
      await new Promise((r) => setTimeout(r, event.account === 'acct-slow' ? 150 : 5));
      // A transaction of the handler's own cannot be in lanes: the unit runs again without them, and it works.
      if (event.account === 'acct-tx') await ctx.manager.transaction(() => apply(event, ctx));
      else await apply(event, ctx);
    } finally {
      laneStats.inFlight--;
      laneStats.inFlightByKey.set(event.account, laneStats.inFlightByKey.get(event.account)! - 1);
    }
  }
}

const MODES = [
  { mode: 'one event per call', name: 'ordered', handlers: [LedgerHandler, TransfersHandler], batch: false, lanes: false },
  { mode: 'batch handlers (set-based SQL)', name: 'ordered_batch', handlers: [LedgerBatchHandler, TransfersBatchHandler], batch: true, lanes: false },
  { mode: 'key lanes (8 keys of a partition at once)', name: 'ordered_lanes', handlers: [LedgerLanesHandler, TransfersHandler], batch: false, lanes: true },
];

class CapturingLogger extends ConsoleLogger {
  readonly warnings: string[] = [];
  /** Every warning of the suite, across restarts (each start has a logger of its own). */
  static readonly all = new Map<string, string[]>();
  constructor(
    options: ConsoleLoggerOptions,
    private readonly suite = '',
  ) {
    super(options);
  }
  override warn(message: unknown, ...rest: unknown[]): void {
    this.warnings.push(String(message));
    CapturingLogger.all.set(this.suite, [...(CapturingLogger.all.get(this.suite) ?? []), String(message)]);
    super.warn(message, ...(rest as []));
  }
}

/**
 * @OrderedEvent in-process on the real broker and PostgreSQL: a record that fails for good parks its key, the
 * later records of that key are parked in order while other keys flow; a release (through the OperatorStore,
 * as the admin REST and the CLI do it) replays them in order exactly once, also while new records of the key
 * keep arriving; a release that fails again parks the key at the failing record; unresolved keys and records
 * of an unknown schema version; dead-letter replays run the handler exactly once. Twice: with handlers called
 * once per event, and with batch handlers (@IdempotentHandler({ batch: true })) under the same promises.
 */
describe.each(MODES)('library: @OrderedEvent parking, release and replay, $mode', ({ name, handlers, batch, lanes }) => {
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  let pool: Pool;
  let store: OperatorStore;
  let logger: CapturingLogger;
  const prefix = `${uniqueTopic(name.replace('_', '-'))}.`;
  const entries = `${prefix}ledger.entries`;
  const transfers = `${prefix}ledger.transfers`;
  const group = `${prefix}group`;
  const dir = schemasDirectory('ordered', { 'entry.v1.avsc': ENTRY, 'applied.v1.avsc': APPLIED });
  const schemas = SchemaRegistry.fromDirectory(dir);
  const entrySchema = schemas.current('test.ledger.Entry');

  const record = (entryId: string, account: string, amount: number, key = account): Message => ({
    key,
    value: encodeSingleObject(entrySchema, { entryId, account, amount }),
    headers: { 'message-id': `msg-${entryId}` },
  });
  const applied = async (account: string) => (await pool.query('SELECT entry_id, replay FROM applied WHERE account = $1 ORDER BY seq', [account])).rows;
  const balance = async (account: string) => (await pool.query('SELECT balance FROM balances WHERE account = $1', [account])).rows[0]?.balance ?? null;
  const waitUntil = async (what: string, check: () => Promise<boolean>, timeoutMs = 60000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  async function start(): Promise<void> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 8 } }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'ordered-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: 'ordered-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { 'ledger.applied': { schema: 'test.ledger.Applied' } },
          consumer: { sessionTimeout: 6000 },
          operations: { pollIntervalMs: 200 },
        }),
      ],
      providers: handlers,
    })
    class LedgerModule {}
    logger = new CapturingLogger({ logLevels: ['warn', 'error'] }, name);
    moduleRef = await Test.createTestingModule({ imports: [LedgerModule] }).setLogger(logger).compile();
    moduleRef.enableShutdownHooks();
    await moduleRef.init();
    await moduleRef.get(KafkaExactlyOnceLifecycle).whenRunning();
  }

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase(name);
    pool = new Pool({ connectionString: databaseUrl, max: 4 });
    await pool.query('CREATE TABLE balances (account text PRIMARY KEY, balance int NOT NULL)');
    await pool.query('CREATE TABLE applied (seq bigserial PRIMARY KEY, entry_id text UNIQUE, account text, replay text)');
    await pool.query('CREATE TABLE approvals (entry_id text PRIMARY KEY)');
    await pool.query('CREATE TABLE lane_log (entry_id text PRIMARY KEY, in_flight int NOT NULL)');
    await createTopics(kafka, [entries, transfers, `${prefix}ledger.applied`], 3);
    await start();
    store = new OperatorStore(pgPoolSql(pool), group);
  });

  afterAll(async () => {
    await moduleRef?.close();
    await pool?.end();
  });

  it('does not warn at boot about a key function (the documented form returns the record key): only a record whose ordering key is not its record key is named', () => {
    expect(logger.warnings.filter((w) => w.includes('@OrderedEvent orders by a key function'))).toEqual([]);
    expect(logger.warnings.filter((w) => w.includes('is not its record key'))).toEqual([]);
  });

  it('parks the key of a record that fails for good, parks its later records in order, lets other keys flow, and a release replays them in order exactly once', async () => {
    await sendRaw(kafka, entries, [
      record('a1', 'acct-a', 10),
      record('a2', 'acct-a', 5000), // over the limit, not approved: fails for good
      record('b1', 'acct-b', 7),
      record('a3', 'acct-a', 20),
      record('a4', 'acct-a', -15),
      record('b2', 'acct-b', 8),
    ]);
    await waitUntil('acct-b applied and acct-a parked', async () => (await applied('acct-b')).length === 2 && (await store.listParkedKeys({ topic: entries })).items[0]?.parkedRecords === 3);

    expect((await applied('acct-a')).map((r) => r.entry_id)).toEqual(['a1']);
    expect(await balance('acct-a')).toBe(10);
    expect(await balance('acct-b')).toBe(15);
    const parked = await store.showParkedKey(entries, 'acct-a');
    expect(parked).toMatchObject({ topic: entries, key: 'acct-a', reason: 'handler-failed', messageId: 'msg-a2', parkedRecords: 3 });
    expect(parked.error?.message).toContain('not approved');
    expect(parked.records.map((r) => [r.messageId, r.reason])).toEqual([
      ['msg-a2', 'handler-failed'],
      ['msg-a3', 'key-parked'],
      ['msg-a4', 'key-parked'],
    ]);
    // Every parked record is on the dead-letter topic too, with its original bytes and the key it waits for.
    const dlq = await readTopic(kafka, `${entries}.dlq`, { until: (rs) => rs.length >= 3, timeoutMs: 30000 });
    expect(dlq.map((r) => [r.headers['message-id'], r.headers[DEAD_LETTER_HEADERS.reason], r.headers[DEAD_LETTER_HEADERS.parkedKey]])).toEqual([
      ['msg-a2', 'handler-failed', 'acct-a'],
      ['msg-a3', 'key-parked', 'acct-a'],
      ['msg-a4', 'key-parked', 'acct-a'],
    ]);
    expect(dlq[1].value?.equals(record('a3', 'acct-a', 20).value as Buffer)).toBe(true);
    // A parked dead letter is released with its key, never replayed alone.
    const a2 = (await store.listDeadLetters({ topic: entries, key: 'acct-a' })).items.find((d) => d.messageId === 'msg-a2')!;
    expect(a2).toMatchObject({ reason: 'handler-failed', status: 'parked' });
    await expect(store.requestReplay(a2.id)).rejects.toMatchObject({ kind: 'conflict' });
    // Paging one by one lists every dead letter once, also those written in the same instant.
    const all = (await store.listDeadLetters({ topic: entries, limit: 500 })).items.map((d) => d.id);
    const paged: string[] = [];
    let after: string | undefined;
    do {
      const page = await store.listDeadLetters({ topic: entries, limit: 1, after });
      paged.push(...page.items.map((d) => d.id));
      after = page.next ?? undefined;
    } while (after);
    expect(all).toHaveLength(3);
    expect(paged).toEqual(all);

    // The cause is fixed (the entry approved); the release replays a2, a3, a4 in order, once.
    await pool.query(`INSERT INTO approvals VALUES ('a2')`);
    const release = await store.requestRelease(entries, 'acct-a', { actor: 'test' });
    const done = await store.waitFor(release.id, 60000);
    expect(done).toMatchObject({ state: 'done', action: 'release', key: 'acct-a', actor: 'test', result: { replayed: 3 } });
    expect((await applied('acct-a')).map((r) => [r.entry_id, r.replay])).toEqual([
      ['a1', null],
      ['a2', 'release'],
      ['a3', 'release'],
      ['a4', 'release'],
    ]);
    expect(await balance('acct-a')).toBe(10 + 5000 + 20 - 15);
    await expect(store.showParkedKey(entries, 'acct-a')).rejects.toMatchObject({ kind: 'not-found' });
    await expect(store.requestRelease(entries, 'acct-a')).rejects.toThrow(/is not parked/);

    // Outputs of the key in input order, each once (read committed).
    const outputs = await readTopic(kafka, `${prefix}ledger.applied`, { until: (rs) => rs.filter((r) => r.key === 'acct-a').length >= 4, timeoutMs: 30000, pollIdleMs: 500 });
    const applyOrder = outputs.filter((r) => r.key === 'acct-a').map((r) => r.headers['causation-id']);
    expect(applyOrder).toEqual(['msg-a1', 'msg-a2', 'msg-a3', 'msg-a4']);

    // The key flows normally again.
    await sendRaw(kafka, entries, [record('a5', 'acct-a', 1)]);
    await waitUntil('a5 applied', async () => (await applied('acct-a')).length === 5);
    expect((await applied('acct-a')).at(-1)).toEqual({ entry_id: 'a5', replay: null });
    const inbox = await pool.query(`SELECT message_id, status FROM kafka_eo_inbox WHERE topic = $1 AND message_id LIKE 'msg-a%' ORDER BY "offset"`, [entries]);
    expect(inbox.rows.map((r) => [r.message_id, r.status])).toEqual([
      ['msg-a1', 'processed'],
      ['msg-a2', 'replayed'],
      ['msg-a3', 'replayed'],
      ['msg-a4', 'replayed'],
      ['msg-a5', 'processed'],
    ]);
  });

  if (batch) {
    it('calls a batch handler with the events of a unit of work at once, each applied once, outputs in offset order', async () => {
      const before = batchSizes.length;
      const ids = Array.from({ length: 300 }, (_, i) => `m${i}`);
      await sendRaw(kafka, entries, ids.map((id, i) => record(id, `acct-m${i % 7}`, i)));
      const appliedM = async () => (await pool.query(`SELECT entry_id FROM applied WHERE account LIKE 'acct-m%' ORDER BY seq`)).rows.map((r) => r.entry_id);
      await waitUntil('every m entry applied', async () => (await appliedM()).length === ids.length);
      const sizes = batchSizes.slice(before);
      // Nothing failed, so no event was handled alone: the calls add up to the events, and they were batches.
      expect(sizes.reduce((a, b) => a + b, 0)).toBe(ids.length);
      expect(Math.max(...sizes)).toBeGreaterThan(1);
      for (let a = 0; a < 7; a++) {
        const own = ids.filter((_, i) => i % 7 === a);
        expect(await balance(`acct-m${a}`)).toBe(own.reduce((sum, id) => sum + Number(id.slice(1)), 0));
        const outputs = await readTopic(kafka, `${prefix}ledger.applied`, { until: (rs) => rs.filter((r) => r.key === `acct-m${a}`).length >= own.length, timeoutMs: 30000 });
        const mine = outputs.filter((r) => r.key === `acct-m${a}`);
        expect(mine.map((r) => r.headers['causation-id'])).toEqual(own.map((id) => `msg-${id}`));
      }
    });
  }

  if (lanes) {
    // One partition (one record key), 12 accounts in runs of three: without lanes these would run one by one.
    const account = (tag: string, i: number) => `acct-${tag}${Math.floor(i / 3) % 12}`;
    const entriesOf = (tag: string) => Array.from({ length: 240 }, (_, i) => `${tag}${i}`);
    const appliedCount = async (tag: string) => (await pool.query(`SELECT count(*)::int AS n FROM applied WHERE entry_id LIKE $1`, [`${tag}%`])).rows[0].n;
    async function expectEachAccountInOrder(tag: string, ids: string[], except: Map<string, string[]> = new Map()) {
      for (let a = 0; a < 12; a++) {
        const name = `acct-${tag}${a}`;
        const expected = except.get(name) ?? ids.filter((_, i) => account(tag, i) === name);
        // Applied in offset order within the account (seq is the order of the inserts), each once.
        expect((await applied(name)).map((r) => r.entry_id)).toEqual(expected);
        expect(await balance(name)).toBe(expected.length === 0 ? null : expected.reduce((sum, id) => sum + Number(id.slice(tag.length)), 0));
        const outputs = await readTopic(kafka, `${prefix}ledger.applied`, { until: (rs) => rs.filter((r) => r.key === name).length >= expected.length, timeoutMs: 30000 });
        expect(outputs.filter((r) => r.key === name).map((r) => r.headers['causation-id'])).toEqual(expected.map((id) => `msg-${id}`));
      }
    }

    it('handles the keys of one partition at once in key lanes, each key in offset order, each entry once', async () => {
      const ids = entriesOf('l');
      laneStats.maxInFlight = 0;
      laneStats.overlapWithinKey = 0;
      await sendRaw(kafka, entries, ids.map((id, i) => record(id, account('l', i), i, 'one-partition')));
      await waitUntil('every l entry applied', async () => (await appliedCount('l')) === ids.length);
      // Nothing failed, so nothing ran twice: keys ran at the same time, never two records of one key.
      expect(laneStats.maxInFlight).toBeGreaterThan(1);
      expect(laneStats.maxInFlight).toBeLessThanOrEqual(8);
      expect(laneStats.overlapWithinKey).toBe(0);
      // And that concurrency is what committed.
      const { rows } = await pool.query(`SELECT max(in_flight) AS most, count(*)::int AS n FROM lane_log WHERE entry_id LIKE 'l%'`);
      expect(rows[0]).toEqual({ most: expect.any(Number), n: ids.length });
      expect(rows[0].most).toBeGreaterThan(1);
      await expectEachAccountInOrder('l', ids);
    });

    it('a record failing in one lane (after its writes, while other lanes are mid-way) leaves nothing of the attempt, and parks only its key', async () => {
      const ids = entriesOf('f');
      const ofF5 = ids.filter((_, i) => account('f', i) === 'acct-f5');
      const failing = ofF5[3]; // over the limit, not approved: fails for good after its lane_log write
      await sendRaw(kafka, entries, ids.map((id, i) => record(id, account('f', i), id === failing ? 5000 : i, 'one-partition')));
      const f5Before = ofF5.slice(0, ofF5.indexOf(failing));
      await waitUntil('every f entry applied or parked', async () => (await appliedCount('f')) === ids.length - (ofF5.length - f5Before.length));
      await expectEachAccountInOrder('f', ids, new Map([['acct-f5', f5Before]]));
      // The rolled-back attempt left no write: lane_log holds exactly the applied entries.
      const logged = (await pool.query(`SELECT entry_id FROM lane_log WHERE entry_id LIKE 'f%' ORDER BY entry_id`)).rows.map((r) => r.entry_id);
      const appliedF = (await pool.query(`SELECT entry_id FROM applied WHERE entry_id LIKE 'f%' ORDER BY entry_id`)).rows.map((r) => r.entry_id);
      expect(logged).toEqual(appliedF);
      const parked = await store.showParkedKey(entries, 'acct-f5');
      expect(parked.records.map((r) => r.messageId)).toEqual(ofF5.slice(ofF5.indexOf(failing)).map((id) => `msg-${id}`));
      expect(parked.records[0]).toMatchObject({ reason: 'handler-failed' });
    });

    it('keeps the time cap: a slow key ends the unit before its first record not started, and what other lanes did after that point is sent once, by the next unit', async () => {
      // 20 records of a slow key (150 ms each: 3 s, past chunk.maxMillis of 1 s) among 60 of fast keys, one unit.
      const ids = Array.from({ length: 80 }, (_, i) => `s${i}`);
      const accountOf = (i: number) => (i % 4 === 0 ? 'acct-slow' : `acct-s${i % 3}`);
      const started = Date.now();
      await sendRaw(kafka, entries, ids.map((id, i) => record(id, accountOf(i), i, 'one-partition')));
      await waitUntil('every s entry applied', async () => (await appliedCount('s')) === ids.length);
      expect(Date.now() - started).toBeGreaterThan(3000);
      // Read until every s output is there (the slow key's last one included) and nothing more came for 1.5 s:
      // a record sent twice would be among them.
      const ofS = <T extends { headers: Record<string, string> }>(rs: T[]) => rs.filter((r) => /^msg-s\d+$/.test(r.headers['causation-id']));
      const lastSlow = `msg-${ids.filter((_, i) => accountOf(i) === 'acct-slow').at(-1)}`;
      let seen = 0;
      let quietSince = Date.now();
      const again = ofS(
        await readTopic(kafka, `${prefix}ledger.applied`, {
          until: (rs) => {
            if (rs.length !== seen) [seen, quietSince] = [rs.length, Date.now()];
            return ofS(rs).length >= ids.length && rs.some((r) => r.headers['causation-id'] === lastSlow) && Date.now() - quietSince > 1500;
          },
          timeoutMs: 30000,
          pollIdleMs: 300,
        }),
      );
      expect(again).toHaveLength(ids.length);
      for (const name of ['acct-slow', 'acct-s0', 'acct-s1', 'acct-s2']) {
        const own = ids.filter((_, i) => accountOf(i) === name);
        expect((await applied(name)).map((r) => r.entry_id)).toEqual(own);
        expect(await balance(name)).toBe(own.reduce((sum, id) => sum + Number(id.slice(1)), 0));
        // Each output once and in order: the fast keys' records handled after the cut were not sent twice.
        expect(again.filter((r) => r.key === name).map((r) => r.headers['causation-id'])).toEqual(own.map((id) => `msg-${id}`));
      }
      // Nothing ran twice: the records handled after the cut were replayed from the inbox, not handled again.
      expect(ids.map((id) => laneStats.calls.get(id))).toEqual(ids.map(() => 1));
    });

    it('a handler opening a transaction of its own in lanes still applies its record once (its unit runs without lanes) and is warned about', async () => {
      await sendRaw(kafka, entries, [record('x1', 'acct-tx', 3, 'one-partition'), record('x2', 'acct-x', 4, 'one-partition'), record('x3', 'acct-tx', 5, 'one-partition')]);
      await waitUntil('x entries applied', async () => (await appliedCount('x')) === 3);
      expect((await applied('acct-tx')).map((r) => r.entry_id)).toEqual(['x1', 'x3']);
      expect(await balance('acct-tx')).toBe(8);
      expect(logger.warnings.some((w) => w.includes('opened a transaction of its own (manager.transaction) in key lanes'))).toBe(true);
    });
  }

  it('keeps the order when new records of the key keep arriving during the release: parked ones first, then the new ones', async () => {
    await sendRaw(kafka, entries, [record('c1', 'acct-c', 9000), record('c2', 'acct-c', 1), record('c3', 'acct-c', 1)]);
    await waitUntil('acct-c parked', async () => (await store.listParkedKeys({ key: 'acct-c' })).items[0]?.parkedRecords === 3);
    await pool.query(`INSERT INTO approvals VALUES ('c1')`);
    // New records of acct-c before the release (they park behind c1..c3) and while it runs, in several sends.
    const later: string[] = [];
    const sendLater = async (batch: number) => {
      const ids = Array.from({ length: 5 }, (_, i) => `c${4 + batch * 5 + i}`);
      later.push(...ids);
      await sendRaw(kafka, entries, ids.map((id) => record(id, 'acct-c', 1)));
    };
    await sendLater(0);
    await waitUntil('c4..c8 parked too', async () => (await store.listParkedKeys({ key: 'acct-c' })).items[0]?.parkedRecords === 8);
    const release = await store.requestRelease(entries, 'acct-c');
    for (let batch = 1; batch < 6; batch++) {
      await sendLater(batch);
      await new Promise((r) => setTimeout(r, 100));
    }
    const done = await store.waitFor(release.id, 60000);
    expect(done.state).toBe('done');
    // The release replayed at least the records parked when it was asked for; the rest were parked behind them or flowed after it.
    expect((done.result as { replayed: number }).replayed).toBeGreaterThanOrEqual(8);
    const expected = ['c1', 'c2', 'c3', ...later];
    await waitUntil('every acct-c entry applied', async () => (await applied('acct-c')).length === expected.length);
    const rows = await applied('acct-c');
    expect(rows.map((r) => r.entry_id)).toEqual(expected);
    expect(rows.slice(0, 8).map((r) => r.replay)).toEqual(Array(8).fill('release'));
    expect(await balance('acct-c')).toBe(9000 + 2 + later.length);
    const outputs = await readTopic(kafka, `${prefix}ledger.applied`, { until: (rs) => rs.filter((r) => r.key === 'acct-c').length >= expected.length, timeoutMs: 30000 });
    expect(outputs.filter((r) => r.key === 'acct-c').map((r) => r.headers['causation-id'])).toEqual(expected.map((id) => `msg-${id}`));
    expect((await store.listParkedKeys({ key: 'acct-c' })).items).toEqual([]);
  });

  it('a release that fails again leaves the key parked at the failing record; discarding it (with a reason, audited) and releasing lets the rest go', async () => {
    await sendRaw(kafka, entries, [record('d1', 'acct-d', 1), record('d2', 'acct-d', 7000), record('d3', 'acct-d', 2)]);
    await waitUntil('acct-d parked', async () => (await store.listParkedKeys({ key: 'acct-d' })).items[0]?.parkedRecords === 2);
    const first = await store.waitFor((await store.requestRelease(entries, 'acct-d')).id, 60000);
    expect(first.state).toBe('failed');
    expect(first.result).toMatchObject({ replayed: 0, offset: expect.any(String), error: { name: 'NonRetriableHandlerError' } });
    const still = await store.showParkedKey(entries, 'acct-d');
    expect(still.records.map((r) => [r.messageId, r.releaseFailures])).toEqual([
      ['msg-d2', 1],
      ['msg-d3', 0],
    ]);
    expect(still.records[0].lastReleaseError?.message).toContain('not approved');
    expect((await applied('acct-d')).map((r) => r.entry_id)).toEqual(['d1']);

    await expect(store.discard(still.records[0].seq, '   ')).rejects.toMatchObject({ kind: 'invalid', field: 'reason' });
    const discarded = await store.discard(still.records[0].seq, 'refunded to the customer by hand (ticket 1234)', { actor: 'oncall' });
    expect(discarded).toMatchObject({ action: 'discard', state: 'done', reason: 'refunded to the customer by hand (ticket 1234)', actor: 'oncall', messageId: 'msg-d2' });
    await expect(store.discard(still.records[0].seq, 'again')).rejects.toMatchObject({ kind: 'conflict' });
    expect((await store.waitFor((await store.requestRelease(entries, 'acct-d')).id, 60000)).state).toBe('done');
    expect((await applied('acct-d')).map((r) => r.entry_id)).toEqual(['d1', 'd3']);
    const audit = await pool.query(`SELECT action, state, reason, actor FROM kafka_eo_audit WHERE consumer_group = $1 AND ordering_key = 'acct-d' ORDER BY id`, [group]);
    expect(audit.rows).toEqual([
      { action: 'release', state: 'failed', reason: null, actor: null },
      { action: 'discard', state: 'done', reason: 'refunded to the customer by hand (ticket 1234)', actor: 'oncall' },
      { action: 'release', state: 'done', reason: null, actor: null },
    ]);
  });

  it('dead-letters a record whose ordering key cannot be derived (key-unresolved) without parking anything', async () => {
    await sendRaw(kafka, entries, [record('u1', 'no-key', 1, 'rk-u'), record('u0', 'throws-key', 2, 'rk-u'), record('u2', 'acct-u', 3, 'rk-u')]);
    await waitUntil('u2 applied', async () => (await applied('acct-u')).length === 1);
    const letters = (await store.listDeadLetters({ topic: entries, reason: 'key-unresolved' })).items;
    const byId = new Map(letters.map((l) => [l.messageId, l]));
    expect([...byId.keys()].sort()).toEqual(['msg-u0', 'msg-u1']);
    expect(byId.get('msg-u1')).toMatchObject({ status: 'dead-lettered', key: 'rk-u' });
    expect(byId.get('msg-u1')!.error?.message).toContain('empty key');
    // A key function that throws: the same reason, and its own message is kept.
    expect(byId.get('msg-u0')).toMatchObject({ status: 'dead-lettered', key: 'rk-u' });
    expect(byId.get('msg-u0')!.error?.message).toContain('entry u0 names no ledger account');
    expect((await store.listParkedKeys({ reason: 'key-unresolved' })).items).toEqual([]);
    expect((await store.listParkedKeys({ key: 'rk-u' })).items).toEqual([]);
    expect((await applied('no-key')).length + (await applied('throws-key')).length).toBe(0);
  });

  it('replays a dead letter of a handler without @OrderedEvent exactly once: a second replay is refused and changes nothing', async () => {
    await sendRaw(kafka, transfers, [record('t1', 'acct-t', 4000), record('t2', 'acct-t', 5)]);
    // Without @OrderedEvent the line goes on: t2 is applied although t1 was dead-lettered before it.
    await waitUntil('t2 applied', async () => (await applied('acct-t')).length === 1);
    const [letter] = (await store.listDeadLetters({ topic: transfers })).items;
    expect(letter).toMatchObject({ messageId: 'msg-t1', reason: 'handler-failed', status: 'dead-lettered' });
    const refused = await store.waitFor((await store.requestReplay(letter.id)).id, 60000);
    expect(refused).toMatchObject({ state: 'failed', result: { error: { name: 'NonRetriableHandlerError' } } });
    await pool.query(`INSERT INTO approvals VALUES ('t1')`);
    const [first, second] = await Promise.allSettled([store.requestReplay(letter.id, { actor: 'a' }), store.requestReplay(letter.id, { actor: 'b' })]);
    // Two requests at once: the same queued replay (one open replay per dead letter).
    expect(first.status === 'fulfilled' && second.status === 'fulfilled' && first.value.id === second.value.id).toBe(true);
    const done = await store.waitFor((first as PromiseFulfilledResult<{ id: string }>).value.id, 60000);
    expect(done).toMatchObject({ state: 'done', result: { replayed: 1, outputs: 1 } });
    await expect(store.requestReplay(letter.id)).rejects.toThrow(OperatorRequestError);
    await expect(store.requestReplay(letter.id)).rejects.toThrow(/replayed already/);
    expect((await applied('acct-t')).map((r) => [r.entry_id, r.replay])).toEqual([
      ['t2', null],
      ['t1', 'dead-letter'],
    ]);
    expect(await balance('acct-t')).toBe(4005);
    const outputs = await readTopic(kafka, `${prefix}ledger.applied`, { until: (rs) => rs.filter((r) => r.key === 'acct-t').length >= 2, timeoutMs: 30000, pollIdleMs: 1500 });
    expect(outputs.filter((r) => r.key === 'acct-t').map((r) => r.headers['causation-id'])).toEqual(['msg-t2', 'msg-t1']);
    expect((await store.showDeadLetter(letter.id)).history.map((h) => h.state)).toEqual(['failed', 'done']);
  });

  it('parks the key of a record of an unknown newer schema version (unknown-schema), and a release after the deploy applies it', async () => {
    const v2 = SchemaRegistry.fromDirectory(schemasDirectory('ordered-v2', { 'entry.v2.avsc': ENTRY_V2 })).current('test.ledger.Entry');
    await sendRaw(kafka, entries, [
      record('e1', 'acct-e', 1),
      { key: 'acct-e', value: encodeSingleObject(v2, { entryId: 'e2', account: 'acct-e', amount: 2, memo: 'new field' }), headers: { 'message-id': 'msg-e2' } },
      record('e3', 'acct-e', 3),
    ]);
    await waitUntil('acct-e parked', async () => (await store.listParkedKeys({ key: 'acct-e' })).items[0]?.parkedRecords === 2);
    expect((await store.showParkedKey(entries, 'acct-e')).records.map((r) => [r.messageId, r.reason])).toEqual([
      ['msg-e2', 'unknown-schema'],
      ['msg-e3', 'key-parked'],
    ]);
    // The deploy: the new schema version in the consumer's schemas directory, and a restart.
    await moduleRef.close();
    writeFileSync(join(dir, 'entry.v2.avsc'), JSON.stringify(ENTRY_V2));
    await start();
    expect((await store.waitFor((await store.requestRelease(entries, 'acct-e')).id, 60000)).state).toBe('done');
    expect((await applied('acct-e')).map((r) => r.entry_id)).toEqual(['e1', 'e2', 'e3']);
    expect(await balance('acct-e')).toBe(6);
  });

  it('warns once, at the first record whose ordering key is not its record key', () => {
    // Records keyed 'one-partition' and 'rk-u' (above) have ordering keys of their own (the event's account).
    // Once per handler and start: the suite restarts the module (each start warns again, at most once a handler).
    const mismatches = (CapturingLogger.all.get(name) ?? []).filter((w) => w.includes('is not its record key'));
    expect(mismatches.length).toBeGreaterThanOrEqual(1);
    expect(mismatches.length).toBeLessThanOrEqual(handlers.length * 4);
  });
});
