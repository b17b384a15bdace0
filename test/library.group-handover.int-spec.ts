import { Kafka } from 'kafkajs';
import { join } from 'path';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, sendRaw } from './support/library';
import { waitUntil } from './support/payments';
import { AppProcess, ProcessGroup } from './support/processes';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { nodeBinary } = require('../scripts/node/node-binary.js') as { nodeBinary(major: string): string };

interface Unit {
  member: string;
  partition: number;
  offset: string;
  started_at: string;
  ended_at: string;
}

const PARTITIONS = 4;
const PER_PARTITION = 4;

/**
 * A partition handed from one member to another on the platformatic driver, under each group protocol: the
 * classic one (the client's membership; the library drains every worker before the member rejoins) and Kafka 4's
 * (KIP-848, the library's own membership: a partition taken away is released once its worker is drained, the
 * member's other partitions going on). The first member is 10 s into a call on every partition when the second
 * joins and takes some of them: the handover is clean (the unit in flight commits before the new owner begins: no
 * producer fenced mid-unit, nothing for the new owner to replay), no two members' calls on a partition overlap,
 * and every record is applied once. Without the drains, the first member's units are fenced (the test fails so).
 * Each member is a process of its own on Node.js 24 (the client's range), against the suite's broker (Kafka 4.4 in
 * CI's first pass).
 */
/**
 * The third case: a group whose members run different drivers (the first KafkaJS, the second platformatic, on the
 * classic protocol), as while an application moves from one driver to the other one instance at a time: they agree
 * on the group's protocol name, and the handover between them is as clean.
 */
const CASES = [
  { protocol: 'consumer', drivers: ['platformatic', 'platformatic'], name: 'platformatic driver, consumer protocol' },
  { protocol: 'classic', drivers: ['platformatic', 'platformatic'], name: 'platformatic driver, classic protocol' },
  { protocol: 'classic', drivers: ['kafkajs', 'platformatic'], name: 'a KafkaJS member, then a platformatic one, classic protocol' },
] as const;

describe.each(CASES)('library: a partition handed over between members, $name', ({ protocol, drivers }) => {
  const mixed = drivers[0] !== drivers[1];
  const label = mixed ? `${protocol}-mixed` : protocol;
  let kafka: Kafka;
  let databaseUrl: string;
  const processes = new ProcessGroup();
  const prefix = `${uniqueTopic(`handover-${label}`)}.`;

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase(`handover_${label.replace('-', '_')}`);
    await queryDatabase(databaseUrl, 'CREATE TABLE member_units (member text, partition int, "offset" text, started_at bigint, ended_at bigint); CREATE TABLE member_calls (LIKE member_units)');
    await createTopics(kafka, [`${prefix}work`], PARTITIONS);
  });

  afterAll(async () => {
    await processes.killAll();
  });

  function member(name: 'a' | 'b'): AppProcess {
    const env = { KAFKA_BROKERS: kafkaBrokers().join(','), DATABASE_URL: databaseUrl, MEMBER_NAME: name, MEMBER_PREFIX: prefix, MEMBER_PROTOCOL: protocol, MEMBER_DRIVER: drivers[name === 'a' ? 0 : 1], MEMBER_SLOW_OFFSET: '1', MEMBER_SLOW_MS: '10000' };
    return processes.add(new AppProcess(`${label}-${name}`, 'test/fixtures/member-app.js', env, join(REPO_ROOT, 'test-logs', `handover-${label}-${name}.log`), { node: nodeBinary('24') }));
  }

  /** What committed (`member_units`), or every handler call, committed or not (`member_calls`). */
  const units = (table = 'member_units') => queryDatabase<Unit>(databaseUrl, `SELECT member, partition, "offset", started_at::text, ended_at::text FROM ${table} ORDER BY partition, started_at`);

  it('hands a partition over cleanly: the unit in flight commits first, no two members work on it at once, every record applied once', async () => {
    const records = [];
    for (let partition = 0; partition < PARTITIONS; partition++) {
      for (let n = 0; n < PER_PARTITION; n++) records.push({ partition, key: `k-${partition}`, value: JSON.stringify({ n }), headers: { 'message-id': `w-${partition}-${n}` } });
    }
    await sendRaw(kafka, `${prefix}work`, records);

    const first = member('a');
    await first.waitForLog(/member a started/, 60000);
    // Offset 0 of each partition done: the first member is in offset 1's call (10 s) on every partition when the
    // second one joins and takes some of them.
    await waitUntil(async () => new Set((await units()).map((u) => u.partition)).size === PARTITIONS, 60000, 'member a working on every partition');
    const second = member('b');
    await second.waitForLog(/member b started/, 60000);
    await waitUntil(async () => (await units()).length >= PARTITIONS * PER_PARTITION, 120000, 'every record applied');

    const all = await units();
    // Once each.
    expect(new Set(all.map((u) => `${u.partition}/${u.offset}`)).size).toBe(PARTITIONS * PER_PARTITION);
    expect(all).toHaveLength(PARTITIONS * PER_PARTITION);
    // The second member took partitions over, and the first kept some.
    const owners = (name: string) => new Set(all.filter((u) => u.member === name).map((u) => u.partition));
    expect(owners('b').size).toBeGreaterThan(0);
    // On each partition, a call of another member began only after the last one of the member before had ended: every
    // call counted, also those of a unit that was fenced and rolled back (which fencing makes harmless, but which the
    // drain before a partition is given up is there to avoid).
    const calls = await units('member_calls');
    const overlaps: string[] = [];
    for (let partition = 0; partition < PARTITIONS; partition++) {
      const own = calls.filter((u) => u.partition === partition);
      for (let i = 1; i < own.length; i++) {
        const [before, after] = [own[i - 1], own[i]];
        if (before.member !== after.member && BigInt(after.started_at) < BigInt(before.ended_at)) overlaps.push(`${partition}: ${after.member}@${after.offset} began before ${before.member}@${before.offset} ended`);
      }
    }
    expect(overlaps).toEqual([]);
    // A clean handover: the unit running when its partition was taken away committed before the new owner began, so
    // that no producer was fenced mid-unit and the new owner had nothing to replay (each happens when the member
    // gives a partition up at once: the drains are what this shows).
    for (const [name, log] of [['a', first.logs()], ['b', second.logs()]]) {
      expect({ name, fenced: log.match(/producer fenced[^\n]*/g) ?? [], replayed: log.match(/[1-9]\d* replayed from the inbox/g) ?? [] }).toEqual({ name, fenced: [], replayed: [] });
    }
    if (protocol === 'consumer') {
      // KIP-848: the first member kept some of its partitions throughout, and each partition moved once at most.
      expect(owners('a').size).toBeGreaterThan(0);
      for (let partition = 0; partition < PARTITIONS; partition++) {
        const sequence = all.filter((u) => u.partition === partition).map((u) => u.member);
        const changes = sequence.filter((m, i) => i > 0 && m !== sequence[i - 1]).length;
        expect({ partition, changes: Math.min(changes, 1) }).toEqual({ partition, changes });
      }
      expect(first.logs()).toMatch(/joining, its consumer on @platformatic\/kafka/);
    }
    if (mixed) {
      expect(first.logs()).toMatch(/joining, its consumer on KafkaJS/);
      expect(second.logs()).toMatch(/joining, its consumer on @platformatic\/kafka/);
    }
    await Promise.all([first.stop(), second.stop()]);
  });
});
