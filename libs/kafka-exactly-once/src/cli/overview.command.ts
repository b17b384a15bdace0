import type { OperatorOverviewDocument } from '../admin/operator-overview';
import { ADMIN_API_PATH } from '../admin/admin.options';
import { OperatorRequestError } from '../errors/operator-request.error';

export const OVERVIEW_USAGE = `  kafka-eo overview --url URL          the console's overview, asked of a running application (its address, with
                                      its global prefix if it has one; ADMIN_READ_ONLY_TOKEN, else ADMIN_TOKEN)`;

/** What a command asked of a running application's admin API is given (overview, transactions). */
export interface OverviewContext {
  args: string[];
  text(name: string): string | undefined;
  env: NodeJS.ProcessEnv;
  print(document: unknown, human: () => string): void;
  table(rows: Array<Record<string, unknown>>, columns: string[]): string;
  fields(document: Record<string, unknown>): string;
  /** A warning for the operator (stderr). */
  warn(text: string): void;
}

/** A failure of the request itself (no answer, refused, not an overview): exit 1 with its reason. */
export class OverviewRequestError extends Error {}

/**
 * `kafka-eo overview --url`: the document of `GET /kafka-eo/overview` of a running application (the partitions,
 * their lag and activity are what that instance's consumer sees, so they are asked of it, not of the database).
 * The token comes from the environment, never from an option (an option shows in the process list).
 */
