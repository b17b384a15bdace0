import { Pool } from 'pg';
import { parseArgs } from 'util';
import { logLevel, createKafkaClient } from '../kafkajs';
import { OperatorStore, type AuditEntry } from '../admin/operator-store';
import { pgPoolSql } from '../admin/sql-client';
import { OperatorRequestError } from '../errors/operator-request.error';
import { AUDIT_TABLE, INBOX_TABLE, PARKED_KEYS_TABLE } from '../kafka-exactly-once.constants';
import { OUTBOX_USAGE, runOutboxCommand } from './outbox.command';
import { BULK_USAGE, runBulkCommand } from './bulk.command';
import { inspectSpool } from '../spool/spool-inspection';
import { decodingSchemas, runSchemasCommand, SCHEMAS_USAGE } from './schemas.command';
import { OVERVIEW_USAGE, runOverviewCommand } from './overview.command';
import { runTransactionsCommand, TransactionsAnswer, TRANSACTIONS_USAGE } from './transactions.command';
import { jsonForTerminal, printable } from './terminal-text';
import { MessageStories, type MessageStory } from '../admin/message-story';
import type { BytesView, HeaderView, ValueView } from '../admin/record-view';
import { auditQuery, storyQuery } from '../admin/admin-input';

/** Exit codes scripts can rely on. */
export const EXIT = {
  ok: 0,
  /** The release or replay ran and failed (the handler refused again), or an unexpected error. */
  failed: 1,
  /** Bad usage or input. */
  usage: 2,
  notFound: 3,
  /** Refused in this state (a parked dead letter replayed alone, a replay twice, a record discarded already). */
  conflict: 4,
  /** Queued, but not carried out within --timeout-ms (is a consumer of the group running?). */
  pending: 5,
} as const;

export const USAGE = `kafka-eo: dead letters, parked keys and retry topics of kafka-exactly-once consumer groups, and the transactional outbox

Usage:
  kafka-eo dlq list [--topic T] [--reason R] [--key K] [--limit N] [--after CURSOR]
  kafka-eo dlq show <id> [--topic T]
  kafka-eo dlq record <id> [--topic T] [--schemas-dir DIR] [--registry URL]
                                      the dead letter's key, every header and its value decoded, and each attempt
  kafka-eo dlq replay <id> [--topic T] [--actor NAME] [--no-wait] [--timeout-ms MS]
  kafka-eo parked list [--topic T] [--key K] [--reason R] [--limit N] [--after CURSOR]
  kafka-eo parked show <topic> <key> [--limit N] [--after CURSOR]
                                      a parked key and a page of its records, in release order
  kafka-eo parked record <seq> [--schemas-dir DIR] [--registry URL]
                                      a parked record's key, headers and value decoded, and the error that parked it
  kafka-eo parked release <topic> <key> [--actor NAME] [--no-wait] [--timeout-ms MS]
  kafka-eo parked discard <seq> --reason TEXT [--actor NAME]
  kafka-eo outputs divert <topic> <partition> <offset> --output-topic T --reason TEXT [--dead-letter-topic D] [--actor NAME]
  kafka-eo outputs divert --replay <seq> --output-topic T --reason TEXT [--dead-letter-topic D] [--actor NAME]
  kafka-eo retries list [--topic T] [--limit N]
  kafka-eo operations show <id>
  kafka-eo audit list [--action release|replay|discard|divert|abort-transaction] [--topic T] [--key K] [--actor NAME] [--limit N] [--after CURSOR]
                                      who did what, when, with the reason given (newest first)
  kafka-eo story <message-id> [--topic T]
  kafka-eo story --key K [--topic T] [--limit N] [--after CURSOR]
  kafka-eo story --topic T --partition P --offset O
                                      everything recorded of a message: its input, the unit that handled it, its
                                      outputs, tiers, parking, dead letter, replays and the operators' actions
${OVERVIEW_USAGE}
${TRANSACTIONS_USAGE}
  kafka-eo spool show <directory>     the publisher's spool: records waiting for Kafka, and those set aside
                                      (quarantined) with the reason each can never be sent; reads, never changes
${OUTBOX_USAGE}
${BULK_USAGE}
${SCHEMAS_USAGE}

Options:
  --group G        consumer group (default: KAFKA_EO_GROUP, or the only group with dead letters or parked keys)
  --json           print JSON (the same documents as the admin REST API) instead of tables
  --timeout-ms MS  how long release and replay wait for the group's consumer to carry them out (default 60000)

Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), KAFKA_BROKERS (default 127.0.0.1:9092),
  SCHEMAS_DIR and SCHEMA_REGISTRY_URL (to decode values; ./schemas when there is one), ADMIN_READ_ONLY_TOKEN, else ADMIN_TOKEN (overview, transactions list), ADMIN_TOKEN (transactions abort)
Exit codes: 0 done, 1 failed, 2 usage, 3 not found, 4 conflict, 5 still queued when the wait ended`;

