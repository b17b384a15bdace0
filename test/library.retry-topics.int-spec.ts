import { Injectable, Module, Provider, Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { mkdtempSync, writeFileSync } from 'fs';
import { ConfigResourceTypes, Kafka, Message } from 'kafkajs';
import { tmpdir } from 'os';
import { join } from 'path';
import { Pool } from 'pg';
import { Registry } from 'prom-client';
import {
  DEAD_LETTER_HEADERS,
  EventContext,
  IdempotentHandler,
  KafkaExactlyOnceLifecycle,
  KafkaExactlyOnceModule,
  NonRetriableHandlerError,
  OperatorStore,
  pgPoolSql,
  RETRY_HEADERS,
  RetryTopicsError,
  SchemaRegistry,
} from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { runKafkaEo } from 'kafka-exactly-once/cli/kafka-eo.command';
import { createSuiteDatabase } from './support/database';
import { queryDatabase, sendRaw, startLibraryModule } from './support/library';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { kafkaBrokers, testDriver } from './support/environment';
import { waitUntil } from './support/payments';

const NOTICE = {
  type: 'record',
  name: 'NoticeRequested',
  namespace: 'test.notices',
  fields: [
    { name: 'noticeId', type: 'string' },
    { name: 'behaviour', type: 'string', doc: 'ok | outage (fails while the switch is on) | broken (always fails) | fatal (NonRetriableHandlerError)' },
  ],
};

/** The downstream the handler calls: the test flips `down` to make the `outage` notices fail for a while. */
@Injectable()
class Downstream {
  down = false;
  /** The `broken` notices pass once it is repaired (an operator's replay of their dead letter then works). */
  repaired = false;
  /** Every call, failed ones too, with the idempotency key the handler would give the real downstream. */
  readonly calls: Array<{ noticeId: string; idempotencyKey: string; topic: string; attempt: number; replay: boolean }> = [];
}

@Injectable()
class NoticesHandler {
  constructor(private readonly downstream: Downstream) {}

  @IdempotentHandler({
    topic: 'notices',
    schema: 'test.notices.NoticeRequested',
    retry: { initialDelayMs: 20 },
    // 22 s in all: longer than the 20 s outage, whatever the timing (each delay is a lower bound).
    retryTopics: { delays: ['2s', '4s', '16s'], maxInPlaceAttempts: 2 },
  })
  async onNotice(event: { noticeId: string; behaviour: string }, ctx: EventContext): Promise<void> {
    this.downstream.calls.push({ noticeId: event.noticeId, idempotencyKey: ctx.idempotencyKey, topic: ctx.message.topic, attempt: ctx.attempt, replay: ctx.replay !== undefined });
    if (event.behaviour === 'broken' && !this.downstream.repaired) throw new Error(`notice ${event.noticeId} cannot be sent`);
    if (event.behaviour === 'fatal') throw new NonRetriableHandlerError(`notice ${event.noticeId} is refused`);
    if (event.behaviour === 'outage' && this.downstream.down) throw new Error('downstream unavailable');
    await ctx.manager.query('INSERT INTO notices_sent (notice_id, message_id, topic, sent_at) VALUES ($1, $2, $3, now())', [event.noticeId, ctx.message.messageId, ctx.message.topic]);
  }
}

@Injectable()
class LedgerNotesHandler {
  @IdempotentHandler({ topic: 'compacted', schema: 'test.notices.NoticeRequested', retryTopics: { delays: ['1s'] } })
  async onNotice(): Promise<void> {}
}

/**
 * Non-blocking retries on the real broker and PostgreSQL: records of a failing downstream move through the
 * retry topics while the others flow, each is applied once when the downstream is back, a duplicate publish
 * meanwhile is skipped, and a record that keeps failing is dead-lettered after the last tier with its history.
 */
describe('library: retry topics', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  let pool: Pool;
  let store: OperatorStore;
  const metrics = new Registry();
  const prefix = `${uniqueTopic('retry')}.`;
  const topic = `${prefix}notices`;
  const registry = (() => {
    const dir = mkdtempSync(join(tmpdir(), 'keo-retry-schemas-'));
    writeFileSync(join(dir, 'notice-requested.v1.avsc'), JSON.stringify(NOTICE));
    return { dir, schemas: SchemaRegistry.fromDirectory(dir) };
  })();
  const notice = (noticeId: string, behaviour: string, messageId = `m-${noticeId}`): Message => ({
    key: `k-${noticeId.length % 5}-${noticeId}`,
    value: encodeSingleObject(registry.schemas.current('test.notices.NoticeRequested'), { noticeId, behaviour }),
    headers: { 'message-id': messageId },
  });
  const sent = async () => queryDatabase<{ notice_id: string; n: string; topics: string[] }>(databaseUrl, 'SELECT notice_id, count(*)::text AS n, array_agg(topic ORDER BY sent_at) AS topics FROM notices_sent GROUP BY notice_id');

  /** The module under test: its own client, transactional ids and group, and these providers. */
  function notices(name: string, providers: Provider[], metricsRegistry?: Registry): Type<unknown> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: name, brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}${name}`,
          transactionalIdPrefix: name,
          schemas: { directory: registry.dir },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000 },
          ...(metricsRegistry ? { metrics: { registry: metricsRegistry } } : {}),
        }),
      ],
      providers,
    })
    class NoticesModule {}
    return NoticesModule;
  }

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('retry');
    await queryDatabase(databaseUrl, 'CREATE TABLE notices_sent (notice_id text, message_id text, topic text, sent_at timestamptz)');
    await createTopics(kafka, [topic], 3);
    pool = new Pool({ connectionString: databaseUrl, max: 1 });
    store = new OperatorStore(pgPoolSql(pool), `${prefix}retry-test`);


    moduleRef = await startLibraryModule(notices('retry-test', [Downstream, NoticesHandler], metrics));
    await moduleRef.get(KafkaExactlyOnceLifecycle).whenRunning();
  });

  afterAll(async () => {
    await pool?.end();
    await moduleRef?.close();
  });

  it('creates the tiers with the topic’s partitions, a delete policy, the broker’s append time and a retention of 7 days at least', async () => {
    const tiers = [1, 2, 3].map((n) => `${topic}.retry.${n}`);
    const metadata = await withAdmin(kafka, (admin) => admin.fetchTopicMetadata({ topics: tiers }));
    expect(metadata.topics.map((t) => [t.name, t.partitions.length]).sort()).toEqual(tiers.map((t) => [t, 3]));
    const { resources } = await withAdmin(kafka, (admin) =>
      admin.describeConfigs({ includeSynonyms: false, resources: tiers.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['cleanup.policy', 'message.timestamp.type', 'retention.ms'] })) }),
    );
    for (const r of resources) {
      const config = Object.fromEntries(r.configEntries.map((e) => [e.configName, e.configValue]));
      expect(config).toMatchObject({ 'cleanup.policy': 'delete', 'message.timestamp.type': 'LogAppendTime' });
      expect(Number(config['retention.ms'])).toBeGreaterThanOrEqual(7 * 86400000);
    }
  });

  it('moves failing records through the tiers while the others flow, applies each once after the outage, skips a duplicate, dead-letters the one that keeps failing with its history, which an operator replays', async () => {
    const downstream = moduleRef.get(Downstream);
    downstream.down = true;
    const outageStarted = Date.now();
    const ok = Array.from({ length: 30 }, (_, i) => `ok-${i}`);
    const outage = Array.from({ length: 20 }, (_, i) => `outage-${i}`);
    // Without a message id (known by its coordinates on every tier), carrying forged retry headers and bytes no text holds.
    const anonymous: Message = {
      ...notice('anon-1', 'outage'),
      headers: {
        [RETRY_HEADERS.originalTopic]: topic,
        [RETRY_HEADERS.originalPartition]: '0',
        [RETRY_HEADERS.originalOffset]: '0',
        [RETRY_HEADERS.history]: '{"forged":true}',
        [RETRY_HEADERS.dueAt]: String(Number.MAX_SAFE_INTEGER),
        odd: Buffer.from([0xff, 0x00, 0xfe]),
      },
    };
    await sendRaw(kafka, topic, [
      anonymous,
      ...ok.slice(0, 15).map((id) => notice(id, 'ok')),
      ...outage.map((id) => notice(id, 'outage')),
      notice('broken-1', 'broken'),
      notice('fatal-1', 'fatal'),
      ...ok.slice(15).map((id) => notice(id, 'ok')),
    ]);

    // Written to the first tier by hand with a due time far away: it is due after the tier's delay all the same.
    await sendRaw(kafka, `${topic}.retry.1`, [{ ...notice('direct-1', 'ok'), headers: { 'message-id': 'm-direct-1', [RETRY_HEADERS.dueAt]: String(Number.MAX_SAFE_INTEGER) } }]);

    // The records that do not fail are applied while the failing ones wait: the partitions move on.
    await waitUntil(async () => (await sent()).filter((r) => r.notice_id.startsWith('ok-')).length >= ok.length, 15000, 'the records that do not fail applied during the outage');
    expect(Date.now() - outageStarted).toBeLessThan(15000);
    expect((await sent()).map((r) => r.notice_id).filter((id) => id !== 'direct-1').sort()).toEqual([...ok].sort());

    // The failing ones wait on the tiers: the inbox, the operator's list, health and the metrics say so.
    await waitUntil(async () => (await store.listRetrying({ topic, limit: 500 })).length >= outage.length + 1, 15000, 'the failing records listed as waiting');
    const waiting = await store.listRetrying({ topic, limit: 500 });
    expect(waiting.every((w) => w.retryTopic === `${topic}.retry.${w.tier}` && (w.error === 'downstream unavailable' || w.messageId === 'm-broken-1'))).toBe(true);
    expect(waiting.every((w) => w.dueAt !== null && Date.parse(w.dueAt) > outageStarted)).toBe(true);
    // kafka-eo lists them, the longest waiting first.
    let out = '';
    const code = await runKafkaEo(['retries', 'list', '--topic', topic, '--group', `${prefix}retry-test`, '--limit', '500', '--json'], { ...process.env, DATABASE_URL: databaseUrl }, { out: (t) => (out += t), err: () => undefined });
    expect(code).toBe(0);
    const listed = JSON.parse(out).items as Array<{ messageId: string; movedAt: string; retryTopic: string }>;
    expect(listed.map((w) => w.messageId)).toEqual(expect.arrayContaining(outage.slice(0, 5).map((id) => `m-${id}`)));
    expect(listed.map((w) => w.movedAt)).toEqual([...listed.map((w) => w.movedAt)].sort());
    const lifecycle = moduleRef.get(KafkaExactlyOnceLifecycle);
    await waitUntil(async () => (lifecycle.status()?.retryTiers ?? []).some((t) => t.waiting > 0 && t.nextDueAt !== null), 10000, 'health showing records on a tier');
    expect(lifecycle.status()!.retryTiers.map((t) => [t.topic, t.retriesOf, t.tier, t.delayMs])).toEqual([1, 2, 3].map((n) => [`${topic}.retry.${n}`, topic, n, [2000, 4000, 16000][n - 1]]));
    // And the metrics, per tier.
    const series = async (name: string) => (await metrics.getSingleMetric(name)!.get()).values.filter((v) => v.labels.topic === topic);
    expect((await series('kafka_eo_retry_moves_total')).find((v) => v.labels.tier === '1')?.value).toBeGreaterThanOrEqual(outage.length + 2);
    expect((await series('kafka_eo_retry_waiting_records')).some((v) => v.value > 0)).toBe(true);

    // A duplicate publish of a waiting record on the topic itself: skipped, it is known by its message id.
    await sendRaw(kafka, topic, [notice('outage-3', 'outage')]);

    // The fatal one skips the tiers.
    const fatal = await readTopic(kafka, `${topic}.dlq`, { until: (r) => r.length >= 1, timeoutMs: 20000 });
    expect(fatal[0].headers[DEAD_LETTER_HEADERS.errorClass]).toBe('NonRetriableHandlerError');
    expect(fatal[0].headers[RETRY_HEADERS.history]).toBeUndefined();

    // 20 s of outage: the records go through tier 1 (2 s) and tier 2 (4 s), and wait on tier 3 (16 s).
    const offFor = 20000 - (Date.now() - outageStarted);
    if (offFor > 0) await new Promise((resolve) => setTimeout(resolve, offFor));
    downstream.down = false;

    await waitUntil(async () => (await sent()).length >= ok.length + outage.length + 2, 60000, 'every record applied after the outage');
    const rows = await sent();
    expect(rows.filter((r) => r.n !== '1')).toEqual([]);
    expect(rows.map((r) => r.notice_id).sort()).toEqual([...ok, ...outage, 'anon-1', 'direct-1'].sort());
    expect(rows.find((r) => r.notice_id === 'direct-1')!.topics).toEqual([`${topic}.retry.1`]);
    // Applied from a tier, never from the topic itself.
    expect(rows.filter((r) => r.notice_id.startsWith('outage-')).every((r) => r.topics[0].startsWith(`${topic}.retry.`))).toBe(true);

    // The broken one after the last tier (2 + 4 + 16 s): on the dead-letter topic with its original bytes and every stage.
    const letters = await readTopic(kafka, `${topic}.dlq`, { until: (r) => r.length >= 2, timeoutMs: 60000 });
    const broken = letters.find((r) => r.headers['message-id'] === 'm-broken-1')!;
    expect(broken).toBeDefined();
    expect(letters).toHaveLength(2);
    expect(broken.value).toEqual(notice('broken-1', 'broken').value);
    expect(broken.headers[DEAD_LETTER_HEADERS.originalTopic]).toBe(topic);
    expect(broken.headers[DEAD_LETTER_HEADERS.reason]).toBe('handler-failed');
    const history = ([] as unknown[]).concat(broken.rawHeaders[RETRY_HEADERS.history]).map((h) => JSON.parse(String(h)));
    expect(history.map((h) => [h.stage, h.topic, h.attempts, h.message])).toEqual([
      [0, topic, 2, 'notice broken-1 cannot be sent'],
      [1, `${topic}.retry.1`, 2, 'notice broken-1 cannot be sent'],
      [2, `${topic}.retry.2`, 2, 'notice broken-1 cannot be sent'],
      [3, `${topic}.retry.3`, 2, 'notice broken-1 cannot be sent'],
    ]);

    // Every record that went to a tier is accounted for: applied once, or dead-lettered.
    const [first, ...later] = await Promise.all([1, 2, 3].map((n) => readTopic(kafka, `${topic}.retry.${n}`, { until: quietAfter(n === 1 ? outage.length + 3 : 1, 1500), pollIdleMs: 200, timeoutMs: 20000 })));
    // Each failing record moved to the first tier once: neither the duplicate nor a replay moved it twice.
    const named = first.filter((r) => r.headers['message-id'] !== undefined);
    expect(named.map((r) => String(r.headers['message-id'])).sort()).toEqual([...outage.map((id) => `m-${id}`), 'm-broken-1', 'm-direct-1'].sort());
    expect(first.filter((r) => r.headers['message-id'] !== 'm-direct-1').every((r) => r.headers[RETRY_HEADERS.attempt] === '1' && r.headers[RETRY_HEADERS.originalTopic] === topic)).toBe(true);
    // The anonymous one: its own bytes kept, the forged retry headers replaced by its true origin and a due time of its tier.
    const [anon] = first.filter((r) => r.headers['message-id'] === undefined);
    expect(anon.rawHeaders.odd).toEqual(Buffer.from([0xff, 0x00, 0xfe]));
    const onTopic = (await readTopic(kafka, topic, { until: (rs) => rs.some((r) => r.headers['message-id'] === undefined), timeoutMs: 20000 })).find((r) => r.headers['message-id'] === undefined)!;
    expect([anon.headers[RETRY_HEADERS.originalPartition], anon.headers[RETRY_HEADERS.originalOffset]]).toEqual([String(onTopic.partition), onTopic.offset]);
    expect(([] as unknown[]).concat(anon.rawHeaders[RETRY_HEADERS.history]).map((h) => JSON.parse(String(h)).stage)).toEqual([0]);
    expect(Number(anon.headers[RETRY_HEADERS.dueAt])).toBeLessThan(Date.now() + 60000);
    const accounted = new Set([...rows.map((r) => `m-${r.notice_id}`), 'm-broken-1', 'undefined']);
    expect([...first, ...later.flat()].filter((r) => !accounted.has(String(r.headers['message-id'])))).toEqual([]);
    expect(await store.listRetrying({ topic })).toEqual([]);

    // kafka-eo dlq replay works on a dead letter of the last tier: the handler runs once more for it.
    downstream.repaired = true;
    const { items } = await store.listDeadLetters({ limit: 10 });
    const letter = items.find((l) => l.messageId === 'm-broken-1')!;
    expect(letter.topic).toBe(`${topic}.retry.3`);
    const replay = await store.waitFor((await store.requestReplay(letter.id)).id, 60000);
    expect(replay.state).toBe('done');
    expect((await sent()).find((r) => r.notice_id === 'broken-1')).toMatchObject({ n: '1', topics: [`${topic}.retry.3`] });

    // ctx.idempotencyKey: one key per record across its in-place attempts, every tier and the operator's replay
    // (a downstream that deduplicates by it takes each call once), and a key of its own for every record.
    const keys = new Map<string, Set<string>>();
    for (const call of downstream.calls) keys.set(call.noticeId, (keys.get(call.noticeId) ?? new Set()).add(call.idempotencyKey));
    const broken1 = downstream.calls.filter((c) => c.noticeId === 'broken-1');
    expect(new Set(broken1.map((c) => c.topic))).toEqual(new Set([topic, ...[1, 2, 3].map((n) => `${topic}.retry.${n}`)]));
    expect(broken1.some((c) => c.attempt === 2) && broken1.some((c) => c.replay)).toBe(true);
    expect(new Set(downstream.calls.filter((c) => c.noticeId === 'anon-1').map((c) => c.topic)).size).toBeGreaterThan(1);
    expect([...keys.entries()].filter(([, set]) => set.size !== 1)).toEqual([]);
    const perRecord = [...keys.values()].map((set) => [...set][0]);
    expect(new Set(perRecord).size).toBe(perRecord.length);

    // Handler calls: a record that never failed is called once, although records failed in its units of work (a
    // failing call that sent no statement leaves the unit's transaction as it was, and the unit goes on); a
    // failing one as often as its in-place attempts on each topic it is consumed from (maxInPlaceAttempts: 2),
    // never once more for the unit's sake.
    const callsOf = new Map<string, number>();
    for (const call of downstream.calls.filter((c) => !c.replay)) callsOf.set(`${call.noticeId} ${call.topic}`, (callsOf.get(`${call.noticeId} ${call.topic}`) ?? 0) + 1);
    expect(ok.map((id) => callsOf.get(`${id} ${topic}`))).toEqual(ok.map(() => 1));
    expect([...callsOf.entries()].filter(([, n]) => n > 2)).toEqual([]);
    expect([topic, ...[1, 2, 3].map((n) => `${topic}.retry.${n}`)].map((t) => callsOf.get(`broken-1 ${t}`))).toEqual([2, 2, 2, 2]);
  }, 180000);

  it('refuses at boot a retry topic that would drop waiting records (compacted), naming it', async () => {
    await createTopics(kafka, [
      { topic: `${prefix}compacted`, numPartitions: 1 },
      { topic: `${prefix}compacted.retry.1`, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
    ]);
    const refused = await Test.createTestingModule({ imports: [notices('retry-test-refused', [LedgerNotesHandler])] }).compile();
    const err = await refused.init().then(
      () => undefined,
      (e: unknown) => e,
    );
    await refused.close().catch(() => undefined);
    expect(err).toBeInstanceOf(RetryTopicsError);
    expect((err as RetryTopicsError).topics).toEqual([`${prefix}compacted.retry.1`]);
    expect((err as Error).message).toMatch(/is compacted \(cleanup\.policy=compact\): a record waiting on it would be dropped behind a later record of its key/);
  });
});
