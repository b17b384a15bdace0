import { Injectable, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw } from './support/library';
import { waitForGroupCaughtUp } from './support/payments';

const ITEM = { type: 'record', name: 'Item', namespace: 'test.bytes', fields: [{ name: 'id', type: 'string' }, { name: 'padding', type: 'string' }] };
const PARTITIONS = 4;
const RECORDS = 4000;
/** Records per produce request, so per record batch: the most the bound may be passed by is one such batch. */
const PER_SEND = 50;
const BOUND = 32 * 1024;

@Injectable()
class ItemsHandler {
  readonly calls: string[] = [];

  @IdempotentHandler({ topic: 'items', schema: 'test.bytes.Item' })
  async onItem(event: { id: string }, ctx: EventContext): Promise<void> {
    this.calls.push(event.id);
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
    ctx.emit('items.done', { id: event.id, padding: '' }, { key: event.id });
  }
}

/**
 * consumer.maxBytesInFlight: a consumer with a bound of 32 KiB over a backlog of 4,000 records (about 900 KB) on four
 * partitions handles every record once (rows, handler calls and outputs), while the bytes it held across its
 * partitions (the library's own count, ConsumerStatus.bytesInFlight) never passed the bound by more than one record
 * batch. On the pass's driver (KAFKA_CLIENT: CI's second pass runs it on the platformatic driver, on Node 24).
 */
const driver = testDriver();
describe(`library: the bytes held across partitions, ${driver} driver`, () => {
  let kafka: Kafka;
  let databaseUrl: string;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic(`bytes-${driver}`)}.`;
  const group = `${prefix}group`;
  const dir = schemasDirectory(`bytes-${driver}`, { 'item.avsc': ITEM });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase(`bytes_in_flight_${driver}`);
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
    await createTopics(kafka, [`${prefix}items`, `${prefix}items.done`], PARTITIONS);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('stay within the bound and one record batch, and every record is handled once', async () => {
    const schema = SchemaRegistry.fromDirectory(dir).current('test.bytes.Item');
    const ids = Array.from({ length: RECORDS }, (_, i) => `item-${String(i).padStart(5, '0')}`);
    const records = ids.map((id, i) => ({ key: `k-${i % 40}`, value: encodeSingleObject(schema, { id, padding: 'x'.repeat(150) }), headers: { 'message-id': id } }));
    // The backlog first: the consumer starts over all of it.
    for (let i = 0; i < records.length; i += PER_SEND) await sendRaw(kafka, `${prefix}items`, records.slice(i, i + PER_SEND));
    const recordBytes = (r: (typeof records)[number]) => r.key.length + r.value.length + 'message-id'.length + r.headers['message-id'].length;
    const largestBatch = PER_SEND * Math.max(...records.map(recordBytes));

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: `bytes-${driver}-test`, brokers: kafkaBrokers() },
          driver,
          groupId: group,
          transactionalIdPrefix: `bytes-${driver}-test`,
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { 'items.done': { schema: 'test.bytes.Item' } },
          consumer: { maxBytesPerPartition: 16 * 1024, maxBytesInFlight: BOUND },
        }),
      ],
      providers: [ItemsHandler],
    })
    class ItemsModule {}
    moduleRef = await Test.createTestingModule({ imports: [ItemsModule] }).compile();
    moduleRef.enableShutdownHooks();
    await moduleRef.init();
    const lifecycle = moduleRef.get(KafkaExactlyOnceLifecycle);
    await lifecycle.whenRunning();
    await waitForGroupCaughtUp(kafka, group, `${prefix}items`, 180000);

    const handler = moduleRef.get(ItemsHandler);
    expect([...handler.calls].sort()).toEqual(ids);
    expect((await queryDatabase<{ id: string }>(databaseUrl, 'SELECT id FROM applied ORDER BY id')).map((r) => r.id)).toEqual(ids);
    const outputs = await readTopic(kafka, `${prefix}items.done`, { until: (r) => r.length >= RECORDS, timeoutMs: 60000 });
    expect(outputs.map((r) => r.key).sort()).toEqual(ids);

    const bytes = lifecycle.status()!.bytesInFlight!;
    expect(bytes.limit).toBe(BOUND);
    // It did hold records, never more than the bound and one record batch, and holds none once all are done.
    expect(bytes.peak).toBeGreaterThan(0);
    expect(bytes.peak).toBeLessThanOrEqual(BOUND + largestBatch);
    expect(bytes.held).toBe(0);
  }, 300000);
});
