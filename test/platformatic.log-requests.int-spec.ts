import { spawnSync } from 'child_process';
import type { Producer } from 'kafkajs';
import type { LogRecord, LogRequests } from 'kafka-exactly-once/client/log-requests';
import { KafkaJsLogRequests, txnMarkersV1 } from 'kafka-exactly-once/kafkajs/log-requests';
import { kafkaBrokers, REPO_ROOT } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { nodeBinary } = require('../scripts/node/node-binary.js') as { nodeBinary(major: string): string };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Encoder = require('kafkajs/src/protocol/encoder');

type Answer = { ok: unknown } | { error: { name?: string; type?: string; message: string } };
type Step = { call: keyof LogRequests; args?: unknown[] } | { encodeMarkers: unknown[] } | { decodeMarkers: string };

/** As the probe writes its answers: bigints as { bigint }, buffers as { hex }. */
function written(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? { bigint: v.toString() } : v && v.type === 'Buffer' && Array.isArray(v.data) ? { hex: Buffer.from(v.data).toString('hex') } : v)));
}

function ok(answer: Answer): unknown {
  if ('error' in answer) throw new Error(`the platformatic driver's request failed: ${JSON.stringify(answer.error)}`);
  return answer.ok;
}

/** What the library reads of a record (hanging-transactions.ts, partition-logs.ts): all of it, key, value and headers as hex. */
const read = (records: LogRecord[]) => written(records.map((r) => ({ offset: r.offset, timestamp: r.timestamp, key: r.key, value: r.value, headers: r.headers, isControlRecord: r.isControlRecord, producerId: r.producerId, inTransaction: r.inTransaction })));

/**
 * The library's own requests (src/client/log-requests.ts) on each driver, asked the same questions of the same log:
 * KafkaJS's (KafkaJsLogRequests, in this process) and @platformatic/kafka's (PlatformaticLogRequests, in a Node.js 24
 * child, test/fixtures/log-requests-probe.js, on the library's build). The log holds a plain record, a committed
 * transaction, an aborted one, another committed one and one still open: what the hanging-transaction recovery and
 * the outbox checkpoints read. Also the WriteTxnMarkers v1 codec of each driver, byte for byte.
 */
