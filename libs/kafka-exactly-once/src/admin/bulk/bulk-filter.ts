import { createHash } from 'crypto';
import { OperatorRequestError } from '../../errors/operator-request.error';
import { DEAD_LETTER_REASONS } from '../operator-store';

/** What a bulk action walks: the dead letters waiting for an operator, the parked keys, or the outbox's events set aside. */
export const BULK_KINDS = ['dead-letters', 'parked-keys', 'outbox-set-aside'] as const;
export type BulkKind = (typeof BULK_KINDS)[number];

/** What it does to each item: the single-record action of that kind (a dead letter has no discard of its own). */
export const BULK_ACTIONS: Readonly<Record<BulkKind, readonly BulkAction[]>> = {
  'dead-letters': ['replay'],
  'parked-keys': ['release'],
  'outbox-set-aside': ['retry', 'discard'],
};
export type BulkAction = 'replay' | 'release' | 'retry' | 'discard';

/** The filter of a bulk action, as the operator gives it (every field optional: none matches every item of the kind). */
export interface BulkFilter {
  /** The record's topic (dead letters: with its `.retry.N` tiers; outbox: the event's topic). */
  topic?: string;
  /** The reason it was set aside (dead letters, parked keys: one of DEAD_LETTER_REASONS). */
  reason?: string;
  /** Text contained in its error message (case-insensitive; the outbox: in the reason it was set aside with). */
  error?: string;
  /** ISO 8601 times, on when it was dead-lettered, parked or set aside: from (included) to (excluded). */
  from?: string;
  to?: string;
  /** Its key (dead letters: the record key; parked keys: the ordering key, or `sha256:<hex>`; outbox: the event's key). */
  key?: string;
}

/** A bulk action's kind, action and filter, checked and written one way (so that the same filter has one digest). */
export interface BulkSelection {
  kind: BulkKind;
  action: BulkAction;
  filter: BulkFilter;
}

export const FILTER_FIELDS = ['topic', 'reason', 'error', 'from', 'to', 'key'] as const;
/** The longest error text a filter looks for (a contained text: ILIKE over the rows the other fields leave). */
export const MAX_ERROR_FILTER = 200;
/** An ISO 8601 time with a date, a time and a zone (`2026-12-06T10:00:00Z`, `…+01:00`, with or without fractions). */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/;

function text(value: unknown, field: string, max: number): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new OperatorRequestError('invalid', `${field} must be a string`, field);
  if (value.length > max) throw new OperatorRequestError('invalid', `${field} must be at most ${max} characters, got ${value.length}`, field);
  return value;
}

function time(value: unknown, field: string): string | undefined {
  const given = text(value, field, 40);
  if (given === undefined) return undefined;
  const at = ISO_TIME.test(given) ? new Date(given) : null;
  if (!at || Number.isNaN(at.getTime())) throw new OperatorRequestError('invalid', `${field} must be an ISO 8601 time with its zone (e.g. 2026-12-06T10:00:00Z), got "${given.slice(0, 40)}"`, field);
  return at.toISOString();
}

/**
 * Checks a bulk action's kind, action and filter (400 naming the field), and writes the filter one way: fields
 * in a fixed order, empty ones left out, times as UTC ISO strings.
 */
export function bulkSelection(kindValue: unknown, actionValue: unknown, filterValue: unknown): BulkSelection {
  if (typeof kindValue !== 'string' || !(BULK_KINDS as readonly string[]).includes(kindValue)) {
    throw new OperatorRequestError('invalid', `kind must be one of ${BULK_KINDS.join(', ')}, got ${JSON.stringify(kindValue ?? null).slice(0, 60)}`, 'kind');
  }
  const kind = kindValue as BulkKind;
  const actions = BULK_ACTIONS[kind];
  if (typeof actionValue !== 'string' || !(actions as readonly string[]).includes(actionValue)) {
    throw new OperatorRequestError('invalid', `action must be ${actions.join(' or ')} for ${kind}, got ${JSON.stringify(actionValue ?? null).slice(0, 60)}`, 'action');
  }
  if (filterValue !== undefined && filterValue !== null && (typeof filterValue !== 'object' || Array.isArray(filterValue))) {
    throw new OperatorRequestError('invalid', 'filter must be an object of topic, reason, error, from, to and key', 'filter');
  }
  const given = (filterValue ?? {}) as Record<string, unknown>;
  for (const field of Object.keys(given)) {
    if (!(FILTER_FIELDS as readonly string[]).includes(field)) throw new OperatorRequestError('invalid', `unknown filter field "${field.slice(0, 100)}" (allowed: ${FILTER_FIELDS.join(', ')})`, field.slice(0, 100));
  }
  const filter: BulkFilter = {};
  const topic = text(given.topic, 'topic', 249);
  if (topic !== undefined) filter.topic = topic;
  const reason = text(given.reason, 'reason', 100);
  if (reason !== undefined) {
    if (kind === 'outbox-set-aside') throw new OperatorRequestError('invalid', 'reason filters dead letters and parked keys; for the outbox, give a text of its reason as error', 'reason');
    if (!(DEAD_LETTER_REASONS as readonly string[]).includes(reason)) throw new OperatorRequestError('invalid', `reason must be one of ${DEAD_LETTER_REASONS.join(', ')}, got "${reason}"`, 'reason');
    filter.reason = reason;
  }
  const error = text(given.error, 'error', MAX_ERROR_FILTER);
  if (error !== undefined) filter.error = error;
  const from = time(given.from, 'from');
  const to = time(given.to, 'to');
  if (from !== undefined && to !== undefined && from >= to) throw new OperatorRequestError('invalid', `from (${from}) must be before to (${to})`, 'to');
  if (from !== undefined) filter.from = from;
  if (to !== undefined) filter.to = to;
  const key = text(given.key, 'key', 10_000);
  if (key !== undefined) filter.key = key;
  return { kind, action: actionValue as BulkAction, filter };
}

/**
 * The filter's digest (hex SHA-256 of its one written form, with the kind and action): two requests for the same
 * bulk action have the same digest, which a unique index keeps to one running operation.
 */
export function selectionDigest(selection: BulkSelection): string {
  const filter = FILTER_FIELDS.filter((f) => selection.filter[f] !== undefined).map((f) => [f, selection.filter[f]]);
  return createHash('sha256').update(JSON.stringify([selection.kind, selection.action, filter]), 'utf8').digest('hex');
}

/** A text for `ILIKE '%…%' ESCAPE '\'`: its `%`, `_` and `\` match themselves. */
export function containsPattern(value: string): string {
  return `%${value.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** The rate of a bulk action, items per second: 1 to 100, 10 by default. */
export function ratePerSecond(value: unknown): number {
  if (value === undefined || value === null) return 10;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 100) {
    throw new OperatorRequestError('invalid', `ratePerSecond must be an integer from 1 to 100 (items per second), got ${JSON.stringify(value).slice(0, 40)}`, 'ratePerSecond');
  }
  return value;
}
