import { pgPoolSql } from '../admin/sql-client';
import { OperatorRequestError } from '../errors/operator-request.error';
import { useDriverParts } from '../client/driver-parts';
import { KAFKA_DRIVERS } from '../client/drivers';
import { assertKafkaJsFixesInForce, createKafkaClient, logLevel, nestLogCreator } from '../kafkajs';
import { resolveOutbox } from '../options/resolve-options';
import { OutboxOperations, type SetAsideEvent } from '../outbox/outbox-operations';
import { OutboxRelay } from '../outbox/outbox-relay';
import { platformaticParts } from '../platformatic/driver-parts';

export const OUTBOX_USAGE = `  kafka-eo outbox status
  kafka-eo outbox list [--state set-aside|retried|discarded|all] [--limit N]
  kafka-eo outbox retry <position> [--reason TEXT] [--actor NAME]
  kafka-eo outbox discard <position> --reason TEXT [--actor NAME]
  kafka-eo outbox relay --prefix P [--name N] [--checkpoint-topic T] [--batch-max-records N]   (runs the relay until SIGTERM or SIGINT)`;

/** What a command run on the group's database is given (outbox, bulk). */
export interface DatabaseCommandContext {
  verb: string | undefined;
  args: string[];
  text: (name: string) => string | undefined;
  limit: number | undefined;
  env: NodeJS.ProcessEnv;
  /** node-postgres's Pool (typed here so that the library's types need no @types/pg). */
  pool: { query(text: string, params?: unknown[]): Promise<{ rows: any[] }>; connect(): Promise<any> };
  print: (document: unknown, human: () => string) => void;
  table: (rows: Array<Record<string, unknown>>, columns: string[]) => string;
  fields: (document: Record<string, unknown>) => string;
  err: (text: string) => void;
}

/** `kafka-eo outbox ...`: the outbox's events set aside, and a relay run on its own. */
export async function runOutboxCommand(ctx: DatabaseCommandContext): Promise<number> {
  const { verb, args, text, env, print } = ctx;
  const operations = new OutboxOperations(pgPoolSql(ctx.pool));
  const one = (what: string) => {
    if (args.length !== 1) throw new OperatorRequestError('invalid', `outbox ${verb} takes ${what}`);
    return args[0];
  };
  const show = (event: SetAsideEvent) => print(event, () => ctx.fields({ ...event, headers: JSON.stringify(event.headers) }));
  switch (verb) {
    case 'status': {
      const summary = await operations.summary();
      // A count that reached the cap reads 10000+ (the JSON keeps the number and names it in atLeast).
      const { atLeast, ...shown } = summary;
      print(summary, () => ctx.fields({ ...shown, waiting: `${summary.waiting}${atLeast.waiting ? '+' : ''}`, setAside: `${summary.setAside}${atLeast.setAside ? '+' : ''}` }));
      return 0;
    }
    case 'list': {
      const events = await operations.list({ state: text('state'), limit: ctx.limit });
      print(events, () => ctx.table(events as never, ['position', 'messageId', 'topic', 'key', 'valueBytes', 'state', 'setAsideAt', 'reason']));
      return 0;
    }
    case 'retry':
      show(await operations.retry(one('<position>'), { actor: text('actor') ?? env.USER, note: text('reason') }));
      return 0;
    case 'discard':
      show(await operations.discard(one('<position>'), { actor: text('actor') ?? env.USER, note: text('reason') }));
      return 0;
    case 'relay':
      return relay(ctx);
    default:
      throw new OperatorRequestError('invalid', `unknown command "outbox ${verb ?? ''}"`);
  }
}

/** Runs the outbox relay of this database until SIGTERM or SIGINT (teams that run it apart from the application). */
async function relay(ctx: DatabaseCommandContext): Promise<number> {
  const prefix = ctx.text('prefix') ?? ctx.env.KAFKA_EO_TRANSACTIONAL_ID_PREFIX;
  if (!prefix) throw new OperatorRequestError('invalid', "outbox relay needs --prefix P (the application's transactionalIdPrefix) or KAFKA_EO_TRANSACTIONAL_ID_PREFIX", 'prefix');
  const batch = ctx.text('batch-max-records');
  const config = resolveOutbox({ name: ctx.text('name') ?? ctx.env.KAFKA_EO_OUTBOX_NAME, checkpointTopic: ctx.text('checkpoint-topic'), batchMaxRecords: batch === undefined ? undefined : Number(batch) }, prefix);
  const driver = ctx.env.KAFKA_CLIENT || 'kafkajs';
  if (!(KAFKA_DRIVERS as readonly string[]).includes(driver)) throw new OperatorRequestError('invalid', `KAFKA_CLIENT must be one of ${KAFKA_DRIVERS.join(', ')}, got "${driver}"`, 'KAFKA_CLIENT');
  const connection = { clientId: `kafka-eo-outbox-${config.name}`, brokers: (ctx.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',') };
  const kafka = createKafkaClient({ ...connection, logLevel: logLevel.INFO, logCreator: nestLogCreator });
  await assertKafkaJsFixesInForce(kafka);
  // KAFKA_CLIENT=platformatic: the relay's producer, checkpoint reads and admin on @platformatic/kafka, as in an application.
  if (driver === 'platformatic') useDriverParts(kafka, platformaticParts(connection));
  const relay = new OutboxRelay(kafka, ctx.pool, { ...config, transactionalIdPrefix: prefix, transactionTimeoutMs: 60000, abortHangingTransactions: true });
  relay.start();
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  ctx.err('kafka-eo: stopping the outbox relay after its batch in progress');
  await relay.stop();
  return 0;
}