describe("the library's own requests on @platformatic/kafka: KafkaJS's answers, on the real broker", () => {
  const kafka = testKafka('log-requests-tests');
  const topic = uniqueTopic('log-requests');
  const kafkaJs = new KafkaJsLogRequests(kafka);
  const producers: Producer[] = [];
  let open: Producer;

  async function transaction(id: string, values: string[], end: 'commit' | 'abort' | 'open'): Promise<Producer> {
    const producer = kafka.producer({ transactionalId: id, idempotent: true, maxInFlightRequests: 1 });
    producers.push(producer);
    await producer.connect();
    const tx = await producer.transaction();
    await tx.send({ topic, messages: values.map((value) => ({ key: `k-${value}`, value, headers: { 'message-id': value, trace: Buffer.from([0, 255]) } })) });
    if (end === 'commit') await tx.commit();
    if (end === 'abort') await tx.abort();
    return end === 'open' ? Object.assign(producer, { tx }) : producer;
  }

  beforeAll(async () => {
    await createTopics(kafka, [topic], 1);
    // Idempotent: a send KafkaJS retries on a broker that just made the topic is not written twice.
    const plain = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    producers.push(plain);
    await plain.connect();
    await plain.send({ topic, messages: [{ key: null, value: 'plain', headers: { a: '1', b: ['2', '3'] } }] });
    await transaction(`${topic}.a`, ['a1', 'a2'], 'commit'); // then its commit marker
    await transaction(`${topic}.b`, ['b1'], 'abort'); // then its abort marker
    await transaction(`${topic}.c`, ['c1'], 'commit');
    open = await transaction(`${topic}.d`, ['d1'], 'open'); // last, still open
    // A commit's or abort's marker is written after EndTxn answers: both drivers read the log once all three are in.
    const [{ leader }] = await kafkaJs.partitionsOf(topic, true);
    const deadline = Date.now() + 15000;
    while ((await kafkaJs.fetch(leader, topic, 0, 0n, 'uncommitted', 1048576)).records.filter((r) => r.isControlRecord).length < 3) {
      if (Date.now() > deadline) throw new Error('the transactions\' markers were not written within 15 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  afterAll(async () => {
    await (open as Producer & { tx?: { abort(): Promise<void> } })?.tx?.abort().catch(() => undefined);
    await Promise.all(producers.map((p) => p.disconnect().catch(() => undefined)));
    await kafkaJs.disconnect();
  });

  function probe(steps: Step[]): Answer[] {
    const run = spawnSync(nodeBinary('24'), ['test/fixtures/log-requests-probe.js'], {
      cwd: REPO_ROOT,
      env: { ...process.env, LOG_PLAN: JSON.stringify({ brokers: kafkaBrokers(), steps }) },
      encoding: 'utf8',
      timeout: 60000,
    });
    if (run.status !== 0) throw new Error(`log-requests-probe exited ${run.status}:\n${run.stdout}\n${run.stderr}`);
    return (JSON.parse(run.stdout.trim().split('\n').pop() as string) as { answers: Answer[] }).answers;
  }

  it('names partitions, brokers and coordinators, and reads offsets and records as KafkaJS does: markers and aborted records as control records', async () => {
    const [{ leader }] = await kafkaJs.partitionsOf(topic, true);
    // First by KafkaJS, which waits for a coordinator that a fresh broker has yet to make (__consumer_offsets).
    const coordinatorByKafkaJs = await kafkaJs.groupCoordinator(`${topic}.group`);
    const unknown = uniqueTopic('log-requests-unknown');
    const big = (n: number) => ({ bigint: String(n) });
    const answers = probe([
      { call: 'partitionsOf', args: [topic, true] },
      { call: 'brokers' },
      { call: 'groupCoordinator', args: [`${topic}.group`] },
      { call: 'listOffset', args: [leader, topic, 0, -1, 'uncommitted'] },
      { call: 'listOffset', args: [leader, topic, 0, -1, 'committed'] },
      { call: 'listOffset', args: [leader, topic, 0, -2, 'committed'] },
      { call: 'fetch', args: [leader, topic, 0, big(0), 'uncommitted', 1048576] },
      { call: 'fetch', args: [leader, topic, 0, big(0), 'committed', 1048576] },
      { call: 'describeProducers', args: [leader, [{ topic, partitions: [0] }]] },
      { call: 'partitionsOf', args: [unknown] },
    ]);
    const [partitions, brokers, coordinator, latest, stable, earliest, uncommitted, committed, described, missing] = answers;

    expect(ok(partitions)).toEqual([{ partition: 0, leader }]);
    expect(ok(brokers)).toEqual(await kafkaJs.brokers());
    expect(ok(coordinator)).toBe(coordinatorByKafkaJs);
    const kafkaJsUncommitted = await kafkaJs.fetch(leader, topic, 0, 0n, 'uncommitted', 1048576);
    const kafkaJsCommitted = await kafkaJs.fetch(leader, topic, 0, 0n, 'committed', 1048576);
    const last = kafkaJsUncommitted.records[kafkaJsUncommitted.records.length - 1];
    const openAt = kafkaJsUncommitted.records.find((r) => r.value?.toString() === 'd1')!;
    // The open transaction holds the last stable offset back at its first record; the high watermark is past it.
    const [hw, lso] = [BigInt(last.offset) + 1n, BigInt(openAt.offset)];
    expect(await kafkaJs.listOffset(leader, topic, 0, -1, 'uncommitted')).toBe(hw);
    expect(await kafkaJs.listOffset(leader, topic, 0, -1, 'committed')).toBe(lso);
    expect([ok(latest), ok(stable), ok(earliest)]).toEqual([big(Number(hw)), big(Number(lso)), big(0)]);
    expect(ok(uncommitted)).toEqual({ errorCode: 0, records: read(kafkaJsUncommitted.records) });
    expect(ok(committed)).toEqual({ errorCode: 0, records: read(kafkaJsCommitted.records) });
    // What both read: every offset up to the last stable one (committed) or the high watermark, markers as control
    // records, and the aborted transaction's record as one too when read committed.
    // Each record by its value, a marker by its type (a control record's key: version, then 0 abort or 1 commit).
    // A commit's markers are written after EndTxn answers: the next transaction's records may come before them, so
    // the records are compared as a set here (and in order between the drivers above).
    const control = (records: LogRecord[]) => records.map((r) => JSON.stringify([r.isControlRecord && r.key?.length === 4 && r.key.readInt16BE(0) === 0 ? ['abort', 'commit'][r.key.readInt16BE(2)] : r.value?.toString(), r.isControlRecord])).sort();
    const expected = (pairs: Array<[string, boolean]>) => pairs.map((p) => JSON.stringify(p)).sort();
    expect(control(kafkaJsUncommitted.records)).toEqual(expected([['plain', false], ['a1', false], ['a2', false], ['commit', true], ['b1', false], ['abort', true], ['c1', false], ['commit', true], ['d1', false]]));
    // Read committed: what was read uncommitted below the open transaction's first record (the last stable offset),
    // the aborted transaction's record a control record too.
    const belowStable = kafkaJsUncommitted.records.filter((r) => BigInt(r.offset) < lso);
    expect(kafkaJsCommitted.records.map((r) => r.offset)).toEqual(belowStable.map((r) => r.offset));
    expect(control(kafkaJsCommitted.records)).toEqual(control(belowStable.map((r) => (r.value?.toString() === 'b1' ? { ...r, isControlRecord: true } : r))));
    expect(kafkaJsCommitted.records.find((r) => r.value?.toString() === 'b1')?.isControlRecord).toBe(true);
    expect(kafkaJsUncommitted.records[0]).toMatchObject({ key: null, value: Buffer.from('plain'), inTransaction: false, headers: [['a', Buffer.from('1')], ['b', Buffer.from('2')], ['b', Buffer.from('3')]] });

    // The open transaction, on both: its producer, since its first record.
    const kafkaJsDescribed = await kafkaJs.describeProducers(leader, [{ topic, partitions: [0] }]);
    expect(kafkaJsDescribed).toEqual([{ topic, partition: 0, errorCode: 0, producers: [expect.objectContaining({ startOffset: openAt.offset, producerId: openAt.producerId })] }]);
    expect(ok(described)).toEqual(written(kafkaJsDescribed));

    expect(missing).toEqual({ error: expect.objectContaining({ type: 'UNKNOWN_TOPIC_OR_PARTITION' }) });
    await expect(kafkaJs.partitionsOf(unknown)).rejects.toMatchObject({ type: 'UNKNOWN_TOPIC_OR_PARTITION' });
  });

  it('names the open transaction by its coordinator as KafkaJS does (ListTransactions)', async () => {
    const [{ leader }] = await kafkaJs.partitionsOf(topic);
    const [{ producers: [holder] }] = await kafkaJs.describeProducers(leader, [{ topic, partitions: [0] }]);
    const byKafkaJs = (await Promise.all((await kafkaJs.brokers()).map((b) => kafkaJs.listTransactions(b, [holder.producerId])))).flat();
    expect(byKafkaJs).toEqual([{ transactionalId: `${topic}.d`, producerId: holder.producerId, state: 'Ongoing' }]);
    const answers = probe((await kafkaJs.brokers()).map((b) => ({ call: 'listTransactions' as const, args: [b, [holder.producerId]] })));
    expect(answers.flatMap((a) => ok(a) as unknown[])).toEqual(byKafkaJs);
  });

  it('writes and reads WriteTxnMarkers v1 as the KafkaJS driver does, byte for byte', async () => {
    const marker = { producerId: '4096', producerEpoch: 5, coordinatorEpoch: 2, commit: false };
    const topics = [{ topic: 'out', partitions: [1, 3] }, { topic: '__consumer_offsets', partitions: [9] }];
    // KafkaJS's body opens with request header v2's tagged fields, which the other client's connection writes itself.
    const kafkaJsBody = ((await txnMarkersV1(marker.producerId, marker.producerEpoch, marker.coordinatorEpoch, marker.commit, topics).request.encode()) as { buffer: Buffer }).buffer;
    const commitBody = ((await txnMarkersV1(marker.producerId, marker.producerEpoch, marker.coordinatorEpoch, true, topics).request.encode()) as { buffer: Buffer }).buffer;
    // An answer: one marker, two topics, a partition refused (CLUSTER_AUTHORIZATION_FAILED), after response header v1's tagged fields.
    const answer = new Encoder()
      .writeUVarInt(0)
      .writeUVarInt(2)
      .writeInt64('4096')
      .writeUVarInt(3)
      .writeUVarIntString('out')
      .writeUVarInt(2)
      .writeInt32(1)
      .writeInt16(0)
      .writeUVarInt(0)
      .writeUVarInt(0)
      .writeUVarIntString('__consumer_offsets')
      .writeUVarInt(2)
      .writeInt32(9)
      .writeInt16(31)
      .writeUVarInt(0)
      .writeUVarInt(0)
      .writeUVarInt(0)
      .writeUVarInt(0).buffer as Buffer;
    const [encoded, encodedCommit, decoded] = probe([{ encodeMarkers: [marker, topics] }, { encodeMarkers: [{ ...marker, commit: true }, topics] }, { decodeMarkers: answer.subarray(1).toString('hex') }]);
    expect(ok(encoded)).toBe(kafkaJsBody.subarray(1).toString('hex'));
    expect(ok(encodedCommit)).toBe(commitBody.subarray(1).toString('hex'));
    expect(ok(decoded)).toEqual(await txnMarkersV1('4096', 5, 2, false, []).response.decode(answer));
    expect(ok(decoded)).toEqual([
      { topic: 'out', partition: 1, errorCode: 0 },
      { topic: '__consumer_offsets', partition: 9, errorCode: 31 },
    ]);
  });
});