interface Io {
  out(text: string): void;
  err(text: string): void;
}

interface Parsed {
  positional: string[];
  flags: Map<string, string | true>;
}

const VALUE_FLAGS = new Set(['schema', 'schemas-dir', 'registry', 'strategy', 'group', 'topic', 'reason', 'key', 'limit', 'after', 'actor', 'timeout-ms', 'output-topic', 'dead-letter-topic', 'replay', 'state', 'prefix', 'name', 'checkpoint-topic', 'batch-max-records', 'action', 'partition', 'offset', 'url', 'kind', 'dlq-reason', 'error', 'from', 'to', 'rate', 'expect']);
const BOOLEAN_FLAGS = new Set(['json', 'no-wait', 'help']);

/**
 * Node's own parser (util.parseArgs), strict: an unknown option, a value-taking option without its value, or a
 * value that looks like an option (`--reason --json`) is a usage error. An option's value that begins with `-` is
 * given as `--key=-acct`; a positional one after `--`, which ends the options (`kafka-eo parked show <topic> -- -acct`).
 */
function parse(argv: string[]): Parsed {
  const options = Object.fromEntries([
    ...[...VALUE_FLAGS].map((name) => [name, { type: 'string' as const }]),
    ...[...BOOLEAN_FLAGS].map((name) => [name, { type: 'boolean' as const }]),
  ]);
  let parsed: ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    const message = (err as Error).message;
    const name = /'--?([\w-]+)/.exec(message)?.[1];
    throw new OperatorRequestError('invalid', message.replace(/\s*\n\s*/g, ' '), name);
  }
  const flags = new Map<string, string | true>();
  for (const [name, value] of Object.entries(parsed.values)) if (value !== undefined && value !== false) flags.set(name, value as string | true);
  return { positional: parsed.positionals, flags };
}

/** Columns of plain text, the widths of the widest cell (cells cut at 66 characters: ids, 64, are whole). */
function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const cell = (v: unknown) => {
    const text = printable(v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v));
    return text.length > 66 ? `${text.slice(0, 65)}…` : text;
  };
  const cells = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n');
}

