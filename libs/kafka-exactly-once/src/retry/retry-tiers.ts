import type { IHeaders } from '../kafkajs';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import type { RetryTopicsOptions } from '../interfaces/kafka-exactly-once-options.interface';
import type { RecordedFailure } from '../inbox/inbox.repository';
import type { HandlerDefinition, RetryTiers } from '../engine/handler-definition';
import { RETRY_HEADERS } from '../kafka-exactly-once.constants';
import { isRetriableHandlerError } from '../engine/error-classification';
import { HeaderPair, headerPairs, textHeaderPairs } from '../engine/record-headers';
import { firstHeader, storableText } from '../engine/record-identity';

/** Where a record was first consumed. */
export interface RetryOrigin {
  topic: string;
  partition: number;
  offset: string;
}

export const MAX_RETRY_TIERS = 10;
export const MIN_RETRY_DELAY_MS = 100;
export const MAX_RETRY_DELAY_MS = 7 * 24 * 3600 * 1000;

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };
const RETRY_HEADER_NAMES = new Set<string>(Object.values(RETRY_HEADERS));

/** The topic of tier `tier` (from 1) of `topic`. */
export function retryTopicName(topic: string, tier: number): string {
  return `${topic}.retry.${tier}`;
}

/** A delay as milliseconds: a whole number of ms, or text like `'500ms'`, `'10s'`, `'1.5m'`, `'2h'`, `'1d'`. */
export function parseDelay(value: unknown, field: string): number {
  let ms: number;
  if (typeof value === 'number') {
    ms = value;
  } else if (typeof value === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(value);
    if (!match) throw new InvalidOptionsError(field, `must be a number of ms or text like '500ms', '10s', '1m', '2h', got ${JSON.stringify(value)}`);
    ms = Math.round(Number(match[1]) * UNITS[match[2]]);
  } else {
    throw new InvalidOptionsError(field, `must be a number of ms or text like '10s', got ${JSON.stringify(value)}`);
  }
  if (!Number.isInteger(ms) || ms < MIN_RETRY_DELAY_MS || ms > MAX_RETRY_DELAY_MS) {
    throw new InvalidOptionsError(field, `must be a whole number of ms from ${MIN_RETRY_DELAY_MS} to ${MAX_RETRY_DELAY_MS} (7 days), got ${JSON.stringify(value)}`);
  }
  return ms;
}

/** Validates a handler's `retryTopics` option; `topic` is the topic it consumes (with the module's prefix). */
export function resolveRetryTiers(topic: string, options: RetryTopicsOptions, field = 'retryTopics'): RetryTiers {
  if (options === null || typeof options !== 'object') throw new InvalidOptionsError(field, "must be an object: { delays: ['10s', '1m', '10m'] }");
  const delays = options.delays;
  if (!Array.isArray(delays) || delays.length === 0 || delays.length > MAX_RETRY_TIERS) {
    throw new InvalidOptionsError(`${field}.delays`, `must list the delay of each tier, 1 to ${MAX_RETRY_TIERS} of them, e.g. ['10s', '1m', '10m']`);
  }
  const deadLetterOn = options.deadLetterOn ?? [];
  if (!Array.isArray(deadLetterOn) || deadLetterOn.some((c) => typeof c !== 'function')) {
    throw new InvalidOptionsError(`${field}.deadLetterOn`, 'must be a list of error classes, e.g. [InvalidCardError]');
  }
  const delaysMs = delays.map((d, i) => parseDelay(d, `${field}.delays[${i}]`));
  return { topics: delaysMs.map((_, i) => retryTopicName(topic, i + 1)), delaysMs, deadLetterOn };
}

/** Whether a failure may go to the next tier: a handler's failure that may pass, not one the handler says is final. */
export function mayRetryLater(tiers: RetryTiers, failure: RecordedFailure, error?: unknown): boolean {
  if (failure.reason !== 'handler-failed') return false;
  if (error === undefined) return true; // a record that failed its units of work alone (overran, crashed a backend)
  if (!isRetriableHandlerError(error)) return false;
  const cause = (error as { cause?: unknown })?.cause;
  return !tiers.deadLetterOn.some((type) => error instanceof type || cause instanceof type);
}

const headerText = (headers: IHeaders | undefined, name: string) => firstHeader(headers?.[name])?.toString('utf8');

