import { Inject, Injectable, Logger, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka, KafkaJSNonRetriableError, logLevel } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { CorrectedConsumerGroup } from 'kafka-exactly-once/kafkajs/consumer-group';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers } from './support/environment';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { CapturingLogger, queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';

const ITEM = { type: 'record', name: 'Item', namespace: 'test.drain', fields: [{ name: 'id', type: 'string' }] };

/** What happened, in order: the handlers' calls of each member, and the KafkaJS consumer groups' crash, leave and join. */
interface Entry {
  member: string;
  what: 'start' | 'end' | 'crash' | 'left' | 'joined';
  id?: string;
}
const journal: Entry[] = [];

/** Records whose id starts with `held` wait in their handler until the test opens the latch. */
let latch: { opened: Promise<void>; open: () => void };
function newLatch(): void {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  latch = { opened, open };
}

const MEMBER = 'drain-test:member';

@Injectable()
class ItemsHandler {
  constructor(@Inject(MEMBER) private readonly member: string) {}

  @IdempotentHandler({ topic: 'items', schema: 'test.drain.Item' })
  async onItem(event: { id: string }, ctx: EventContext): Promise<void> {
    journal.push({ member: this.member, what: 'start', id: event.id });
    if (event.id.startsWith('held')) await latch.opened;
    await ctx.manager.query('INSERT INTO applied (id, times) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET times = applied.times + 1', [event.id]);
    ctx.emit('items.done', { id: event.id }, { key: event.id });
    journal.push({ member: this.member, what: 'end', id: event.id });
  }
}

/** A member of `group`: KafkaJS client id `member` (its member id in the group starts with it). */
function itemsModule(member: string, group: string, prefix: string, databaseUrl: string, schemas: string, consumer: { sessionTimeout: number; rebalanceTimeout: number }) {
  // A held handler call waits on the test, never on these timeouts: the Kafka transaction's, the session's, the call's.
  const held = { transactionTimeoutMs: 180000, inbox: { idleInTransactionTimeoutMs: 150000 }, handlerTimeoutMs: 120000 };
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
      KafkaExactlyOnceModule.forRoot({
        kafka: { clientId: member, brokers: kafkaBrokers() },
        groupId: group,
        transactionalIdPrefix: 'drain-test',
        schemas: { directory: schemas },
        topicPrefix: prefix,
        topics: { 'items.done': { schema: 'test.drain.Item' } },
        transactionTimeoutMs: held.transactionTimeoutMs,
        inbox: held.inbox,
        consumer: { ...consumer, heartbeatInterval: 1000, handlerTimeoutMs: held.handlerTimeoutMs },
      }),
    ],
    providers: [ItemsHandler, { provide: MEMBER, useValue: member }],
  })
  class ItemsModule {}
  return ItemsModule;
}

/** The engine's view of its group (internals, for this test only): the partitions assigned to this member. */
function assignment(moduleRef: TestingModule, topic: string): number[] {
  const engine = (moduleRef.get(KafkaExactlyOnceLifecycle) as unknown as { consumer?: { getStatus(): { assignment: Record<string, number[]> } } }).consumer;
  return engine?.getStatus().assignment[topic] ?? [];
}

// The consumer group of the library's consumers (KafkaJS's, corrected): the test notes when a member leaves and
// joins the group, and makes the next fetch of one member throw an error KafkaJS does not retry (its consumer crashes).
const ConsumerGroup = CorrectedConsumerGroup as unknown as { prototype: Record<string, (this: { memberId?: string | null }, ...args: unknown[]) => Promise<unknown>> };
const members = ['drain-a', 'drain-b', 'drain-c'];
const memberOf = (memberId?: string | null): string | undefined => members.find((m) => memberId?.startsWith(`${m}-`));
let crashNext: string | undefined;
const kafkaJs: Record<'fetch' | 'leave' | 'joinAndSync', (...args: unknown[]) => Promise<unknown>> = {} as never;

function watchConsumerGroups(): void {
  const { prototype } = ConsumerGroup;
  Object.assign(kafkaJs, { fetch: prototype.fetch, leave: prototype.leave, joinAndSync: prototype.joinAndSync });
  prototype.fetch = async function (...args) {
    const member = memberOf(this.memberId);
    if (member !== undefined && member === crashNext) {
      crashNext = undefined;
      journal.push({ member, what: 'crash' });
      throw new KafkaJSNonRetriableError('injected: a fault KafkaJS does not retry, in its fetch loop');
    }
    return kafkaJs.fetch.apply(this, args);
  };
  // Recorded once the LeaveGroup was answered: after whatever the library waits for first.
  prototype.leave = async function (...args) {
    const member = memberOf(this.memberId);
    const left = await kafkaJs.leave.apply(this, args);
    if (member) journal.push({ member, what: 'left' });
    return left;
  };
  prototype.joinAndSync = async function (...args) {
    const joined = await kafkaJs.joinAndSync.apply(this, args);
    const member = memberOf(this.memberId);
    if (member) journal.push({ member, what: 'joined' });
    return joined;
  };
}

