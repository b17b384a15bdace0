import { spawn } from 'child_process';
import { AssignerProtocol, type Admin, type Consumer, ConfigResourceTypes, logLevel } from 'kafkajs';
import { isKafkaUnavailable } from 'kafka-exactly-once/engine/error-classification';
import { createKafkaClient } from 'kafka-exactly-once/kafkajs';
import { kafkaBrokers, kafkaMajor, REPO_ROOT } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { nodeBinary } = require('../scripts/node/node-binary.js') as { nodeBinary(major: string): string };

interface ProbeError {
  name?: string;
  type?: string;
  code?: number;
  retriable?: boolean;
  message: string;
}
type Answer = { ok: unknown; ms: number } | { error: ProbeError; ms: number };
type Step = { call: string; args?: unknown[] } | { member: { groupId: string; topic: string } } | { pause: string };

/** An answer as JSON carries it (Buffers as { type: 'Buffer', data }), so that both sides compare alike. */
const json = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

function ok<T>(answer: Answer): T {
  if ('error' in answer) throw new Error(`the platformatic admin failed: ${JSON.stringify(answer.error)}`);
  return answer.ok as T;
}

function failure(answer: Answer): ProbeError {
  if (!('error' in answer)) throw new Error(`the platformatic admin answered ${JSON.stringify(answer.ok)}`);
  return answer.error;
}

async function kafkaJsFailure(question: Promise<unknown>): Promise<ProbeError> {
  try {
    await question;
  } catch (err) {
    const e = err as ProbeError;
    return { name: e.name, type: e.type, retriable: e.retriable, message: e.message };
  }
  throw new Error('KafkaJS answered');
}

/** Partitions in the order of their ids (KafkaJS asks OffsetFetch in the order of `[...ids].sort()`, as text). */
const byPartition = <T extends { partition: number }>(partitions: T[]): T[] => [...partitions].sort((a, b) => a.partition - b.partition);

/**
 * platformaticAdmin (src/platformatic/cluster-admin.ts), the library's admin questions on @platformatic/kafka, asked
 * what KafkaJS's admin is asked on the same topics and groups, field by field for each field the library reads.
 * KafkaJS answers in this process; the platformatic admin in a Node.js 24 child (test/fixtures/admin-probe.js, on the
 * library's build), which the client needs.
 */