/**
 * Where a record on a tier of `base` was first consumed, from its headers. Read only for records of a tier (a
 * record of any other topic could name whatever it likes): the topic must be `base` or one of its tiers, the
 * partition and offset whole numbers.
 */
export function retryOrigin(headers: IHeaders | undefined, base: string): RetryOrigin | undefined {
  const topic = headerText(headers, RETRY_HEADERS.originalTopic);
  const partition = headerText(headers, RETRY_HEADERS.originalPartition);
  const offset = headerText(headers, RETRY_HEADERS.originalOffset);
  if (topic === undefined || partition === undefined || offset === undefined) return undefined;
  if (topic !== base && !topic.startsWith(`${base}.retry.`)) return undefined;
  if (!/^\d{1,9}$/.test(partition) || !/^\d{1,19}$/.test(offset)) return undefined;
  return { topic, partition: Number(partition), offset: BigInt(offset).toString() };
}

/**
 * When a record of a tier is due: its `retry-due-at`, but never later than its timestamp plus the tier's delay
 * (a header of any value cannot hold a partition for longer), and now when neither can be read.
 */
export function dueAt(message: { headers?: IHeaders; timestamp: string }, delayMs: number, now = Date.now()): number {
  const timestamp = Number(message.timestamp);
  const latest = Number.isSafeInteger(timestamp) && timestamp > 0 ? timestamp + delayMs : now;
  const header = Number(headerText(message.headers, RETRY_HEADERS.dueAt) ?? NaN);
  return Number.isSafeInteger(header) && header > 0 ? Math.min(header, latest) : latest;
}

/** One failed stage, as a `retry-history` header: stage 0 is the topic, 1 the first tier... */
export function historyPair(stage: number, where: RetryOrigin, attempts: number, failure: RecordedFailure, at: number): HeaderPair {
  const entry = {
    stage,
    topic: where.topic,
    partition: where.partition,
    offset: where.offset,
    attempts,
    error: storableText(failure.name, 200),
    message: storableText(failure.message, 300),
    at: new Date(at).toISOString(),
  };
  return textHeaderPairs({ [RETRY_HEADERS.history]: JSON.stringify(entry) })[0];
}

/**
 * The headers of a record moved from `stage` (0: the topic) to the next tier: its own headers byte for byte,
 * without retry headers it carried (on the topic itself they can only be forged; on a tier they are replaced),
 * but with the history of earlier tiers, then its origin, the tier, the due time, the error and this stage's
 * history entry.
 */
export function tierHeaders(
  headers: IHeaders | undefined,
  stage: number,
  where: RetryOrigin,
  origin: RetryOrigin,
  attempts: number,
  failure: RecordedFailure,
  due: number,
  now: number,
): HeaderPair[] {
  const kept = headerPairs(headers).filter(([name64]) => {
    const name = Buffer.from(name64, 'base64').toString('utf8');
    if (!RETRY_HEADER_NAMES.has(name)) return true;
    return stage > 0 && name === RETRY_HEADERS.history;
  });
  return [
    ...kept,
    ...textHeaderPairs({
      [RETRY_HEADERS.originalTopic]: origin.topic,
      [RETRY_HEADERS.originalPartition]: String(origin.partition),
      [RETRY_HEADERS.originalOffset]: origin.offset,
      [RETRY_HEADERS.attempt]: String(stage + 1),
      [RETRY_HEADERS.dueAt]: String(due),
      [RETRY_HEADERS.errorClass]: storableText(failure.name, 200),
      [RETRY_HEADERS.errorMessage]: storableText(failure.message, 300),
    }),
    historyPair(stage, where, attempts, failure, now),
  ];
}

/** Which handler consumes a topic: from the topic itself (stage 0) or from its retry tier `stage`. */
export interface Route {
  handler: HandlerDefinition;
  stage: number;
}

/** The topics the handlers consume: each one's own, and its retry tiers'. */
export function routesOf(handlers: HandlerDefinition[]): Map<string, Route> {
  const routes = new Map<string, Route>();
  for (const handler of handlers) {
    routes.set(handler.topic, { handler, stage: 0 });
    handler.retryTopics?.topics.forEach((topic, i) => routes.set(topic, { handler, stage: i + 1 }));
  }
  return routes;
}
