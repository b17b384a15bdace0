import type { OpenTransactionsDocument } from '../admin/open-transactions';
import type { AuditEntry } from '../admin/operator-store';
import { transactionTarget } from '../admin/transaction-target';
import { OperatorRequestError } from '../errors/operator-request.error';
import { adminApiAddress, type OverviewContext } from './overview.command';

export const TRANSACTIONS_USAGE = `  kafka-eo transactions list --url URL
                                      per input and output partition of the running application's group: last
                                      stable offset, high watermark, the transactions open, whose, what is done
  kafka-eo transactions abort <topic> <partition> <producer-id> <start-offset> --reason TEXT --url URL [--actor NAME]
                                      aborts another application's hanging transaction there (ADMIN_TOKEN); refused
                                      for one its coordinator still tracks, or the library's own`;

interface TransactionsContext extends OverviewContext {
  verb: string | undefined;
}

/** The application answered, but not with what was asked: the status and its message. */
export class TransactionsAnswer extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * `kafka-eo transactions list | abort`, asked of a running application (`--url`, as `overview`): the open
 * transactions are read from Kafka with the group's topics, which only the application knows. `list` sends
 * ADMIN_READ_ONLY_TOKEN when set (else ADMIN_TOKEN); `abort` ADMIN_TOKEN. Resolves the audit entry of an abort.
 */
export async function runTransactionsCommand(ctx: TransactionsContext): Promise<AuditEntry | OpenTransactionsDocument> {
  if (ctx.verb === 'list') {
    if (ctx.args.length !== 0) throw new OperatorRequestError('invalid', 'transactions list takes --url (no arguments)');
    const document = (await ask(ctx, 'GET', 'transactions', ctx.env.ADMIN_READ_ONLY_TOKEN || ctx.env.ADMIN_TOKEN)) as OpenTransactionsDocument;
    if (!document || !Array.isArray(document.partitions)) throw new TransactionsAnswer(0, 'the application did not answer with its open transactions');
    ctx.print(document, () => describe(document, ctx));
    return document;
  }
  if (ctx.verb === 'abort') {
    if (ctx.args.length !== 4) throw new OperatorRequestError('invalid', 'transactions abort takes <topic> <partition> <producer-id> <start-offset> (as `transactions list` shows them)');
    const [topic, partition, producerId, startOffset] = ctx.args;
    const target = transactionTarget({ topic, partition, producerId, startOffset });
    const reason = ctx.text('reason');
    if (!reason?.trim()) throw new OperatorRequestError('invalid', '--reason is required: it is kept in the audit', 'reason');
    const actor = ctx.text('actor') ?? ctx.env.USER;
    const entry = (await ask(ctx, 'POST', 'transactions/abort', ctx.env.ADMIN_TOKEN, { ...target, reason, ...(actor ? { actor } : {}) })) as AuditEntry;
    ctx.print(entry, () => ctx.fields({ ...entry }));
    return entry;
  }
  throw new OperatorRequestError('invalid', `unknown command "transactions ${ctx.verb ?? ''}"`);
}

/** One request to the application's admin API; a refusal is a TransactionsAnswer with its status. */
async function ask(ctx: TransactionsContext, method: 'GET' | 'POST', path: string, token: string | undefined, body?: unknown): Promise<unknown> {
  const address = adminApiAddress(ctx, path);
  let response: Response;
  try {
    response = await fetch(address, {
      method,
      headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30000),
      redirect: 'error',
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new TransactionsAnswer(0, `no answer from ${address.origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
  }
  const text = await response.text();
  let parsed: { message?: string } | undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    throw new TransactionsAnswer(response.status, `${address.href} answered ${response.status} without JSON`);
  }
  // 422: the abort ran and failed; its audit entry says why.
  if (response.ok || response.status === 422) return parsed;
  if (response.status === 401 || response.status === 403) {
    throw new TransactionsAnswer(response.status, `${address.origin} refused the request (${response.status}): ${parsed?.message ?? (token ? "the token is not the application's" : 'set ADMIN_TOKEN (or, to list, ADMIN_READ_ONLY_TOKEN)')}`);
  }
  throw new TransactionsAnswer(response.status, parsed?.message ?? `${address.href} answered ${response.status}`);
}

function describe(d: OpenTransactionsDocument, ctx: TransactionsContext): string {
  const open = d.partitions.flatMap((p) =>
    p.open.map((t) => ({
      partition: `${p.topic}[${p.partition}]`,
      producer: `${t.producerId}/${t.producerEpoch}`,
      transactionalId: t.transactionalId,
      state: t.coordinatorState,
      since: t.since,
      from: t.startOffset,
      owner: t.owner.kind === 'unit' ? `unit ${t.owner.topic}[${t.owner.partition}]` : t.owner.kind === 'relay' ? `relay ${t.owner.name}` : t.owner.kind === 'publisher' ? `publisher ${t.owner.instanceId}` : t.owner.kind,
      abort: t.abortable ? 'yes' : 'no',
      doing: t.doing ?? t.refusal,
    })),
  );
  const unread = Object.entries(d.unreadable);
  return [
    ctx.table(
      d.partitions.map((p) => ({ partition: `${p.topic}[${p.partition}]`, role: p.role, lso: p.lastStableOffset, hw: p.highWatermark, open: p.open.length })),
      ['partition', 'role', 'lso', 'hw', 'open'],
    ),
    '',
    'open transactions:',
    ctx.table(open, ['partition', 'producer', 'transactionalId', 'state', 'since', 'from', 'owner', 'abort', 'doing']),
    ...(unread.length ? ['', `not read: ${unread.map(([k, v]) => `${k} (${v})`).join('; ')}`] : []),
  ].join('\n');
}
