import type { Type } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { KafkaClient } from 'kafka-exactly-once/kafkajs';
import { DataSource } from 'typeorm';
import { Outbox, SchemaRegistry } from 'kafka-exactly-once';
import { outboxTransactionalId } from 'kafka-exactly-once/transaction/transactional-ids';
import { OUTBOX_COLUMNS, outboxMessage, type OutboxRow } from 'kafka-exactly-once/outbox/outbox-event';
import { join } from 'path';
import { createSuiteDatabase } from './database';
import { kafkaBrokers, REPO_ROOT } from './environment';
import { endOn, leaveHangingTransaction } from './hanging';
import { createTopics, readTopic, ReadRecord, testKafka, uniqueTopic } from './kafka';
import { CapturingLogger, queryDatabase, schemasDirectory, startLibraryModule } from './library';
import { kafkaControl } from './broker';
import { AppProcess, ProcessGroup } from './processes';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { outboxModule } = require('../fixtures/outbox-app.js') as { outboxModule(settings: object): unknown };

const ENTRY = { type: 'record', name: 'Entry', namespace: 'test.outbox', fields: [{ name: 'account', type: 'string' }, { name: 'n', type: 'int' }, { name: 'note', type: 'string', default: '' }] };
const CLI = 'dist/libs/kafka-exactly-once/cli/kafka-eo.js';

/** A record of a hanging transaction (test/support/hanging.ts). */
type HangingRecord = Parameters<typeof leaveHangingTransaction>[3][number];

export interface Entry {
  account: string;
  n: number;
  note?: string;
}

/**
 * The set-up the outbox suites share (called in their describe): topics of their own (`<prefix>entries` with three
 * partitions, `<prefix>small`), test/fixtures/outbox-app.js's modules and `kafka-eo outbox relay` processes, all
 * closed or killed in afterAll (and the broker started again, if a test left it down), and what the tests write
 * and read with.
 */
