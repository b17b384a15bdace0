import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { FAULT_ENV, encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { kafkaBrokers, testDriver } from './support/environment';
import { waitForGroupCaughtUp } from './support/payments';

const TICKET = { type: 'record', name: 'Ticket', namespace: 'test.timeout', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class TicketsHandler {
  readonly calls: string[] = [];

  @IdempotentHandler({ topic: 'tickets', schema: 'test.timeout.Ticket' })
  async onTicket(event: { id: string }, ctx: EventContext): Promise<void> {
    this.calls.push(event.id);
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
    ctx.emit('tickets.done', { id: event.id }, { key: event.id });
  }
}

/**
 * A process that stalls between the PostgreSQL commit and the Kafka commit for longer than the Kafka
 * transaction timeout: the broker aborts the transaction and bumps the producer's epoch. Nobody else owns
 * the partition, so this is not fencing: the member recovers at once (new producer, committed offset, outputs
 * replayed from the inbox) instead of waiting for a rebalance that never comes.
 */
describe('library: a transaction aborted by the broker (transaction timeout)', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule;
  let databaseUrl: string;
  const prefix = `${uniqueTopic('txn-timeout')}.`;
  const group = `${prefix}group`;
  const dir = schemasDirectory('timeout', { 'ticket.avsc': TICKET });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('txn_timeout');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
    await createTopics(kafka, [`${prefix}tickets`, `${prefix}tickets.done`], 1);

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'timeout-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: 'timeout-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { 'tickets.done': { schema: 'test.timeout.Ticket' } },
          consumer: { sessionTimeout: 45000, rebalanceTimeout: 60000 },
          transactionTimeoutMs: 3000,
        }),
      ],
      providers: [TicketsHandler],
    })
    class TicketsModule {}

    // The first unit of work blocks the process for 16 s after its PostgreSQL commit: past the 3 s
    // transaction timeout and the broker's 10 s sweep of timed-out transactions, within the session timeout.
    process.env[FAULT_ENV] = 'after-db-commit:1:delay=16000';
    try {
      moduleRef = await startLibraryModule(TicketsModule);
    } finally {
      delete process.env[FAULT_ENV];
    }
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('recovers on its own and commits every record once, outputs included', async () => {
    const schema = SchemaRegistry.fromDirectory(dir).current('test.timeout.Ticket');
    const ids = ['t-1', 't-2', 't-3', 't-4', 't-5'];
    await sendRaw(kafka, `${prefix}tickets`, ids.map((id) => ({ key: 'k', value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));

    await waitForGroupCaughtUp(kafka, group, `${prefix}tickets`, 90000);
    const done = await readTopic(kafka, `${prefix}tickets.done`, { until: (r) => r.length >= ids.length, timeoutMs: 30000 });
    expect(done.map((r) => r.key).sort()).toEqual(ids);

    const handler = moduleRef.get(TicketsHandler);
    expect([...handler.calls].sort()).toEqual(ids); // the handler ran once per record: the rest was replayed
    expect((await queryDatabase(databaseUrl, 'SELECT id FROM applied ORDER BY id')).map((r) => r.id)).toEqual(ids);
    const [partition] = moduleRef.get(KafkaExactlyOnceLifecycle).status()?.partitions ?? [];
    // It was recognised as the broker's abort, not as another owner, and the partition moved on.
    expect(partition).toMatchObject({ activity: 'idle', stalled: false, lastError: { kind: 'transaction-aborted' } });
  });
});
