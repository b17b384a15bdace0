import type { Type } from '@nestjs/common';
import { SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { partitionTransactionalId } from 'kafka-exactly-once/transaction/transactional-ids';
import { createSuiteDatabase } from './database';
import { kafkaBrokers } from './environment';
import { leaveHangingTransaction } from './hanging';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic, withAdmin } from './kafka';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './library';
import { waitForGroupCaughtUp } from './payments';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { filingModule } = require('../fixtures/filing-app.js') as { filingModule(settings: { label: string; prefix: string; schemas: string; brokers: string[]; databaseUrl: string }): unknown };

/** The notes of the hanging-transaction suites (test/fixtures/filing-app.js files each, writing a NoteFiled). */
export const NOTE = { type: 'record', name: 'Note', namespace: 'test.hanging', fields: [{ name: 'id', type: 'string' }] };
const FILED = { type: 'record', name: 'NoteFiled', namespace: 'test.hanging', fields: [{ name: 'id', type: 'string' }] };

/**
 * A group whose partition's own producer will be found hanging: its topics, database, the notes `ids` published
 * (each its own message id), and the module of test/fixtures/filing-app.js (each note applied and filed) with a
 * short transaction timeout, so that a hanging transaction is found past it in seconds; `env` runs the same module
 * as a process of its own.
 */
export async function filingSetup(label: string, ids: string[]) {
  const kafka = testKafka();
  const prefix = `${uniqueTopic(label)}.`;
  const group = `${prefix}group`;
  const topic = `${prefix}notes`;
  const filed = `${prefix}notes.filed`;
  const archive = `${prefix}notes.archive`;
  const dir = schemasDirectory(label, { 'note.avsc': NOTE, 'filed.avsc': FILED });
  await createTopics(kafka, [topic, filed, archive], 1);
  const databaseUrl = await createSuiteDatabase(label.replace(/-/g, '_'));
  await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
  const schema = SchemaRegistry.fromDirectory(dir).current('test.hanging.Note');
  await sendRaw(kafka, topic, ids.map((id) => ({ key: 'k', value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));
  const FilingModule = filingModule({ label, prefix, schemas: dir, brokers: kafkaBrokers(), databaseUrl }) as Type<unknown>;
  const env = { KAFKA_BROKERS: kafkaBrokers().join(','), DATABASE_URL: databaseUrl, FILING_LABEL: label, FILING_PREFIX: prefix, FILING_SCHEMAS: dir };

  // The partition's own transactional id.
  const own = partitionTransactionalId(label, group, topic, 0);
  return { kafka, group, topic, filed, archive, databaseUrl, own, FilingModule, env };
}

/**
 * What a broker crash can leave: both records handled and their outputs committed, with the offsets, by the
 * partition's own producer (their commit marker written on the output partition), then the group's offset behind
 * both and a transaction of that producer holding the offset past them pending on the offsets' partition, which no
 * coordinator ends.
 */
export async function handledThenHanging(setup: Awaited<ReturnType<typeof filingSetup>>): Promise<{ producerId: number }> {
  const { kafka, group, topic, filed, own, FilingModule } = setup;
  const moduleRef = await startLibraryModule(FilingModule);
  try {
    await waitForGroupCaughtUp(kafka, group, topic, 60000);
  } finally {
    await moduleRef.close();
  }
  const before = await readTopic(kafka, filed, { until: quietAfter(2, 2000), pollIdleMs: 250, timeoutMs: 30000 });
  expect(before.map((r) => r.key)).toEqual(['n-1', 'n-2']);
  await withAdmin(kafka, (admin) => admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '0' }] }));
  return leaveHangingTransaction(kafka, own, { groupId: group, topic, partition: 0, offset: '2' }, []);
}

/** Each output once, read committed, and each record applied once (their inbox rows replayed, the handler not run again). */
export async function expectFiledOnce({ kafka, filed, databaseUrl }: Awaited<ReturnType<typeof filingSetup>>): Promise<void> {
  const after = await readTopic(kafka, filed, { until: quietAfter(2, 3000), pollIdleMs: 250, timeoutMs: 30000 });
  expect(after.map((r) => r.key)).toEqual(['n-1', 'n-2']);
  expect(await queryDatabase(databaseUrl, 'SELECT id FROM applied ORDER BY id')).toEqual([{ id: 'n-1' }, { id: 'n-2' }]);
}
