import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventContext, IdempotentHandler, InvalidOptionsError, KafkaExactlyOnceModule, KafkaExactlyOnceModuleOptions } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { kafkaBrokers } from './support/environment';
import { schemasDirectory } from './support/library';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.boot', fields: [{ name: 'id', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.boot.Note' })
  async onNote(_event: unknown, _ctx: EventContext): Promise<void> {}
}

/** Options the broker itself bounds are checked against the real broker at boot, naming the option. */
describe('library: boot checks against the broker', () => {
  const prefix = `${uniqueTopic('boot')}.`;
  const dir = schemasDirectory('boot', { 'note.avsc': NOTE });
  let databaseUrl: string;

  beforeAll(async () => {
    databaseUrl = await createSuiteDatabase('boot');
    await createTopics(testKafka(), [`${prefix}notes`], 1);
  });

  async function bootError(extra: Partial<KafkaExactlyOnceModuleOptions>): Promise<unknown> {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'boot-test', brokers: kafkaBrokers() },
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'boot-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          ...extra,
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}
    const moduleRef = await Test.createTestingModule({ imports: [NotesModule] }).compile();
    try {
      await moduleRef.init();
      return undefined;
    } catch (err) {
      return err;
    } finally {
      await moduleRef.close().catch(() => undefined);
    }
  }

  it("refuses a transaction timeout over the broker's transaction.max.timeout.ms", async () => {
    const err = await bootError({ transactionTimeoutMs: 1_000_000 });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as InvalidOptionsError).field).toBe('transactionTimeoutMs');
    expect((err as Error).message).toMatch(/transaction\.max\.timeout\.ms \(900000\)/);
  });

  it("refuses a session timeout outside the broker's group session bounds", async () => {
    const err = await bootError({ consumer: { sessionTimeout: 2_000_000, rebalanceTimeout: 2_000_000 } });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as InvalidOptionsError).field).toBe('consumer.sessionTimeout');
  });
});
