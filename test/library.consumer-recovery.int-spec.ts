import { ConsoleLogger, Injectable, Logger, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Kafka } from 'kafkajs';
import { EventContext, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { kafkaControl } from './support/broker';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw } from './support/library';
import { waitUntil } from './support/payments';

const ITEM = { type: 'record', name: 'Item', namespace: 'test.recovery', fields: [{ name: 'id', type: 'string' }] };

/** Keeps the error lines, to see which crashes KafkaJS restarted itself and which it left to the library. */
class CapturingLogger extends ConsoleLogger {
  readonly lines: string[] = [];
  override error(message: unknown, ...rest: unknown[]): void {
    this.lines.push(String(message));
    super.error(message, ...(rest as []));
  }
}

@Injectable()
class ItemsHandler {
  @IdempotentHandler({ topic: 'items', schema: 'test.recovery.Item' })
  async onItem(event: { id: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO items (id) VALUES ($1)', [event.id]);
  }
}

/**
 * Regression test of a stop found by `npm run verify` (broker-kill, full profile): after a broker restart,
 * KafkaJS's consumer failed with an error it deems not retriable ("Failed to find group coordinator") and
 * emitted CRASH with restart=false, leaving the consumer stopped for good: both consumers of the group stopped
 * and the input was never handled. The library starts a new consumer with capped backoff; the records
 * published after the broker is back are handled, once each.
 */
describe('library: a consumer that KafkaJS leaves stopped after a crash is started again', () => {
  let kafka: Kafka;
  let databaseUrl: string;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('recovery')}.`;
  const dir = schemasDirectory('recovery', { 'item.avsc': ITEM });

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('recovery');
    await queryDatabase(databaseUrl, 'CREATE TABLE items (id text PRIMARY KEY)');
    await createTopics(kafka, [`${prefix}items`], 2);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('handles the records published after the broker came back, once each', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          // Few, short retries, and KafkaJS told not to restart its consumer after a crash: the consumer is left
          // stopped within seconds of the broker going away, deterministically. (On its own KafkaJS does so for
          // errors it deems not retriable, e.g. "Failed to find group coordinator" after a broker restart, or
          // "request is not a function" after a broker that stalled answers again: seen here, not on demand.)
          kafka: { clientId: 'recovery-test', brokers: kafkaBrokers(), retry: { retries: 2, initialRetryTime: 200, maxRetryTime: 1000, restartOnFailure: async () => false }, connectionTimeout: 1000 },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'recovery-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          consumer: { sessionTimeout: 6000, heartbeatInterval: 1000 },
        }),
      ],
      providers: [ItemsHandler],
    })
    class ItemsModule {}
    const logger = new CapturingLogger({ logLevels: ['error', 'log'] });
    Logger.overrideLogger(logger);
    moduleRef = await Test.createTestingModule({ imports: [ItemsModule] }).setLogger(logger).compile();
    await moduleRef.init();
    await moduleRef.get(KafkaExactlyOnceLifecycle).whenRunning();
    const lifecycle = moduleRef.get(KafkaExactlyOnceLifecycle);
    const schema = SchemaRegistry.fromDirectory(dir).current('test.recovery.Item');
    const publish = (ids: string[]) => sendRaw(kafka, `${prefix}items`, ids.map((id) => ({ key: id, value: encodeSingleObject(schema, { id }), headers: { 'message-id': id } })));
    const handled = async () => (await queryDatabase<{ id: string }>(databaseUrl, 'SELECT id FROM items ORDER BY id')).map((r) => r.id);
    const givenUp = () => logger.lines.filter((line) => line.includes('KafkaJS does not restart it')).length;

    await publish(['a-1', 'a-2', 'a-3']);
    await waitUntil(async () => (await handled()).length === 3, 60000, 'the first records to be handled');

    // The broker goes away. KafkaJS's consumer crashes; restartOnFailure answers no, so KafkaJS leaves it stopped
    // for good, as it does on its own for errors it deems not retriable. The library starts a new consumer with
    // backoff; the first tries fail while the broker is away and are tried again.
    kafkaControl('kill');
    try {
      await waitUntil(async () => givenUp() > 0, 60000, 'KafkaJS to leave its consumer stopped');
      await waitUntil(async () => logger.lines.some((line) => line.includes('did not start again')), 60000, 'a new consumer to fail while the broker is away');
    } finally {
      kafkaControl('start');
    }
    expect(givenUp()).toBeGreaterThan(0);

    await publish(['b-1', 'b-2', 'b-3', 'b-4']);
    await waitUntil(async () => (await handled()).length === 7, 120000, 'the records published after the broker came back to be handled');
    expect(await handled()).toEqual(['a-1', 'a-2', 'a-3', 'b-1', 'b-2', 'b-3', 'b-4']);
    expect(lifecycle.status()?.state).toBe('running');
  }, 300000);
});
