import { Injectable, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { Kafka } from 'kafkajs';
import type { KafkaClient } from 'kafka-exactly-once/kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { StableOffsets } from 'kafka-exactly-once/kafkajs/stable-offsets';
import { InboxRetention } from 'kafka-exactly-once/inbox/inbox-retention';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';

const CREDIT = { type: 'record', name: 'Credit', namespace: 'test.retention', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class CreditsHandler {
  @IdempotentHandler({ topic: 'credits', schema: 'test.retention.Credit' })
  async onCredit(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (id, times) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET times = applied.times + 1', [event.id]);
  }
}

/**
 * The inbox row of a record handled in PostgreSQL whose Kafka commit did not happen (a crash between the two,
 * a partition stuck since) is what makes its next delivery a replay instead of a second handling. Retention by
 * age alone deleted it once it was older than `inbox.retentionDays`: here a second of it, with the group's
 * Kafka offset behind its records, as such a crash leaves it.
 */
describe('library: inbox retention and the Kafka commit', () => {
  let kafka: KafkaClient;
  const prefix = `${uniqueTopic('retention')}.`;
  const group = `${prefix}group`;
  const topic = `${prefix}credits`;
  const dir = schemasDirectory('retention', { 'credit.avsc': CREDIT });

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [topic], 1);
  });

  it("keeps the rows of records the group has not committed in Kafka, whatever their age; they replay, they are not handled again", async () => {
    const databaseUrl = await createSuiteDatabase('retention');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY, times int NOT NULL)');
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'retention-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: 'retention-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          inbox: { retentionIntervalMs: 0 },
        }),
      ],
      providers: [CreditsHandler],
    })
    class CreditsModule {}

    const schema = SchemaRegistry.fromDirectory(dir).current('test.retention.Credit');
    await sendRaw(kafka, topic, ['c-1', 'c-2'].map((id) => ({ key: id, value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));
    let moduleRef = await startLibraryModule(CreditsModule);
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length === 2, 60000, 'both credits applied');
    await waitForGroupCaughtUp(kafka, group, topic);
    await moduleRef.close();
    // As a crash between the PostgreSQL and the Kafka commit leaves it: the group's offset before both records.
    await withAdmin(kafka, (admin) => admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '0' }] }));
    await new Promise((r) => setTimeout(r, 1500)); // the rows are now older than the retention of one second
    // What an abort of a hanging transaction of the partition's producer found committed, for the records below
    // offset 2 (what is left of a count, what the record at offset 0 took) and, of a later abort, below offset 3.
    const committedOutputs = () => queryDatabase(databaseUrl, 'SELECT "offset"::int, digest, until_offset::int FROM kafka_eo_committed_outputs ORDER BY digest');
    await queryDatabase(
      databaseUrl,
      `INSERT INTO kafka_eo_committed_outputs (consumer_group, topic, partition, "offset", digest, count, until_offset) VALUES ($1, $2, 0, -1, 'a', 1, 2), ($1, $2, 0, 0, 'b', 1, 2), ($1, $2, 0, -1, 'c', 1, 3)`,
      [group, topic],
    );

    const dataSource = await new DataSource({ type: 'postgres', url: databaseUrl }).initialize();
    const offsets = new StableOffsets(kafka);
    try {
      const retention = new InboxRetention(dataSource, group, (t, partitions) => offsets.committedOffsets(group, t, partitions), {
        retentionDays: 1 / 86400,
        operationsRetentionDays: 30,
        retentionIntervalMs: 0,
        retentionBatchSize: 10,
      });
      const deleted = await retention.runOnce();
      // Whatever their age, kept while the group's committed offset is below the records they are for.
      expect(await committedOutputs()).toHaveLength(3);
      moduleRef = await startLibraryModule(CreditsModule);
      await waitForGroupCaughtUp(kafka, group, topic);
      await moduleRef.close();
      expect({ deleted, applied: await queryDatabase(databaseUrl, 'SELECT id, times FROM applied ORDER BY id') }).toEqual({
        deleted: 0,
        applied: [
          { id: 'c-1', times: 1 },
          { id: 'c-2', times: 1 },
        ],
      });
      // Committed in Kafka now: the rows go.
      await new Promise((r) => setTimeout(r, 1100));
      expect(await retention.runOnce()).toBe(2);
      expect(await committedOutputs()).toEqual([{ offset: -1, digest: 'c', until_offset: 3 }]);
    } finally {
      await offsets.disconnect();
      await dataSource.destroy();
    }
  });
});
