import { Injectable, Module } from '@nestjs/common';
import { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ConfigResourceTypes, Kafka } from 'kafkajs';
import { DEAD_LETTER_HEADERS, EventContext, IdempotentHandler, KafkaExactlyOnceModule, KafkaHealthIndicator, SchemaRegistry } from 'kafka-exactly-once';
import { runKafkaEo } from 'kafka-exactly-once/cli/kafka-eo.command';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, quietAfter, readTopic, testKafka, uniqueTopic, withAdmin } from './support/kafka';
import { queryDatabase, schemasDirectory, sendRaw, startLibraryModule } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';

const NOTE = { type: 'record', name: 'Note', namespace: 'test.refused', fields: [{ name: 'id', type: 'string' }, { name: 'text', type: 'string' }] };

@Injectable()
class NotesHandler {
  @IdempotentHandler({ topic: 'notes', schema: 'test.refused.Note' })
  async onNote(event: { id: string; text: string }, ctx: EventContext): Promise<void> {
    await ctx.manager.query('INSERT INTO applied (id) VALUES ($1)', [event.id]);
    ctx.emit('notes.out', event, { key: event.id });
  }
}

/**
 * Recorded outputs Kafka refuses for good: a record was handled in PostgreSQL, its Kafka commit did not happen
 * (here: the group's offset set back, as a crash between the two commits leaves it), and the output topic's
 * max.message.bytes was lowered meanwhile. Its handler does not run again, so no retry helps. Before, the
 * partition retried without end with nothing to do about it; now health names the record and the command, and
 * `kafka-eo outputs divert` (audited) sends the refused output to the dead-letter topic, and the partition moves.
 */
describe('library: recorded outputs that Kafka refuses for good', () => {
  let kafka: Kafka;
  let moduleRef: TestingModule | undefined;
  const prefix = `${uniqueTopic('refused')}.`;
  const group = `${prefix}group`;
  const dir = schemasDirectory('refused', { 'note.avsc': NOTE });

  beforeAll(async () => {
    kafka = testKafka();
    await createTopics(kafka, [`${prefix}notes`, `${prefix}notes.out`], 1);
  });

  afterAll(async () => {
    await moduleRef?.close();
  });

  it('are named in health with the way out, and diverted to the dead-letter topic by an operator, audited', async () => {
    const databaseUrl = await createSuiteDatabase('refused');
    await queryDatabase(databaseUrl, 'CREATE TABLE applied (id text PRIMARY KEY)');
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'refused-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: 'refused-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { 'notes.out': { schema: 'test.refused.Note' } },
          consumer: { stallAfterMs: 6000, maxRetryDelayMs: 1000 },
        }),
      ],
      providers: [NotesHandler],
    })
    class NotesModule {}

    const schema = SchemaRegistry.fromDirectory(dir).current('test.refused.Note');
    await sendRaw(kafka, `${prefix}notes`, [{ key: 'n-1', value: encodeSingleObject(schema, { id: 'n-1', text: 'x'.repeat(3000) }), headers: { 'message-id': 'n-1' } }]);
    moduleRef = await startLibraryModule(NotesModule);
    await waitForGroupCaughtUp(kafka, group, `${prefix}notes`);
    await moduleRef.close();
    await withAdmin(kafka, async (admin) => {
      await admin.setOffsets({ groupId: group, topic: `${prefix}notes`, partitions: [{ partition: 0, offset: '0' }] });
      await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: `${prefix}notes.out`, configEntries: [{ name: 'max.message.bytes', value: '1000' }] }] });
    });

    moduleRef = await startLibraryModule(NotesModule);
    const health = moduleRef.get(KafkaHealthIndicator);
    let message = '';
    await waitUntil(
      async () => {
        message = ((await health.isHealthy('kafka')).kafka as { message?: string }).message ?? '';
        return /refused by Kafka for good/.test(message);
      },
      60000,
      'health naming the refused outputs',
    );
    expect(message).toContain(`${prefix}notes[0]@0 (message n-1)`);
    expect(message).toContain(`kafka-eo outputs divert ${prefix}notes 0 0 --group ${group} --output-topic ${prefix}notes.out`);

    const io = { out: '', err: '' };
    const code = await runKafkaEo(
      ['outputs', 'divert', `${prefix}notes`, '0', '0', '--group', group, '--output-topic', `${prefix}notes.out`, '--reason', 'notes.out takes 1000 bytes now', '--actor', 'test', '--json'],
      { DATABASE_URL: databaseUrl, KAFKA_BROKERS: kafkaBrokers().join(',') },
      { out: (t) => (io.out += t), err: (t) => (io.err += t) },
    );
    expect({ code, err: io.err }).toEqual({ code: 0, err: '' });
    expect(JSON.parse(io.out)).toMatchObject({ action: 'divert', state: 'done', actor: 'test', result: { outputTopic: `${prefix}notes.out`, deadLetterTopic: `${prefix}notes.dlq`, diverted: 1 } });

    await waitForGroupCaughtUp(kafka, group, `${prefix}notes`);
    const [letter] = await readTopic(kafka, `${prefix}notes.dlq`, { until: (r) => r.length >= 1, timeoutMs: 30000 });
    expect(letter.headers[DEAD_LETTER_HEADERS.reason]).toBe('output-refused');
    expect(letter.headers[DEAD_LETTER_HEADERS.outputTopic]).toBe(`${prefix}notes.out`);
    expect(letter.headers['causation-id']).toBe('n-1');
    // notes.out holds the output of the first run (committed there, since the crash here is only simulated) and nothing more.
    expect(await readTopic(kafka, `${prefix}notes.out`, { until: quietAfter(0, 2000), pollIdleMs: 500 })).toHaveLength(1);
    expect(await queryDatabase(databaseUrl, 'SELECT id FROM applied')).toEqual([{ id: 'n-1' }]);
    await waitUntil(async () => ((await health.isHealthy('kafka')).kafka as { status: string }).status === 'up', 30000, 'health up');
  });
});
