import { ConsoleLogger, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { EventContext, IdempotentHandler, InvalidOptionsError, KafkaExactlyOnceModule, KafkaExactlyOnceModuleOptions } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { createTopics, testKafka, uniqueTopic } from './support/kafka';
import { kafkaBrokers, testDriver } from './support/environment';
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

  function notesModule(extra: Partial<KafkaExactlyOnceModuleOptions>, { topicPrefix = prefix, poolMax = 10 } = {}) {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: poolMax } }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'boot-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${topicPrefix}group`,
          transactionalIdPrefix: 'boot-test',
          schemas: { directory: dir },
          topicPrefix,
          ...extra,
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}
    return NotesModule;
  }

  async function bootError(extra: Partial<KafkaExactlyOnceModuleOptions>): Promise<unknown> {
    const moduleRef = await Test.createTestingModule({ imports: [notesModule(extra)] }).compile();
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

  it('warns at assignment when the PostgreSQL pool is smaller than the partitions handled at once', async () => {
    const wide = `${uniqueTopic('boot-wide')}.`;
    await createTopics(testKafka(), [`${wide}notes`], 4);
    const warnings: string[] = [];
    class CapturingLogger extends ConsoleLogger {
      override warn(message: unknown, ...rest: unknown[]): void {
        warnings.push(String(message));
        super.warn(message, ...(rest as []));
      }
    }
    const moduleRef = await Test.createTestingModule({ imports: [notesModule({}, { topicPrefix: wide, poolMax: 2 })] })
      .setLogger(new CapturingLogger({ logLevels: ['warn', 'error'] }))
      .compile();
    try {
      await moduleRef.init();
      const deadline = Date.now() + 30000;
      while (!warnings.some((w) => w.includes('partitions are handled at once')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(warnings.find((w) => w.includes('partitions are handled at once'))).toMatch(/4 partitions are handled at once \(retry tiers' partitions included\), .* the pool has 2 \(it needs 6 /);
    } finally {
      await moduleRef.close();
    }
  });
});
