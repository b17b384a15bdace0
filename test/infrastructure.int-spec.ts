import { randomUUID } from 'crypto';
import { Kafka, Partitioners } from 'kafkajs';
import { Column, CreateDateColumn, DataSource, Entity, PrimaryColumn } from 'typeorm';
import { createTestDataSource, uniqueSchema } from './support/database';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';

/**
 * Proves the test infrastructure is real: the broker honours transactions (an aborted record is invisible
 * to a read-committed reader but physically present) and PostgreSQL stores what TypeORM writes.
 */
describe('infrastructure: real Kafka and PostgreSQL', () => {
  let kafka: Kafka;

  beforeAll(() => {
    kafka = testKafka();
  });

  it('a read-committed consumer sees the two committed records and not the aborted one', async () => {
    const topic = uniqueTopic('smoke');
    await createTopics(kafka, [topic]);
    const producer = kafka.producer({
      transactionalId: `smoke-${randomUUID()}`,
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    try {
      const committed = await producer.transaction();
      await committed.send({ topic, messages: [{ key: 'k', value: 'committed-1' }, { key: 'k', value: 'committed-2' }] });
      await committed.commit();

      const aborted = await producer.transaction();
      await aborted.send({ topic, messages: [{ key: 'k', value: 'aborted-1' }] });
      await aborted.abort();

      // A committed record after the aborted one: once a reader has it, it has passed the aborted record too.
      const sentinel = await producer.transaction();
      await sentinel.send({ topic, messages: [{ key: 'k', value: 'sentinel' }] });
      await sentinel.commit();
    } finally {
      await producer.disconnect();
    }

    const readCommitted = await readTopic(kafka, topic, { until: (r) => r.some((x) => x.value?.toString() === 'sentinel') });
    expect(readCommitted.map((r) => r.value?.toString())).toEqual(['committed-1', 'committed-2', 'sentinel']);

    // The aborted record is really in the log: a read-uncommitted reader sees it.
    const readUncommitted = await readTopic(kafka, topic, {
      readUncommitted: true,
      until: (r) => r.some((x) => x.value?.toString() === 'sentinel'),
    });
    expect(readUncommitted.map((r) => r.value?.toString())).toEqual(['committed-1', 'committed-2', 'aborted-1', 'sentinel']);
  });

  describe('PostgreSQL through TypeORM', () => {
    @Entity({ name: 'smoke_notes' })
    class SmokeNote {
      @PrimaryColumn('uuid') id: string;
      @Column('text') body: string;
      @Column('bigint') amountCents: string;
      @CreateDateColumn({ type: 'timestamptz' }) createdAt: Date;
    }

    let dataSource: DataSource;
    const schema = uniqueSchema('smoke');

    beforeAll(async () => {
      dataSource = await createTestDataSource({ schema, entities: [SmokeNote], synchronize: true });
    });

    afterAll(async () => {
      await dataSource?.destroy();
    });

    it('round-trips an entity', async () => {
      const id = randomUUID();
      await dataSource.getRepository(SmokeNote).save({ id, body: 'héllo', amountCents: '9007199254740993' });

      const rows = await dataSource.query(`SELECT id, body, "amountCents"::text AS amount FROM "${schema}".smoke_notes WHERE id = $1`, [id]);
      expect(rows).toEqual([{ id, body: 'héllo', amount: '9007199254740993' }]);

      const loaded = await dataSource.getRepository(SmokeNote).findOneByOrFail({ id });
      expect(loaded.body).toBe('héllo');
      expect(loaded.amountCents).toBe('9007199254740993');
      expect(loaded.createdAt).toBeInstanceOf(Date);
    });
  });
});