function fields(document: Record<string, unknown>): string {
  return Object.entries(document)
    .filter(([, v]) => !Array.isArray(v))
    .map(([k, v]) => `${k.padEnd(16)} ${v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join('\n');
}

/** A record's bytes for a terminal: its own fields, then its key, headers and value (decoded, else hex). */
function describeRecord(head: Record<string, unknown>, record: { key: BytesView | null; headers: HeaderView[]; value: ValueView }): string {
  const bytesText = (b: BytesView | null) => (b === null ? '(null)' : b.text !== null ? `${b.text} (${b.bytes} bytes)` : `hex ${b.hex ?? ''} (${b.bytes} bytes)`);
  const v = record.value;
  return [
    fields(head),
    `key              ${bytesText(record.key)}`,
    'headers:',
    table(record.headers.map((h) => ({ name: h.name, value: h.null ? '(null)' : bytesText(h) })), ['name', 'value']),
    `value            ${v.bytes === null ? '(null)' : `${v.bytes} bytes, ${v.framing}${v.schema ? `, ${v.schema}` : ''}`}`,
    ...(v.decoded !== null ? [v.decoded + (v.truncated ? ' …(cut)' : '')] : []),
    ...(v.error ? [`not decoded: ${v.error}`, ...(v.text !== undefined ? [`as text: ${v.text}`] : []), `hex: ${v.hex}`] : []),
  ].join('\n');
}

function describeStory(story: MessageStory): string {
  if (story.records.length === 0 && story.parkedKeys.length === 0 && story.outbox.length === 0) return 'nothing is recorded of it in this group';
  const parts: string[] = [];
  for (const r of story.records) {
    parts.push(
      [
        `record           ${r.input.topic} [${r.input.partition}] @ ${r.input.offset}, message id ${r.messageId} (${r.identity})`,
        `status           ${r.status}, ${r.attempts} attempt(s), ${r.failures} failure(s)${r.lastError ? `; last error: ${r.lastError.message}` : ''}`,
        `handled          ${r.unit ? `unit ${r.unit.id} (${r.unit.topic} [${r.unit.partition}] up to ${r.unit.lastOffset}), committed ${r.unit.committedAt}` : r.processedAt ? `at ${r.processedAt}` : '-'}`,
        `outputs          ${r.outputs.length === 0 ? '-' : r.outputs.map((o) => `${o.topic}${o.messageId ? ` (${o.messageId})` : ''}`).join(', ')}`,
        ...(r.retry ? [`retry tier       ${r.retry.topic}, due ${r.retry.dueAt ?? '-'}${r.retry.error ? `: ${r.retry.error}` : ''}`] : []),
        ...r.history.map((h) => `failed on        ${h.topic ?? '?'} [${h.partition ?? '?'}] @ ${h.offset ?? '?'} at ${h.at ?? '?'}: ${h.message ?? h.error ?? ''}`),
        ...(r.deadLetter ? [`dead letter      ${r.deadLetter.topic} (${r.deadLetter.reason})${r.deadLetter.replayedAt ? `, replayed ${r.deadLetter.replayedAt}` : ''}`] : []),
        ...r.parked.map((p) => `parked           seq ${p.seq} under ${p.key ?? p.keyDigest}, ${p.state} (${p.reason}) since ${p.parkedAt}`),
        ...r.replays.map((p) => `replay           ${p.operation}: ${p.outputs} output(s), ${p.settled ? 'settled' : 'not settled yet'}`),
        ...r.actions.map((a) => `action           #${a.id} ${a.action} by ${a.actor ?? '-'}${a.declaredActor ? ` (says: ${a.declaredActor})` : ''} at ${a.requestedAt}: ${a.state}${a.reason ? ` (${a.reason})` : ''}`),
      ].join('\n'),
    );
  }
  if (story.parkedKeys.length > 0) parts.push(`parked keys:\n${table(story.parkedKeys as never, ['topic', 'key', 'reason', 'parkedRecords', 'parkedAt'])}`);
  if (story.outbox.length > 0) parts.push(`outbox events:\n${table(story.outbox as never, ['position', 'messageId', 'topic', 'state', 'writtenAt', 'reason'])}`);
  if (story.truncated) parts.push(`there is more: ${story.records.length} record(s) and ${story.outbox.length} outbox event(s) shown${story.next ? `; the next records: --after ${story.next}` : ''}`);
  return parts.join('\n\n');
}

function exitOf(entry: AuditEntry): number {
  return entry.state === 'done' ? EXIT.ok : entry.state === 'failed' ? EXIT.failed : EXIT.pending;
}

/** The group: --group, KAFKA_EO_GROUP, or the only one the tables know. */
async function resolveGroup(pool: Pool, flags: Parsed['flags'], env: NodeJS.ProcessEnv): Promise<string> {
  const given = (flags.get('group') as string | undefined) ?? env.KAFKA_EO_GROUP;
  if (given) return given;
  const { rows } = await pool.query(
    `SELECT consumer_group FROM ${PARKED_KEYS_TABLE} UNION SELECT consumer_group FROM ${AUDIT_TABLE}
     UNION SELECT DISTINCT consumer_group FROM ${INBOX_TABLE} WHERE dlq_reason IS NOT NULL OR status = 'retrying'`,
  );
  if (rows.length === 1) return rows[0].consumer_group;
  throw new OperatorRequestError('invalid', rows.length === 0 ? 'no consumer group has dead letters or parked keys here; name one with --group' : `several consumer groups here (${rows.map((r) => r.consumer_group).join(', ')}): name one with --group`, 'group');
}