describe('platformaticAdmin against the real broker: the answers of KafkaJS 2.2.4', () => {
  const kafka = testKafka('cluster-admin-tests');
  let admin: Admin;
  let node: string;
  const topic = uniqueTopic('cluster-admin');
  const configs = [
    { name: 'max.message.bytes', value: '2000000' },
    { name: 'cleanup.policy', value: 'compact' },
  ];

  beforeAll(async () => {
    node = nodeBinary('24');
    await createTopics(kafka, [{ topic, numPartitions: 3, configEntries: configs }]);
    admin = kafka.admin();
    await admin.connect();
    // A broker no group has used yet has no __consumer_offsets (the internal topic listTopics must name): a group's
    // coordinator, once asked for, makes it.
    const deadline = Date.now() + 30000;
    while (!(await admin.listTopics()).includes('__consumer_offsets')) {
      if (Date.now() > deadline) throw new Error('__consumer_offsets was not made within 30 s');
      await admin.fetchOffsets({ groupId: uniqueTopic('cluster-admin-warm-up'), topics: [topic] }).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  afterAll(async () => {
    await admin?.disconnect();
  });

  /**
   * Runs a plan in the child: its answers, and what still kept it alive after the admin was disconnected. At each
   * pause, `onPause` runs before the child goes on.
   */
  function probe(steps: Step[], options: { brokers?: string[]; retry?: { retries?: number; initialRetryTime?: number }; connectionTimeout?: number; onPause?: (name: string) => Promise<void> } = {}): Promise<{ answers: Answer[]; resources: string[] }> {
    const plan = { brokers: options.brokers ?? kafkaBrokers(), retry: options.retry, connectionTimeout: options.connectionTimeout, steps };
    const child = spawn(node, ['test/fixtures/admin-probe.js'], { cwd: REPO_ROOT, env: { ...process.env, ADMIN_PLAN: JSON.stringify(plan) }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let last = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const lines = stdout.split('\n');
      stdout = lines.pop() ?? '';
      for (const line of lines) {
        const message = JSON.parse(line) as { paused?: string };
        if (message.paused !== undefined) {
          void (options.onPause ?? (async () => undefined))(message.paused).then(
            () => child.stdin.write('\n'),
            (err: unknown) => {
              child.kill();
              stderr += `\nthe suite's work at pause ${message.paused} failed: ${String(err)}`;
            },
          );
        } else last = line;
      }
    });
    // The child exits on its own once its admin is disconnected; a connection left open would keep it (and fail here).
    const timer = setTimeout(() => child.kill(), 60000);
    return new Promise((resolve, reject) =>
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        if (code !== 0 || !last) reject(new Error(`admin-probe exited ${code} (${signal ?? 'no signal'}):\n${last}\n${stderr}`));
        else resolve(JSON.parse(last) as { answers: Answer[]; resources: string[] });
      }),
    );
  }

  it('names the topics, their partitions, the cluster and the configs as KafkaJS does; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, retriable', async () => {
    const unknown = uniqueTopic('cluster-admin-unknown');
    const { brokers } = await admin.describeCluster();
    const configQuery = {
      includeSynonyms: false,
      resources: [
        { type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['max.message.bytes', 'cleanup.policy'] },
        { type: ConfigResourceTypes.BROKER, name: String(brokers[0].nodeId), configNames: ['transaction.max.timeout.ms'] },
      ],
    };
    const withSynonyms = { includeSynonyms: true, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['max.message.bytes', 'retention.ms'] }] };
    const unknownConfigs = { includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: unknown, configNames: ['max.message.bytes'] }] };
    const before = await admin.listTopics();
    const { answers, resources } = await probe([
      { call: 'connect' },
      { call: 'connect' },
      { call: 'listTopics' },
      { call: 'fetchTopicMetadata', args: [{ topics: [topic] }] },
      { call: 'fetchTopicMetadata', args: [{ topics: [unknown] }] },
      { call: 'describeCluster' },
      { call: 'describeConfigs', args: [configQuery] },
      { call: 'describeConfigs', args: [withSynonyms] },
      { call: 'describeConfigs', args: [unknownConfigs] },
      { call: 'disconnect' },
      { call: 'disconnect' },
      // Asked after a disconnect: refused (nothing reopens a connection its owner closed), until connect.
      { call: 'describeCluster' },
      { call: 'connect' },
      { call: 'describeCluster' },
      { call: 'disconnect' },
    ]);
    const after = await admin.listTopics();
    const [, , listed, metadata, unknownMetadata, cluster, described, synonyms, unknownDescribed, , , refused, , again] = answers;

    // Every topic the metadata names, the internal ones too; others' suites may create or delete topics meanwhile.
    const names = new Set(ok<string[]>(listed));
    expect(names).toContain(topic);
    expect(names).toContain('__consumer_offsets');
    for (const name of before.filter((t) => after.includes(t))) expect(names).toContain(name);
    for (const name of names) expect([...before, ...after]).toContain(name);

    const kafkaJsMetadata = await admin.fetchTopicMetadata({ topics: [topic] });
    expect(ok(metadata)).toEqual(json(kafkaJsMetadata));
    expect(kafkaJsMetadata.topics[0].partitions.map((p) => Object.keys(p).sort())).toEqual(Array(3).fill(['isr', 'leader', 'offlineReplicas', 'partitionErrorCode', 'partitionId', 'replicas']));

    // The topic inspector reads the `type` as "missing".
    const kafkaJsUnknown = await kafkaJsFailure(admin.fetchTopicMetadata({ topics: [unknown] }));
    expect(kafkaJsUnknown).toMatchObject({ name: 'KafkaJSProtocolError', type: 'UNKNOWN_TOPIC_OR_PARTITION', retriable: true });
    expect(failure(unknownMetadata)).toMatchObject({ name: 'KafkaProtocolError', type: 'UNKNOWN_TOPIC_OR_PARTITION', code: 3, retriable: true });

    expect(ok(cluster)).toEqual(json(await admin.describeCluster()));
    expect(failure(refused)).toMatchObject({ name: 'KafkaConnectionError', message: 'the admin is disconnected' });
    expect(ok(again)).toEqual(ok(cluster));

    // KafkaJS's admin answers `resources` only (the platformatic one adds its type's throttleTime, 0).
    const kafkaJsDescribed = await admin.describeConfigs(configQuery);
    expect(ok<{ resources: unknown }>(described).resources).toEqual(json(kafkaJsDescribed.resources));
    const value = (answer: { resources: Array<{ configEntries: Array<{ configName: string; configValue: string }> }> }, resource: number, name: string) =>
      answer.resources[resource].configEntries.find((e) => e.configName === name)?.configValue;
    expect(value(kafkaJsDescribed, 0, 'max.message.bytes')).toBe('2000000');
    expect(value(kafkaJsDescribed, 0, 'cleanup.policy')).toBe('compact');
    expect(Number(value(kafkaJsDescribed, 1, 'transaction.max.timeout.ms'))).toBeGreaterThan(0);
    expect(ok<{ resources: unknown }>(synonyms).resources).toEqual(json((await admin.describeConfigs(withSynonyms)).resources));

    const kafkaJsUnknownConfigs = await kafkaJsFailure(admin.describeConfigs(unknownConfigs));
    expect(kafkaJsUnknownConfigs.type).toBe('UNKNOWN_TOPIC_OR_PARTITION');
    expect(failure(unknownDescribed)).toMatchObject({ name: 'KafkaProtocolError', type: kafkaJsUnknownConfigs.type, retriable: kafkaJsUnknownConfigs.retriable });

    // connect and disconnect twice, a question after the disconnect: no connection outlives the last disconnect.
    expect(answers.map((a) => 'error' in a)).toEqual([false, false, false, false, true, false, false, false, true, false, false, true, false, false, false]);
    expect(resources).not.toContain('TCPSocketWrap');
  });

  it('creates topics as KafkaJS does: true, then false when they exist, each with its own configs, their leaders there when it resolves', async () => {
    const [kafkaJsTopic, compacted, large, added] = ['cluster-admin-kafkajs', 'cluster-admin-compacted', 'cluster-admin-large', 'cluster-admin-added'].map(uniqueTopic);
    const first = await admin.createTopics({ topics: [{ topic: kafkaJsTopic, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true });
    const second = await admin.createTopics({ topics: [{ topic: kafkaJsTopic, numPartitions: 2, replicationFactor: 1 }], waitForLeaders: true });
    expect([first, second]).toEqual([true, false]);

    const topics = [
      { topic: compacted, numPartitions: 2, replicationFactor: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
      { topic: large, numPartitions: 1, replicationFactor: 1, configEntries: [{ name: 'max.message.bytes', value: '3000000' }] },
    ];
    const configQuery = { includeSynonyms: false, resources: [compacted, large].map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['cleanup.policy', 'max.message.bytes'] })) };
    const { answers } = await probe([
      { call: 'connect' },
      { call: 'createTopics', args: [{ topics, waitForLeaders: true }] },
      // At once: the wait for leaders is over (an admin of no retries: a missing leader is not asked again).
      { call: 'fetchTopicMetadata', args: [{ topics: [compacted, large] }] },
      { call: 'createTopics', args: [{ topics, waitForLeaders: true }] },
      { call: 'createTopics', args: [{ topics: [{ topic: kafkaJsTopic, numPartitions: 2 }] }] },
      { call: 'createTopics', args: [{ topics: [{ topic: compacted, numPartitions: 2 }, { topic: added, numPartitions: 1 }] }] },
      { call: 'disconnect' },
    ], { retry: { retries: 0 } });
    const [, created, metadata, createdAgain, createdByKafkaJs, someCreated] = answers;
    expect([ok(created), ok(createdAgain), ok(createdByKafkaJs)]).toEqual([true, false, false]);
    const led = ok<{ topics: Array<{ name: string; partitions: Array<{ leader: number }> }> }>(metadata);
    expect(Object.fromEntries(led.topics.map((t) => [t.name, [t.partitions.length, t.partitions.every((p) => p.leader >= 0)]]))).toEqual({ [compacted]: [2, true], [large]: [1, true] });
    // What it made, as KafkaJS reads it: each topic with its own configs.
    const described = await admin.describeConfigs(configQuery);
    expect(described.resources.map((r) => [r.resourceName, Object.fromEntries(r.configEntries.map((e) => [e.configName, e.configValue]))])).toEqual([
      [compacted, { 'cleanup.policy': 'compact', 'max.message.bytes': '1048588' }],
      [large, { 'cleanup.policy': 'delete', 'max.message.bytes': '3000000' }],
    ]);
    const partitions = (await admin.fetchTopicMetadata({ topics: [kafkaJsTopic, compacted, large] })).topics.map((t) => [t.name, t.partitions.length]);
    expect(Object.fromEntries(partitions)).toEqual({ [kafkaJsTopic]: 2, [compacted]: 2, [large]: 1 });

    // One topic there and one new: the new one was created, so true; KafkaJS answers false as soon as one existed.
    expect(ok(someCreated)).toBe(true);
    expect(await admin.listTopics()).toContain(added);
    const mixed = [uniqueTopic('cluster-admin-mixed'), kafkaJsTopic];
    expect(await admin.createTopics({ topics: mixed.map((t) => ({ topic: t, numPartitions: 1 })), waitForLeaders: false })).toBe(false);
    expect(await admin.listTopics()).toContain(mixed[0]);
  });

  describe('a group with a live member', () => {
    let consumer: Consumer | undefined;

    afterEach(async () => {
      await consumer?.disconnect();
      consumer = undefined;
    });

    it("describes a classic group and answers its committed offsets as KafkaJS does: the member's metadata and assignment as it sent them (decoded alike), an offset string per partition ('-1' where none) with its metadata or null; an unknown group is Dead without members", async () => {
      const group = `cluster-admin-classic-${uniqueTopic('g')}`;
      const unknown = `cluster-admin-unknown-${uniqueTopic('g')}`;
      const unknownTopic = uniqueTopic('cluster-admin-unknown');
      // Records under the offsets committed below (the consumer resets an offset past the end); keyed, as the topic is compacted.
      const producer = kafka.producer();
      await producer.connect();
      await producer.send({ topic, messages: [0, 2].flatMap((partition) => Array.from({ length: 8 }, (_, n) => ({ partition, key: `k${n}`, value: `${n}` }))) });
      await producer.disconnect();
      consumer = kafka.consumer({ groupId: group, sessionTimeout: 30000, heartbeatInterval: 1000 });
      const joined = new Promise<void>((resolve) => consumer!.on(consumer!.events.GROUP_JOIN, () => resolve()));
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({ autoCommit: false, eachMessage: async () => undefined });
      await joined;
      await consumer.commitOffsets([
        { topic, partition: 0, offset: '5', metadata: 'checkpoint' },
        { topic, partition: 2, offset: '7' },
      ]);

      const kafkaJs = await admin.describeGroups([group, unknown]);
      // Asked while this process's member heartbeats: the child runs beside it.
      const { answers } = await probe([
        { call: 'connect' },
        { call: 'describeGroups', args: [[group, unknown]] },
        { call: 'fetchOffsets', args: [{ groupId: group, topics: [topic] }] },
        { call: 'fetchOffsets', args: [{ groupId: unknown, topics: [topic] }] },
        { call: 'fetchOffsets', args: [{ groupId: group, topics: [unknownTopic] }] },
        { call: 'fetchOffsets', args: [{ groupId: group }] },
        { call: 'disconnect' },
      ]);
      const [, groups, committed, notCommitted, offsetsOfUnknownTopic, everyTopic] = answers;
      const described = ok<{ groups: Array<{ members: Array<{ memberAssignment: { data: number[] }; memberMetadata: { data: number[] } }> }> }>(groups);
      expect(described).toEqual(json(kafkaJs));

      // In the order the coordinator answers, the same for both.
      const live = kafkaJs.groups.find((g) => g.groupId === group)!;
      const dead = kafkaJs.groups.find((g) => g.groupId === unknown);
      expect(live).toMatchObject({ groupId: group, errorCode: 0, state: 'Stable', protocolType: 'consumer', protocol: 'RoundRobinAssigner' });
      expect(live.members).toHaveLength(1);
      expect(dead).toEqual({ errorCode: 0, groupId: unknown, state: 'Dead', protocolType: '', protocol: '', members: [] });
      // The operator overview decodes the assignment with KafkaJS's AssignerProtocol.
      const member = described.groups[kafkaJs.groups.indexOf(live)].members[0];
      const assignment = AssignerProtocol.MemberAssignment.decode(Buffer.from(member.memberAssignment.data));
      expect(Object.fromEntries(Object.entries(assignment?.assignment ?? {}).map(([t, ps]) => [t, [...ps].sort((a, b) => a - b)]))).toEqual({ [topic]: [0, 1, 2] });
      expect(assignment).toEqual(AssignerProtocol.MemberAssignment.decode(live.members[0].memberAssignment));
      expect(AssignerProtocol.MemberMetadata.decode(Buffer.from(member.memberMetadata.data))).toEqual(AssignerProtocol.MemberMetadata.decode(live.members[0].memberMetadata));

      const compared = (answer: Array<{ topic: string; partitions: Array<{ partition: number }> }>) => answer.map((t) => ({ topic: t.topic, partitions: byPartition(t.partitions) }));
      const kafkaJsOffsets = await admin.fetchOffsets({ groupId: group, topics: [topic] });
      expect(compared(ok(committed))).toEqual(compared(kafkaJsOffsets));
      expect(compared(kafkaJsOffsets)).toEqual([
        {
          topic,
          partitions: [
            { partition: 0, offset: '5', metadata: 'checkpoint' },
            { partition: 1, offset: '-1', metadata: null },
            { partition: 2, offset: '7', metadata: null },
          ],
        },
      ]);
      expect(compared(ok(notCommitted))).toEqual(compared(await admin.fetchOffsets({ groupId: unknown, topics: [topic] })));
      const kafkaJsUnknownTopic = await kafkaJsFailure(admin.fetchOffsets({ groupId: group, topics: [unknownTopic] }));
      expect(kafkaJsUnknownTopic.type).toBe('UNKNOWN_TOPIC_OR_PARTITION');
      expect(failure(offsetsOfUnknownTopic)).toMatchObject({ name: 'KafkaProtocolError', type: 'UNKNOWN_TOPIC_OR_PARTITION' });
      // No topics named: every partition the group committed.
      const kafkaJsEveryTopic = await admin.fetchOffsets({ groupId: group });
      expect(compared(ok(everyTopic))).toEqual(compared(kafkaJsEveryTopic));
      expect(compared(kafkaJsEveryTopic)).toEqual([{ topic, partitions: [expect.objectContaining({ partition: 0, offset: '5' }), expect.objectContaining({ partition: 2, offset: '7' })] }]);
    });

    // Kafka 4's consumer group protocol: a Kafka 3.9 broker (CI's second pass) does not run it.
    (kafkaMajor() >= 4 ? it : it.skip)('describes a group on the consumer protocol (KIP-848) as KafkaJS does: DescribeGroups below v6 answers it Dead, without members or an error', async () => {
      const group = `cluster-admin-kip848-${uniqueTopic('g')}`;
      let kafkaJs: unknown;
      const { answers } = await probe(
        [
          { call: 'connect' },
          { member: { groupId: group, topic } },
          { pause: 'member joined' },
          { call: 'describeGroups', args: [[group]] },
          { call: 'disconnect' },
        ],
        { onPause: async () => void (kafkaJs = json(await admin.describeGroups([group]))) },
      );
      const [, member, described] = answers;
      // The member had its partitions while both asked.
      expect(ok<{ memberId: string; assignments: Array<{ topic: string; partitions: number[] }> }>(member)).toMatchObject({ memberId: expect.any(String), assignments: [{ topic, partitions: [0, 1, 2] }] });
      expect(kafkaJs).toEqual({ groups: [{ errorCode: 0, groupId: group, state: 'Dead', protocolType: '', protocol: '', members: [] }] });
      expect(ok(described)).toEqual(kafkaJs);
    });
  });

  it('fails at once when no broker answers, with retries 0 (and after the retry delays with retries): KafkaConnectionError, which the library reads as Kafka unavailable', async () => {
    const away = ['127.0.0.1:1'];
    const { answers, resources } = await probe(
      [{ call: 'connect' }, { call: 'describeCluster' }, { call: 'listTopics' }, { call: 'fetchTopicMetadata', args: [{ topics: [topic] }] }, { call: 'describeGroups', args: [['g']] }, { call: 'disconnect' }],
      { brokers: away, retry: { retries: 0 }, connectionTimeout: 1000 },
    );
    const failures = answers.slice(0, 5).map(failure);
    for (const error of failures) {
      expect(error).toMatchObject({ name: 'KafkaConnectionError', retriable: true, unavailable: true });
    }
    // Within the connection timeout (1 s), each.
    expect(Math.max(...answers.slice(0, 5).map((a) => a.ms))).toBeLessThan(1500);
    expect('ok' in answers[5]).toBe(true);
    expect(resources).not.toContain('TCPSocketWrap');

    // With retries, each question is asked again after the retry delays (100 ms, then 200 ms) before it fails.
    const retried = await probe([{ call: 'describeCluster' }, { call: 'fetchTopicMetadata', args: [{ topics: [topic] }] }], { brokers: away, retry: { retries: 2, initialRetryTime: 100 } });
    for (const answer of retried.answers) {
      expect(failure(answer)).toMatchObject({ name: 'KafkaConnectionError', retriable: true });
      expect(answer.ms).toBeGreaterThanOrEqual(280);
      expect(answer.ms).toBeLessThan(1500);
    }

    // KafkaJS's admin, asked the same: a connection error too, which the library reads alike.
    const kafkaJsAway = createKafkaClient({ clientId: 'cluster-admin-away', brokers: away, connectionTimeout: 1000, retry: { retries: 0 }, logLevel: logLevel.NOTHING }).admin({ retry: { retries: 0 } });
    const kafkaJsError = await kafkaJsAway.connect().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isKafkaUnavailable(kafkaJsError)).toBe(true);
    await kafkaJsAway.disconnect();
  });
});
