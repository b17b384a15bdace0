import { join } from 'path';

/** Everything the example reads from its environment, with the defaults of a local set-up. */
export const config = {
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  databaseUrl: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  ordersTopic: process.env.ORDERS_TOPIC ?? 'orders.placed',
  acceptedTopic: process.env.ACCEPTED_TOPIC ?? 'orders.accepted',
  groupId: process.env.GROUP_ID ?? 'example-orders-prisma',
  // The outbox relay's checkpoints (a compacted topic the relay creates): one per database the relay serves.
  outboxCheckpointTopic: process.env.OUTBOX_CHECKPOINT_TOPIC ?? 'example-orders-prisma.outbox-checkpoints',
  spoolDirectory: process.env.SPOOL_DIR ?? '.spool',
  schemasDirectory: join(__dirname, '..', 'schemas'),
};