/** Why a queued operation may not have run: no member in the group (asked of Kafka; silent if Kafka does not answer). */
async function consumerHint(env: NodeJS.ProcessEnv, group: string): Promise<string> {
  const kafka = createKafkaClient({ clientId: 'kafka-eo-cli', brokers: (env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','), logLevel: logLevel.NOTHING, connectionTimeout: 3000, retry: { retries: 1 } });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const { groups } = await admin.describeGroups([group]);
    const members = groups[0]?.members.length ?? 0;
    return members === 0 ? `no consumer of group ${group} is running: it is carried out when one starts` : `${members} consumer(s) of group ${group} are running; see their logs`;
  } catch {
    return 'Kafka did not answer to tell whether a consumer of the group is running';
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Runs one CLI command; resolves the exit code. */
export async function runKafkaEo(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<number> {
  let parsed: Parsed;
  try {
    parsed = parse(argv);
  } catch (err) {
    io.err(`${printable((err as Error).message)}\n\n${USAGE}`);
    return EXIT.usage;
  }
  const { positional, flags } = parsed;
  if (flags.has('help') || positional.length === 0) {
    (flags.has('help') ? io.out : io.err)(USAGE);
    return flags.has('help') ? EXIT.ok : EXIT.usage;
  }
  const [noun, verb, ...args] = positional;
  const json = flags.has('json');
  const text = (name: string) => flags.get(name) as string | undefined;
  // What a record carries reaches the terminal escaped: no control sequence of a key or a value acts on it.
  const print = (document: unknown, human: () => string) => io.out(json ? jsonForTerminal(document) : human().split('\n').map(printable).join('\n'));
  const arity = (n: number, names: string) => {
    if (args.length !== n) throw new OperatorRequestError('invalid', `${noun} ${verb} takes ${names}`);
  };
  const limit = text('limit') === undefined ? undefined : /^[0-9]{1,4}$/.test(text('limit')!) ? Number(text('limit')) : NaN;
  const timeoutMs = text('timeout-ms') === undefined ? 60000 : Number(text('timeout-ms'));

  if (noun === 'schemas') {
    try {
      await runSchemasCommand({ verb, args, text, env, print });
      return EXIT.ok;
    } catch (err) {
      if (err instanceof OperatorRequestError) {
        io.err(`kafka-eo: ${printable(err.message)}`);
        return err.kind === 'invalid' ? EXIT.usage : EXIT.notFound;
      }
      io.err(`kafka-eo: ${printable((err as Error).message)}`);
      return EXIT.failed;
    }
  }

  if (noun === 'overview') {
    try {
      await runOverviewCommand({ args: verb === undefined ? args : [verb, ...args], text, env, print, table, fields, warn: (line) => io.err(`${printable(line)}\n`) });
      return EXIT.ok;
    } catch (err) {
      if (err instanceof OperatorRequestError) {
        io.err(`kafka-eo: ${printable(err.message)}\n\n${USAGE}`);
        return EXIT.usage;
      }
      io.err(`kafka-eo: ${printable((err as Error).message)}`);
      return EXIT.failed;
    }
  }

  if (noun === 'transactions') {
    try {
      const done = await runTransactionsCommand({ verb, args, text, env, print, table, fields, warn: (line) => io.err(`${printable(line)}\n`) });
      return 'state' in done && done.state === 'failed' ? EXIT.failed : EXIT.ok;
    } catch (err) {
      if (err instanceof OperatorRequestError) {
        io.err(`kafka-eo: ${printable(err.message)}${err.field === 'reason' ? '' : `\n\n${USAGE}`}`);
        return EXIT.usage;
      }
      io.err(`kafka-eo: ${printable((err as Error).message)}`);
      const status = err instanceof TransactionsAnswer ? err.status : 0;
      return status === 400 ? EXIT.usage : status === 404 ? EXIT.notFound : status === 409 ? EXIT.conflict : EXIT.failed;
    }
  }

  if (noun === 'spool') {
    try {
      if (verb !== 'show' || args.length !== 1) throw new OperatorRequestError('invalid', 'spool show takes <directory> (the publisher.spool.directory of the application)');
      const spool = inspectSpool(args[0]);
      print(spool, () =>
        [
          `spool            ${spool.directory}`,
          `waiting          ${spool.waiting.records} records (${spool.waiting.bytes} bytes)`,
          `quarantined      ${spool.quarantined.length} records (set aside: they will not be sent without an operator)`,
          ...(spool.quarantined.length > 0 ? ['', 'quarantined records:', table(spool.quarantined as never, ['at', 'messageId', 'topic', 'key', 'reason'])] : []),
          ...(spool.waiting.oldest.length > 0 ? ['', `oldest waiting records (${spool.waiting.oldest.length} of ${spool.waiting.records}):`, table(spool.waiting.oldest as never, ['spooledAt', 'messageId', 'topic', 'key'])] : []),
          ...(spool.corruptTails.length > 0 ? ['', 'corrupt tails moved aside at a start:', table(spool.corruptTails as never, ['file', 'bytes'])] : []),
          ...(spool.tornSegments.length > 0 ? ['', 'torn segment tails (moved aside at the next start):', table(spool.tornSegments as never, ['file', 'atByte', 'reason'])] : []),
        ].join('\n'),
      );
      return EXIT.ok;
    } catch (err) {
      if (err instanceof OperatorRequestError) {
        io.err(`kafka-eo: ${printable(err.message)}\n\n${USAGE}`);
        return EXIT.usage;
      }
      io.err(`kafka-eo: ${printable((err as Error).message)}`);
      return /^no spool directory|is not a publisher spool/.test((err as Error).message) ? EXIT.notFound : EXIT.failed;
    }
  }

  const pool = new Pool({ connectionString: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', max: noun === 'outbox' ? 4 : 2 });
  try {
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0) throw new OperatorRequestError('invalid', `--timeout-ms must be a whole number of milliseconds`, 'timeout-ms');
    if (noun === 'outbox') return await runOutboxCommand({ verb, args, text, limit, env, pool, print, table, fields, err: io.err });
    const group = await resolveGroup(pool, flags, env);
    if (noun === 'bulk') return await runBulkCommand({ verb, args, text, limit, group, env, pool, print, table, fields, err: io.err });
    const store = new OperatorStore(pgPoolSql(pool), group);
    const query = { topic: text('topic'), key: text('key'), reason: text('reason'), after: text('after'), limit };
    const finish = async (queued: AuditEntry) => {
      const entry = flags.has('no-wait') ? queued : await store.waitFor(queued.id, timeoutMs);
      print(entry, () => fields({ ...entry }));
      if (entry.state === 'pending' || entry.state === 'running') io.err(`operation ${entry.id} is ${entry.state}: ${await consumerHint(env, group)}`);
      return flags.has('no-wait') ? EXIT.ok : exitOf(entry);
    };
    if (noun === 'story') {
      const messageId = verb;
      if (args.length > 0) throw new OperatorRequestError('invalid', 'story takes one <message-id> (or --key, or --topic with --partition and --offset)');
      const story = await new MessageStories(pgPoolSql(pool), store).story({
        ...storyQuery({ messageId, key: text('key'), topic: text('topic'), partition: text('partition'), offset: text('offset'), after: text('after') }),
        limit,
      });
      print(story, () => describeStory(story));
      return story.records.length === 0 && story.parkedKeys.length === 0 && story.outbox.length === 0 ? EXIT.notFound : EXIT.ok;
    }
    switch (`${noun} ${verb}`) {
      case 'dlq list': {
        arity(0, 'no arguments');
        const page = await store.listDeadLetters(query);
        print(page, () => `${table(page.items as never, ['id', 'topic', 'partition', 'offset', 'messageId', 'key', 'reason', 'status', 'deadLetteredAt'])}${page.next ? `\nmore: --after ${page.next}` : ''}`);
        return EXIT.ok;
      }
      case 'dlq show': {
        arity(1, '<id>');
        const letter = await store.showDeadLetter(args[0], text('topic'));
        print(letter, () => `${fields({ ...letter, headers: undefined })}\nheaders:\n${table(Object.entries(letter.headers).map(([name, value]) => ({ name, value })), ['name', 'value'])}\nhistory:\n${table(letter.history as never, ['id', 'action', 'state', 'actor', 'requestedAt', 'result'])}`);
        return EXIT.ok;
      }
      case 'dlq replay':
        arity(1, '<id>');
        return await finish(await store.requestReplay(args[0], { topic: text('topic'), actor: text('actor') ?? env.USER }));
      case 'dlq record': {
        arity(1, '<id>');
        const record = await new OperatorStore(pgPoolSql(pool), group, decodingSchemas(text, env)).deadLetterRecord(args[0], text('topic'));
        print(record, () => describeRecord({ id: record.id, topic: record.topic, 'dead-letter topic': record.deadLetterTopic }, record));
        return EXIT.ok;
      }
      case 'retries list': {
        arity(0, 'no arguments');
        const waiting = await store.listRetrying(query);
        print({ items: waiting }, () => (waiting.length === 0 ? 'no record waits on a retry topic' : table(waiting as never, ['id', 'retryTopic', 'dueAt', 'failedOn', 'partition', 'offset', 'messageId', 'error'])));
        return EXIT.ok;
      }
      case 'parked list': {
        arity(0, 'no arguments');
        const page = await store.listParkedKeys(query);
        print(page, () => `${table(page.items as never, ['topic', 'key', 'reason', 'parkedRecords', 'partition', 'offset', 'messageId', 'parkedAt'])}${page.next ? `\nmore: --after ${page.next}` : ''}`);
        return EXIT.ok;
      }
      case 'parked show': {
        arity(2, '<topic> <key>');
        const key = await store.showParkedKey(args[0], args[1], { limit, after: text('after') });
        print(key, () => `${fields(Object.fromEntries(Object.entries(key).filter(([name]) => name !== 'next')))}\nparked records (released in this order):\n${table(key.records.map((r) => ({ ...r, error: r.lastReleaseError?.message ?? r.error?.message })) as never, ['seq', 'partition', 'offset', 'messageId', 'reason', 'releaseFailures', 'error'])}${key.next ? `\nmore (${key.records.length} of ${key.parkedRecords} shown): --after ${key.next}` : ''}`);
        return EXIT.ok;
      }
      case 'parked record': {
        arity(1, '<seq>');
        const record = await new OperatorStore(pgPoolSql(pool), group, decodingSchemas(text, env)).parkedRecord(args[0]);
        print(record, () => describeRecord({ seq: record.seq, topic: record.topic, partition: record.partition, offset: record.offset, messageId: record.messageId, 'parked under': record.key, state: record.state, reason: record.reason, error: record.error?.message, parkedAt: record.parkedAt, releaseFailures: record.releaseFailures }, { key: record.recordKey, headers: record.headers, value: record.value }));
        return EXIT.ok;
      }
      case 'audit list': {
        arity(0, 'no arguments');
        const page = await store.listAudit(auditQuery({ action: text('action'), topic: text('topic'), key: text('key'), actor: text('actor'), limit: text('limit'), after: text('after') }));
        print(page, () => `${table(page.items.map((e) => ({ ...e, target: e.messageId ?? e.key })) as never, ['id', 'requestedAt', 'actor', 'declaredActor', 'action', 'topic', 'target', 'state', 'reason'])}${page.next ? `\nmore: --after ${page.next}` : ''}`);
        return EXIT.ok;
      }
      case 'parked release':
        arity(2, '<topic> <key>');
        return await finish(await store.requestRelease(args[0], args[1], { actor: text('actor') ?? env.USER }));
      case 'parked discard': {
        arity(1, '<seq>');
        const entry = await store.discard(args[0], text('reason'), { actor: text('actor') ?? env.USER });
        print(entry, () => fields({ ...entry }));
        return EXIT.ok;
      }
      case 'outputs divert': {
        const options = { actor: text('actor') ?? env.USER, deadLetterTopic: text('dead-letter-topic') };
        let target: Parameters<OperatorStore['divertOutputs']>[0];
        if (text('replay') !== undefined) {
          arity(0, 'no arguments with --replay');
          target = { replay: text('replay')! };
        } else {
          arity(3, '<topic> <partition> <offset> (or --replay <seq>)');
          target = { topic: args[0], partition: /^[0-9]{1,9}$/.test(args[1]) ? Number(args[1]) : NaN, offset: args[2] };
        }
        const entry = await store.divertOutputs(target, text('output-topic'), text('reason'), options);
        print(entry, () => fields({ ...entry }));
        return EXIT.ok;
      }
      case 'operations show': {
        arity(1, '<id>');
        const entry = await store.operation(args[0]);
        print(entry, () => fields({ ...entry }));
        return EXIT.ok;
      }
      default:
        throw new OperatorRequestError('invalid', `unknown command "${positional.slice(0, 2).join(' ')}"`);
    }
  } catch (err) {
    if (err instanceof OperatorRequestError) {
      if (json) io.out(jsonForTerminal({ statusCode: err.status, message: err.message, ...(err.field ? { field: err.field } : {}) }));
      io.err(`kafka-eo: ${printable(err.message)}${err.kind === 'invalid' && !err.field?.match(/^(reason|topic|key|limit|after|id|seq|outputTopic|partition|offset|replay|position|state|prefix)$/) ? `\n\n${USAGE}` : ''}`);
      return err.kind === 'invalid' ? EXIT.usage : err.kind === 'not-found' ? EXIT.notFound : EXIT.conflict;
    }
    if ((err as { code?: string }).code === '42P01') {
      io.err(`kafka-eo: the kafka-exactly-once tables are not in this database (${printable((err as Error).message)}); set DATABASE_URL to the consumer's database (a consumer creates them when it starts)`);
    } else io.err(`kafka-eo: ${printable((err as Error).message)}`);
    return EXIT.failed;
  } finally {
    await pool.end().catch(() => undefined);
  }
}