export async function runOverviewCommand(ctx: OverviewContext): Promise<OperatorOverviewDocument> {
  if (ctx.args.length !== 0) throw new OperatorRequestError('invalid', 'overview takes --url (no arguments)');
  // The overview only reads: the token that may only read is the one to send when both are set.
  const token = ctx.env.ADMIN_READ_ONLY_TOKEN || ctx.env.ADMIN_TOKEN || undefined;
  const address = adminApiAddress(ctx, 'overview');
  let response: Response;
  try {
    response = await fetch(address, { headers: { accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, signal: AbortSignal.timeout(15000), redirect: 'error' });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new OverviewRequestError(`no answer from ${address.origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
  }
  const body = await response.text();
  if (response.status === 401 || response.status === 403) {
    throw new OverviewRequestError(`${address.origin} refused the request (${response.status}): ${token ? 'the token of ADMIN_TOKEN (or ADMIN_READ_ONLY_TOKEN) is not the application\'s' : 'set ADMIN_TOKEN (or ADMIN_READ_ONLY_TOKEN) to the application\'s token'}`);
  }
  if (response.status === 404) throw new OverviewRequestError(`${address.href} is not found: is the admin module (KafkaExactlyOnceAdminModule) mounted, and does --url include the application's global prefix?`);
  if (!response.ok) throw new OverviewRequestError(`${address.href} answered ${response.status}: ${body.slice(0, 500)}`);
  let overview: OperatorOverviewDocument;
  try {
    overview = JSON.parse(body);
  } catch {
    throw new OverviewRequestError(`${address.href} did not answer JSON`);
  }
  if (!overview || typeof overview !== 'object' || !Array.isArray(overview.partitions) || typeof overview.group !== 'object') throw new OverviewRequestError(`${address.href} did not answer with an overview`);
  ctx.print(overview, () => describe(overview, ctx));
  return overview;
}

/**
 * The address of `path` of the admin API of the application `--url` (or KAFKA_EO_URL) names, checked: http or https,
 * no credentials or query in it (the token comes from the environment), a warning when plain http leaves the machine.
 */
export function adminApiAddress(ctx: Pick<OverviewContext, 'text' | 'env' | 'warn'>, path: string): URL {
  const given = ctx.text('url') ?? ctx.env.KAFKA_EO_URL;
  if (!given) throw new OperatorRequestError('invalid', "--url (or KAFKA_EO_URL) is required: the application's address, e.g. http://127.0.0.1:3001", 'url');
  let base: URL;
  try {
    base = new URL(given);
  } catch {
    throw new OperatorRequestError('invalid', `--url must be an http or https address, got "${given.slice(0, 200)}"`, 'url');
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new OperatorRequestError('invalid', `--url must be an http or https address, got "${given.slice(0, 200)}"`, 'url');
  if (base.username || base.password || base.search) throw new OperatorRequestError('invalid', '--url takes the address alone: the token comes from ADMIN_TOKEN (or ADMIN_READ_ONLY_TOKEN), never from the address', 'url');
  if (base.protocol === 'http:' && !isLoopback(base.hostname)) {
    ctx.warn(`kafka-eo: warning: ${base.origin} is plain http to another host: the admin token crosses the network in clear; use https`);
  }
  return new URL(`${base.pathname.replace(/\/+$/, '')}/${ADMIN_API_PATH}/${path}`, base);
}

/** Whether a URL's host is this machine (localhost, 127.0.0.0/8, ::1): plain http there never leaves it. */
export function isLoopback(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  return host === 'localhost' || host.endsWith('.localhost') || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host === '::1';
}

/** A capped count as an operator reads it: `10000+` when it reached the cap (an overview without `atLeast`: as it is). */
function count<Name extends string>(document: Record<Name, number> & { atLeast?: Partial<Record<Name, true>> }, name: Name): string {
  return `${document[name]}${document.atLeast?.[name] ? '+' : ''}`;
}

function describe(o: OperatorOverviewDocument, ctx: OverviewContext): string {
  const lines = [
    `group            ${o.group.id} (${o.group.state ?? `Kafka did not answer${o.group.error ? `: ${o.group.error}` : ''}`}), ${o.group.members.length} member(s)`,
    `consumer         ${o.consumer.state}${o.consumer.lastError ? ` (${o.consumer.lastError})` : ''}`,
    `lag              ${o.totals.lag} records; ${o.totals.unitsPerSecond} units/s, ${o.totals.recordsPerSecond} records/s; ${o.totals.stalled} partition(s) stalled`,
    o.counts ? `parked           ${count(o.counts, 'parkedKeys')} key(s), ${count(o.counts, 'parkedRecords')} record(s)` : `counts           not read: ${o.unreadable?.counts ?? 'unknown'}`,
    ...(o.counts ? [`dead letters     ${count(o.counts, 'deadLetters')}; ${count(o.counts, 'retrying')} record(s) on retry tiers`] : []),
    `publisher        ${o.publisher ? `breaker ${o.publisher.breaker}, spool ${o.publisher.spool.records} record(s)${o.publisher.quarantined ? `, ${o.publisher.quarantined} quarantined` : ''}` : '-'}`,
    `outbox           ${o.unreadable?.outbox ? `not read: ${o.unreadable.outbox}` : o.outbox ? `${count(o.outbox, 'waiting')} waiting (oldest ${Math.round(o.outbox.oldestAgeMs / 1000)} s), ${count(o.outbox, 'setAside')} set aside, relay ${o.outbox.holder ? `held by pid ${o.outbox.holder.pid} (${o.outbox.holder.applicationName || 'no name'})` : 'not running'}` : '-'}`,
    `health           ${Object.entries(o.health).map(([name, h]) => `${name} ${h.status}`).join(', ') || '-'}`,
    '',
    'partitions:',
    ctx.table(
      o.partitions.map((p) => ({ topic: p.topic, partition: p.partition, activity: p.view.state, committed: p.committedOffset, lag: p.lag, 'units/s': p.unitsPerSecond, 'commit ms': p.commitLatencyMs, reason: p.view.reason, 'way out': p.view.wayOut })),
      ['topic', 'partition', 'activity', 'committed', 'lag', 'units/s', 'commit ms', 'reason', 'way out'],
    ),
  ];
  if (o.retryTiers.length > 0) lines.push('', 'retry tiers:', ctx.table(o.retryTiers as never, ['topic', 'tier', 'delayMs', 'waiting', 'nextDueAt']));
  return lines.join('\n');
}
