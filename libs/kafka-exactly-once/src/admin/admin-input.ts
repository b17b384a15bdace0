import { OperatorRequestError } from '../errors/operator-request.error';
import type { StoryQuery } from './message-story';
import type { AuditQuery, ListQuery } from './operator-store';

/** A JSON body with only the named fields (an unknown field is a 400 naming it: a typo must not be ignored). */
export function bodyOf(body: unknown, allowed: string[]): Record<string, unknown> {
  if (body === undefined || body === null || body === '') return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw new OperatorRequestError('invalid', 'the body must be a JSON object', 'body');
  for (const field of Object.keys(body)) {
    if (!allowed.includes(field)) throw new OperatorRequestError('invalid', `unknown field "${field.slice(0, 100)}" (allowed: ${allowed.join(', ') || 'none'})`, field.slice(0, 100));
  }
  return body as Record<string, unknown>;
}

export function optionalText(body: Record<string, unknown>, field: string, max = 200): string | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > max) throw new OperatorRequestError('invalid', `${field} must be a string of at most ${max} characters`, field);
  return value;
}

export function optionalBoolean(body: Record<string, unknown>, field: string): boolean | undefined {
  const value = body[field];
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new OperatorRequestError('invalid', `${field} must be true or false`, field);
  return value;
}

/** A query string of only the named parameters (none by default), each given once: an unknown one is a 400 naming it. */
export function queryOf(query: Record<string, unknown> | undefined, allowed: string[] = []): Record<string, string | undefined> {
  for (const [field, value] of Object.entries(query ?? {})) {
    if (!allowed.includes(field)) throw new OperatorRequestError('invalid', `unknown query parameter "${field.slice(0, 100)}" (allowed: ${allowed.join(', ') || 'none'})`, field.slice(0, 100));
    if (value !== undefined && typeof value !== 'string') throw new OperatorRequestError('invalid', `query parameter ${field} is given more than once`, field);
  }
  return (query ?? {}) as Record<string, string | undefined>;
}

function limitOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const limit = /^[0-9]{1,4}$/.test(text) ? Number(text) : NaN;
  if (Number.isNaN(limit)) throw new OperatorRequestError('invalid', `limit must be an integer from 1 to 500, got "${text.slice(0, 40)}"`, 'limit');
  return limit;
}

/** List filters from a query string. */
export function listQuery(query: Record<string, unknown>): ListQuery {
  const text = queryOf(query, ['topic', 'key', 'reason', 'limit', 'after']);
  return { topic: text.topic, key: text.key, reason: text.reason, after: text.after, limit: limitOf(text.limit) };
}

/** An instant of a query string (ISO 8601, as the console's links write them), or undefined. */
export function instantOf(text: string | undefined, field: string): string | undefined {
  if (text === undefined) return undefined;
  if (text.length > 40 || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/.test(text) || Number.isNaN(Date.parse(text))) {
    throw new OperatorRequestError('invalid', `${field} must be an instant in ISO 8601 with its offset (2026-12-06T03:10:00Z), got "${text.slice(0, 40)}"`, field);
  }
  return new Date(text).toISOString();
}

/** Dead-letter filters from a query string: the list's, and a time range (`from`, `to`). */
export function deadLetterQuery(query: Record<string, unknown>): ListQuery {
  const text = queryOf(query, ['topic', 'key', 'reason', 'limit', 'after', 'from', 'to']);
  return { topic: text.topic, key: text.key, reason: text.reason, after: text.after, limit: limitOf(text.limit), from: instantOf(text.from, 'from'), to: instantOf(text.to, 'to') };
}

/** Retry-tier filters from a query string. */
export function retriesQuery(query: Record<string, unknown>): Pick<ListQuery, 'topic' | 'limit'> {
  const text = queryOf(query, ['topic', 'limit']);
  return { topic: text.topic, limit: limitOf(text.limit) };
}

/** Audit log filters from a query string. */
export function auditQuery(query: Record<string, unknown>): AuditQuery {
  const text = queryOf(query, ['action', 'topic', 'key', 'actor', 'limit', 'after']);
  return { action: text.action, topic: text.topic, key: text.key, actor: text.actor, after: text.after, limit: limitOf(text.limit) };
}

/** A story's search from a query string: messageId, key, or topic with partition and offset. */
export function storyQuery(query: Record<string, unknown>): StoryQuery {
  const text = queryOf(query, ['messageId', 'key', 'topic', 'partition', 'offset', 'limit', 'after']);
  const partition = text.partition === undefined ? undefined : /^[0-9]{1,9}$/.test(text.partition) ? Number(text.partition) : NaN;
  return { messageId: text.messageId, key: text.key, topic: text.topic, partition, offset: text.offset, limit: limitOf(text.limit), after: text.after };
}

/** A page of a parked key's records from a query string. */
export function pageQuery(query: Record<string, unknown>): Pick<ListQuery, 'limit' | 'after'> {
  const text = queryOf(query, ['limit', 'after']);
  return { limit: limitOf(text.limit), after: text.after };
}