function unwatchConsumerGroups(): void {
  Object.assign(ConsumerGroup.prototype, kafkaJs);
}

/**
 * A member's partitions' workers end their units of work before it leaves the group, on every path that leaves
 * it: also when KafkaJS crashes the consumer, where KafkaJS's stop no longer waits for anything (the library's
 * batches return at once, their units running on in the workers). And a worker that outlived its partition's
 * revocation commits without an error.
 */
describe('library: partition workers and the group', () => {
  let kafka: Kafka;
  let databaseUrl: string;
  const dir = schemasDirectory('drain', { 'item.avsc': ITEM });
  const schema = SchemaRegistry.fromDirectory(dir).current('test.drain.Item');
  const item = (id: string, partition: number) => ({ key: id, partition, value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } });
  const modules: TestingModule[] = [];
  const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('worker_drain');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY, times int NOT NULL)');
    watchConsumerGroups();
    Logger.overrideLogger(logger);
  });

  afterEach(async () => {
    latch?.open();
    for (const moduleRef of modules.splice(0)) await moduleRef.close();
  });

  afterAll(() => {
    unwatchConsumerGroups();
  });

  const applied = async (ids: string[]) => queryDatabase<{ id: string; times: number }>(databaseUrl, 'SELECT id, times FROM applied WHERE id = ANY($1) ORDER BY id', [ids]);

  it("a worker that outlived its partition's revocation commits without an error", async () => {
    const prefix = `${uniqueTopic('revoked-worker')}.`;
    const group = `${prefix}group`;
    const topic = `${prefix}items`;
    await createTopics(kafka, [topic, `${prefix}items.done`], 1);
    newLatch();
    // The drain before a rejoin waits the rebalance timeout at most: 6 s here, then C rejoins, its worker running.
    const c = await startLibraryModule(itemsModule('drain-c', group, prefix, databaseUrl, dir, { sessionTimeout: 6000, rebalanceTimeout: 6000 }), logger);
    modules.push(c);
    await sendRaw(kafka, topic, [item('held-2', 0)]);
    await waitUntil(async () => journal.some((e) => e.member === 'drain-c' && e.what === 'start' && e.id === 'held-2'), 60000, "C's handler holding held-2");

    // Another member joins: a plain KafkaJS consumer (KafkaJS's own client: none of the library's corrections),
    // whose member id sorts first, so it is given the partition. It neither handles nor commits anything, nor does
    // it fence C's producer: C's unit of work commits after the rebalance.
    const other = new Kafka({ clientId: 'a-plain-member', brokers: kafkaBrokers(), logLevel: logLevel.NOTHING }).consumer({ groupId: group, sessionTimeout: 6000, rebalanceTimeout: 10000, heartbeatInterval: 500, maxWaitTimeInMs: 100 });
    let otherAssigned: number[] = [];
    other.on(other.events.GROUP_JOIN, ({ payload }) => {
      otherAssigned = payload.memberAssignment[topic] ?? [];
    });
    await other.connect();
    try {
      await other.subscribe({ topics: [topic], fromBeginning: true });
      await other.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: async ({ pause }) => void pause() });
      await waitUntil(async () => otherAssigned.includes(0) && assignment(c, topic).length === 0, 60000, 'the partition given to the other member');
      const errorsBefore = logger.lines.filter((l) => l.level === 'error').length;
      latch.open();
      await waitUntil(async () => (await applied(['held-2'])).length === 1, 60000, 'held-2 applied');
      await waitForGroupCaughtUp(kafka, group, topic, 60000);
      // The worker's steps after its commit: given a moment to log what they would.
      await waitUntil(async () => logger.lines.filter((l) => l.level === 'error').length > errorsBefore, 3000).catch(() => undefined);
      expect(logger.lines.filter((l) => l.level === 'error').slice(errorsBefore)).toEqual([]);
    } finally {
      await other.disconnect();
    }

    // The partition comes back to C, which goes on from the committed offset: each record once.
    await sendRaw(kafka, topic, [item('after-3', 0)]);
    await waitUntil(async () => (await applied(['after-3'])).length === 1, 120000, 'after-3 applied');
    await waitForGroupCaughtUp(kafka, group, topic, 60000);
    expect(await applied(['held-2', 'after-3'])).toEqual([
      { id: 'after-3', times: 1 },
      { id: 'held-2', times: 1 },
    ]);
    const done = await readTopic(kafka, `${prefix}items.done`, { until: quietAfter(2, 3000), timeoutMs: 60000, pollIdleMs: 500 });
    expect(done.map((r) => r.key).sort()).toEqual(['after-3', 'held-2']);
    expect(journal.filter((e) => e.member === 'drain-c' && e.what === 'start' && e.id === 'held-2')).toHaveLength(1);
  }, 300000);

  it('a consumer that KafkaJS crashes mid-unit leaves the group only after its units ended, and starts none after', async () => {
    const prefix = `${uniqueTopic('crash-drain')}.`;
    const group = `${prefix}group`;
    const topic = `${prefix}items`;
    await createTopics(kafka, [topic], 2);
    await createTopics(kafka, [`${prefix}items.done`], 1);
    newLatch();
    // Sessions and drains long enough that neither ends during the test's waits on a loaded machine.
    const timeouts = { sessionTimeout: 15000, rebalanceTimeout: 45000 };
    const a = await startLibraryModule(itemsModule('drain-a', group, prefix, databaseUrl, dir, timeouts), logger);
    modules.push(a);
    const b = await startLibraryModule(itemsModule('drain-b', group, prefix, databaseUrl, dir, timeouts), logger);
    modules.push(b);
    await waitUntil(async () => assignment(a, topic).length === 1 && assignment(b, topic).length === 1, 60000, 'one partition each');
    const [partitionOfA] = assignment(a, topic);
    const [partitionOfB] = assignment(b, topic);

    // Held in A's handler: its unit of work is in flight when KafkaJS crashes (two more records of A's partition wait).
    await sendRaw(kafka, topic, [item('held-1', partitionOfA), item('after-1', partitionOfA), item('after-2', partitionOfA), item('b-1', partitionOfB)]);
    await waitUntil(async () => journal.some((e) => e.member === 'drain-a' && e.what === 'start' && e.id === 'held-1'), 60000, "A's handler holding held-1");
    crashNext = 'drain-a';
    await waitUntil(async () => journal.some((e) => e.member === 'drain-a' && e.what === 'crash'), 30000, "A's KafkaJS consumer crashed");
    // A consumer that left the group at once, its worker still in the handler, would be seen leaving here (and its
    // partition would go to B); then the handler goes on.
    await waitUntil(async () => journal.some((e) => e.member === 'drain-a' && e.what === 'left'), 8000).catch(() => undefined);
    latch.open();

    const ids = ['held-1', 'after-1', 'after-2', 'b-1'];
    await waitUntil(async () => (await applied(ids)).length === ids.length, 120000, 'every record applied');
    await waitForGroupCaughtUp(kafka, group, topic, 120000);
    await waitUntil(async () => journal.some((e) => e.member === 'drain-a' && e.what === 'left'), 60000, "A's consumer left the group");

    // It was KafkaJS's crash, which the library recovers from with a new consumer.
    expect(logger.lines.some((l) => l.level === 'error' && /crashed \(KafkaJS does not restart it; starting a new one\): .*injected/.test(l.message))).toBe(true);
    const ofA = journal.filter((e) => e.member === 'drain-a');
    const left = ofA.findIndex((e) => e.what === 'left');
    // Every call A started before the crash ended before its LeaveGroup: its unit of work ran to its end first.
    const beforeLeaving = ofA.slice(0, left);
    const ended = beforeLeaving.filter((e) => e.what === 'end').map((e) => e.id);
    expect(ended).toEqual(beforeLeaving.filter((e) => e.what === 'start').map((e) => e.id));
    expect(ended).toContain('held-1');
    // And from the LeaveGroup until A's new consumer joined, no call of A started or ended.
    const rejoined = ofA.findIndex((e, i) => i > left && e.what === 'joined');
    expect(ofA.slice(left + 1, rejoined < 0 ? undefined : rejoined).filter((e) => e.what === 'start' || e.what === 'end')).toEqual([]);
    // A's units committed as the partition's owner: no producer of the group was fenced by a new owner meanwhile.
    expect(logger.lines.filter((l) => /producer fenced/.test(l.message))).toEqual([]);

    // Exactly once: each record's write and output once.
    expect(await applied(ids)).toEqual(ids.map((id) => ({ id, times: 1 })).sort((x, y) => x.id.localeCompare(y.id)));
    const done = await readTopic(kafka, `${prefix}items.done`, { until: quietAfter(ids.length, 3000), timeoutMs: 60000, pollIdleMs: 500 });
    expect(done.map((r) => r.key).sort()).toEqual([...ids].sort());
  }, 300000);
});
