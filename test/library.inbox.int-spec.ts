import { DataSource } from 'typeorm';
import { InboxRetention } from 'kafka-exactly-once/inbox/inbox-retention';
import { runInboxMigrations } from 'kafka-exactly-once/inbox/inbox-migrator';
import { createSuiteDatabase } from './support/database';

/** The inbox table from the library's own migration, and the retention job that keeps it small. */
describe('library: inbox migrations and retention', () => {
  let dataSource: DataSource;

  beforeAll(async () => {
    dataSource = await new DataSource({ type: 'postgres', url: await createSuiteDatabase('inbox') }).initialize();
  });

  afterAll(async () => {
    await dataSource?.destroy();
  });

  it('creates the inbox once, even when several instances boot at the same time', async () => {
    await Promise.all([runInboxMigrations(dataSource), runInboxMigrations(dataSource), runInboxMigrations(dataSource)]);
    const applied = await dataSource.query(`SELECT name FROM kafka_eo_migrations`);
    expect(applied).toEqual([{ name: 'CreateKafkaEoInbox1764400000000' }]);
    const columns = await dataSource.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'kafka_eo_inbox' ORDER BY ordinal_position`);
    expect(columns.map((c: { column_name: string }) => c.column_name)).toEqual([
      'consumer_group', 'message_id', 'topic', 'partition', 'offset', 'status', 'attempts', 'outputs', 'claimed_at', 'processed_at',
    ]);
  });

  it('deletes processed rows older than the window, batch by batch, and keeps the rest', async () => {
    await runInboxMigrations(dataSource);
    await dataSource.query(
      `INSERT INTO kafka_eo_inbox (consumer_group, message_id, topic, partition, "offset", status, processed_at)
       SELECT 'g', 'old-' || n, 't', 0, n, 'processed', now() - interval '8 days' FROM generate_series(1, 25) n
       UNION ALL
       SELECT 'g', 'new-' || n, 't', 0, 100 + n, 'processed', now() - interval '6 days' FROM generate_series(1, 5) n`,
    );
    const retention = new InboxRetention(dataSource, { retentionDays: 7, retentionIntervalMs: 0, retentionBatchSize: 10 });
    expect(await retention.runOnce()).toBe(25);
    const left = await dataSource.query(`SELECT message_id FROM kafka_eo_inbox ORDER BY "offset"`);
    expect(left.map((r: { message_id: string }) => r.message_id)).toEqual(['new-1', 'new-2', 'new-3', 'new-4', 'new-5']);
    expect(await retention.runOnce()).toBe(0);
  });
});
