import { BulkOperations, type BulkOperation } from '../admin/bulk/bulk-operations';
import { pgPoolSql } from '../admin/sql-client';
import { OperatorRequestError } from '../errors/operator-request.error';
import type { DatabaseCommandContext } from './outbox.command';

export const BULK_USAGE = `  kafka-eo bulk dry-run --kind K --action A [FILTER]
                                      how many items a bulk action would act on now, and the first ten
  kafka-eo bulk start --kind K --action A [FILTER] --reason TEXT [--rate N] [--expect N] [--actor NAME]
                                      K dead-letters (A replay), parked-keys (release), outbox-set-aside (retry, discard);
                                      FILTER: --topic T --dlq-reason R --error TEXT --from ISO --to ISO --key K;
                                      --rate items a second (1-100, default 10); --expect the dry run's count.
                                      An application with KafkaExactlyOnceAdminModule walks it.
  kafka-eo bulk list [--limit N] [--after ID]
  kafka-eo bulk status <id>
  kafka-eo bulk cancel <id> [--actor NAME]`;

interface Context extends DatabaseCommandContext {
  group: string;
}

/** `kafka-eo bulk ...`: the same dry run, start, progress and cancel as `/kafka-eo/bulk` of the admin API. */
export async function runBulkCommand(ctx: Context): Promise<number> {
  const { verb, args, text, env, print } = ctx;
  const bulk = new BulkOperations(pgPoolSql(ctx.pool), ctx.group);
  const filter = { topic: text('topic'), reason: text('dlq-reason'), error: text('error'), from: text('from'), to: text('to'), key: text('key') };
  const number = (name: string) => {
    const value = text(name);
    if (value === undefined) return undefined;
    if (!/^[0-9]{1,9}$/.test(value)) throw new OperatorRequestError('invalid', `--${name} must be a whole number, got "${value.slice(0, 40)}"`, name);
    return Number(value);
  };
  const one = () => {
    if (args.length !== 1) throw new OperatorRequestError('invalid', `bulk ${verb} takes <id>`);
    return args[0];
  };
  const show = (o: BulkOperation) => print(o, () => ctx.fields({ ...o, filter: JSON.stringify(o.filter), skipReasons: JSON.stringify(o.skipReasons), lease: o.lease ? `${o.lease.owner} until ${o.lease.until}` : null, outcomes: o.outcomes ? JSON.stringify(o.outcomes) : null }));
  switch (verb) {
    case 'dry-run': {
      const dry = await bulk.dryRun(text('kind'), text('action'), filter);
      print(dry, () => `${dry.matched}${dry.atLeast ? '+' : ''} item(s) match now; the first ${dry.sample.length}:\n${ctx.table(dry.sample, Object.keys(dry.sample[0] ?? { none: 1 }).filter((k) => k !== 'error'))}`);
      return 0;
    }
    case 'start': {
      const { operation, created } = await bulk.start(
        { kind: text('kind'), action: text('action'), filter, reason: text('reason'), ratePerSecond: number('rate'), expect: number('expect') },
        { actor: text('actor') ?? env.USER },
      );
      show(operation);
      if (!created) ctx.err(`bulk action ${operation.id} of the same kind, action and filter was running already: this is it`);
      return 0;
    }
    case 'list': {
      const page = await bulk.list({ limit: ctx.limit, after: text('after') });
      print(page, () => `${ctx.table(page.items.map((o) => ({ ...o, filter: JSON.stringify(o.filter) })), ['id', 'kind', 'action', 'state', 'matched', 'acted', 'skipped', 'createdAt', 'actor', 'filter'])}${page.next ? `\nmore: --after ${page.next}` : ''}`);
      return 0;
    }
    case 'status':
      show(await bulk.get(one()));
      return 0;
    case 'cancel':
      show(await bulk.cancel(one(), { actor: text('actor') ?? env.USER }));
      return 0;
    default:
      throw new OperatorRequestError('invalid', `unknown command "bulk ${verb ?? ''}"`);
  }
}