export function outboxSuite(label = 'outbox') {
  let kafka: KafkaClient | undefined;
  const processes = new ProcessGroup();
  const prefix = `${uniqueTopic(label)}.`;
  const checkpointTopic = `${prefix}checkpoints`;
  const dir = schemasDirectory(label, { 'entry.avsc': ENTRY });
  const schema = SchemaRegistry.fromDirectory(dir).current('test.outbox.Entry');
  const modules: TestingModule[] = [];
  let relays = 0;
  const client = () => kafka as KafkaClient;

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [`${prefix}entries`, `${prefix}small`], 3);
  });

  afterAll(async () => {
    kafkaControl('start'); // never leave the broker down for the next suite
    await processes.killAll();
    for (const m of modules) await m.close().catch(() => undefined);
  });

  /** An application that writes to the outbox of `databaseUrl` (and relays it unless told not to). */
  async function startApp(
    databaseUrl: string,
    options: { relay: boolean; name?: string; checkpointTopic?: string; transactionTimeoutMs?: number; sendTimeoutMs?: number; logger?: CapturingLogger },
  ): Promise<{ outbox: Outbox; dataSource: DataSource; moduleRef: TestingModule }> {
    const { relay, name, transactionTimeoutMs, sendTimeoutMs } = options;
    const OutboxApp = outboxModule({ databaseUrl, brokers: kafkaBrokers(), prefix, schemas: dir, relay, name, checkpointTopic: options.checkpointTopic ?? checkpointTopic, transactionTimeoutMs, sendTimeoutMs }) as Type<unknown>;
    const moduleRef = await startLibraryModule(OutboxApp, options.logger);
    modules.push(moduleRef);
    return { outbox: moduleRef.get(Outbox), dataSource: moduleRef.get<DataSource>(getDataSourceToken()), moduleRef };
  }

  /** `kafka-eo outbox relay` as its own process, optionally armed to kill itself at a fault point. */
  function startRelay(databaseUrl: string, fault?: string, name?: string): AppProcess {
    const args = ['outbox', 'relay', '--prefix', `${prefix}app`, '--checkpoint-topic', checkpointTopic, '--batch-max-records', '7', ...(name ? ['--name', name] : [])];
    const env: Record<string, string> = { DATABASE_URL: databaseUrl, KAFKA_BROKERS: kafkaBrokers().join(','), ...(fault ? { KAFKA_EO_FAULT: fault } : {}) };
    return processes.add(new AppProcess(`relay-${++relays}`, CLI, env, join(REPO_ROOT, 'test-logs', `${label}-relay-${relays}.log`), { args }));
  }

  async function write(dataSource: DataSource, outbox: Outbox, entries: Entry[], options: { rollBack?: boolean } = {}): Promise<string[]> {
    const ids: string[] = [];
    await dataSource
      .transaction(async (manager) => {
        for (const entry of entries) {
          await manager.query('INSERT INTO business (account, n) VALUES ($1, $2)', [entry.account, entry.n]);
          ids.push((await outbox.add(manager, 'entries', entry)).messageId);
        }
        if (options.rollBack) throw new Error('rolled back on purpose');
      })
      .catch((err) => {
        if (!options.rollBack) throw err;
      });
    return ids;
  }

  async function outboxEmpty(databaseUrl: string): Promise<boolean> {
    const [row] = await queryDatabase(databaseUrl, 'SELECT count(*)::int AS n FROM kafka_eo_outbox');
    return row.n === 0;
  }

  /** The records of `entries` carrying these ids, once all are there and no more came for `quietMs` (a duplicate would). */
  async function readIds(ids: string[], options: { quietMs?: number; readUncommitted?: boolean } = {}): Promise<ReadRecord[]> {
    const wanted = new Set(ids);
    let count = -1;
    let since = Date.now();
    const records = await readTopic(client(), `${prefix}entries`, {
      until: (rs) => {
        const n = rs.filter((r) => wanted.has(r.headers['message-id'])).length;
        if (n !== count) [count, since] = [n, Date.now()];
        return n >= ids.length && Date.now() - since >= (options.quietMs ?? 1500);
      },
      pollIdleMs: 250,
      timeoutMs: 60000,
      readUncommitted: options.readUncommitted,
    });
    return records.filter((r) => wanted.has(r.headers['message-id']));
  }

  const decode = (r: ReadRecord) => schema.type.fromBuffer(r.value!.subarray(10)) as Entry;

  /** Each id once; per account, n increasing (the order they were written in, one writer per account here). */
  function expectOnceInOrder(records: ReadRecord[], ids: string[]): void {
    const seen = records.map((r) => r.headers['message-id']);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort()).toEqual([...ids].sort());
    const last = new Map<string, number>();
    for (const r of records) {
      const entry = decode(r);
      expect(r.key).toBe(entry.account);
      expect(entry.n).toBeGreaterThan(last.get(entry.account) ?? 0);
      last.set(entry.account, entry.n);
    }
  }

  /**
   * A hanging transaction of the relay's own producer (its name and the database's outbox id), left on a
   * checkpoint topic of its own and, with `records` (by default a record of no event's on a partition of the events'
   * topic), where its events went, as a broker crash can leave it: its checkpoint says `batch`, the database counts
   * `relayed` batches relayed and has given out batches up to `lastBatch`.
   */
  async function leaveRelayHanging(
    databaseUrl: string,
    checkpoints: string,
    { batch, relayed, lastBatch = relayed, records = [{ topic: `${prefix}entries`, partition: 1 }] }: { batch: number; relayed: number; lastBatch?: number; records?: HangingRecord[] },
  ): Promise<{ own: string; producer: { producerId: number; producerEpoch: number } }> {
    await createTopics(client(), [{ topic: checkpoints, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }]);
    const name = `${prefix}app`;
    const [{ outbox_id: outboxId }] = await queryDatabase(
      databaseUrl,
      `INSERT INTO kafka_eo_outbox_relay (id, name, relayed_batch, last_batch) VALUES (1, $1, $2, $3) RETURNING outbox_id::text`,
      [name, relayed, lastBatch],
    );
    const own = outboxTransactionalId(name, name, outboxId);
    const producer = await leaveHangingTransaction(client(), own, undefined, [
      { topic: checkpoints, partition: 0, key: `${name}:${outboxId}`, value: JSON.stringify({ batch: String(batch), events: 1, relayedAt: new Date().toISOString() }) },
      ...records,
    ]);
    return { own, producer };
  }

  /**
   * What a broker crash can leave of a batch the relay sent: its transaction committed on two of the events'
   * partitions (their commit markers written: those events visible, read committed) and open for good on the third
   * and on the checkpoint's, its coordinator done with it. The database does not count the batch relayed.
   */
  async function leaveBatchPartlyCommitted(label: string): Promise<{ databaseUrl: string; ids: string[]; checkpoints: string }> {
    const databaseUrl = await createSuiteDatabase(label);
    await queryDatabase(databaseUrl, 'CREATE TABLE business (account text, n int)');
    const writer = await startApp(databaseUrl, { relay: false });
    const ids = await write(writer.dataSource, writer.outbox, [1, 2, 3].map((n) => ({ account: `acct-${n}`, n })));
    const checkpoints = `${prefix}checkpoints-${label}`;
    // Batch 1: the three events given out, each sent to a partition of its own in the batch's transaction.
    await queryDatabase(databaseUrl, 'UPDATE kafka_eo_outbox SET batch = 1');
    const rows = await queryDatabase<OutboxRow>(databaseUrl, `SELECT ${OUTBOX_COLUMNS} FROM kafka_eo_outbox ORDER BY position`);
    const events = rows.map((row, partition) => {
      const { key, value, headers } = outboxMessage(row);
      return { topic: row.aggregatetype, partition, key: key as Buffer, value: value as Buffer, headers: headers as Record<string, string | Buffer> };
    });
    const { producer } = await leaveRelayHanging(databaseUrl, checkpoints, { batch: 1, relayed: 0, lastBatch: 1, records: events });
    await endOn(client(), producer, true, events.slice(0, 2));
    expect((await readIds(ids.slice(0, 2))).map((r) => r.headers['message-id']).sort()).toEqual(ids.slice(0, 2).sort());
    return { databaseUrl, ids, checkpoints };
  }

  return {
    kafka: client,
    processes,
    prefix,
    checkpointTopic,
    dir,
    schema,
    startApp,
    startRelay,
    write,
    outboxEmpty,
    readIds,
    expectOnceInOrder,
    leaveRelayHanging,
    leaveBatchPartlyCommitted,
  };
}
