import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceModule, KafkaHealthIndicator, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers } from './support/environment';
import { createTopics, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.hanging', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.hanging.Note' })
  async onNote(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
  }
}

/**
 * A hanging transaction: offsets of the group pending in a transaction its coordinator no longer settles (after a
 * broker SIGKILL, with KafkaJS's transaction protocol v1). The partition cannot start; it must say so in the log
 * and in health, naming the transactional id and the commands an operator runs, and the member must stay in the
 * group while it waits. Here another producer holds the group's offsets in a transaction open for 10 minutes,
 * past the module's transaction timeout, which this group's InitProducerId cannot settle (another id).
 */
describe('library: a hanging transaction holding the committed offset', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('hanging')}.`;
  const group = `${prefix}group`;
  const topic = `${prefix}notes`;
  const dir = schemasDirectory('hanging', { 'note.avsc': NOTE });

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [topic], 1);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('is named in the log and in health with the commands to abort it; the member stays in the group; the partition starts once it is gone', async () => {
    const databaseUrl = await createSuiteDatabase('hanging');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
    const schema = SchemaRegistry.fromDirectory(dir).current('test.hanging.Note');
    await sendRaw(kafka, topic, [{ key: 'k', value: encodeSingleObject(schema, { id: 'n-1' }), headers: { 'message-id': 'n-1' } }]);
    const holderId = `${prefix}holder`;
    const holder = kafka.producer({ transactionalId: holderId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: 600000 });
    await holder.connect();
    const txn = await holder.transaction();
    await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '0' }] }] });

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'hanging-test', brokers: kafkaBrokers() },
          groupId: group,
          transactionalIdPrefix: 'hanging-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          transactionTimeoutMs: 5000,
          inbox: { idleInTransactionTimeoutMs: 5000 },
          consumer: { sessionTimeout: 6000, heartbeatInterval: 1000, stallAfterMs: 8000, maxRetryDelayMs: 2000 },
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}

    try {
      moduleRef = await startLibraryModule(NotesModule);
      const health = moduleRef.get(KafkaHealthIndicator);
      let message = '';
      await waitUntil(
        async () => {
          const result = (await health.isHealthy('kafka')).kafka as { status: string; message?: string };
          message = result.message ?? '';
          return result.status === 'down' && /hanging transaction/.test(message);
        },
        60000,
        'health down, naming the hanging transaction',
      );
      expect(message).toContain(`transactional id ${holderId}`);
      expect(message).toMatch(/kafka-transactions\.sh --bootstrap-server \S+ abort --topic __consumer_offsets --partition \d+ --start-offset \d+/);
      expect(message).toContain(`${topic}[0]`);
      // It waited heartbeating: one member, never kicked out (its id the same before and after the waits).
      const members = async () => withAdmin(kafka, async (admin) => (await admin.describeGroups([group])).groups[0].members.map((m) => m.memberId));
      const before = await members();
      await new Promise((r) => setTimeout(r, 7000)); // past the session timeout (6 s), the partition still waiting
      expect(await members()).toEqual(before);
      expect(before).toHaveLength(1);
      expect(await queryDatabase(databaseUrl, 'SELECT id FROM applied')).toEqual([]);
    } finally {
      await txn.abort();
      await holder.disconnect();
    }
    // The operator's way out (here: the holder aborts): the partition starts, the record is handled, health is up.
    await waitUntil(async () => (await queryDatabase(databaseUrl, 'SELECT id FROM applied')).length === 1, 60000, 'the record handled');
    await waitUntil(async () => ((await moduleRef!.get(KafkaHealthIndicator).isHealthy('kafka')).kafka as { status: string }).status === 'up', 30000, 'health up');
  });
});
