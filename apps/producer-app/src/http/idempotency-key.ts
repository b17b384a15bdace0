import { createHash } from 'crypto';

/**
 * The message id of a request that carries an `Idempotency-Key`. A client's key names one request of that client:
 * used as the message id as it is, two clients that both send `1` would make the second event a duplicate of the
 * first, and consumers would drop it. So the key is scoped: to the operation (method and route), to the caller
 * (`X-Client-Id` here; in an application with authentication, the authenticated principal), and, since this demo
 * authenticates nobody, to the request's body too, so that two anonymous callers with the same key and different
 * requests get different ids. The same request sent again with the same key (a retry after a lost answer) gets
 * the same id, and consumers deduplicate it. Without a key the publisher assigns a UUIDv7.
 */
export function scopedMessageId(operation: string, clientId: string | undefined, key: string | undefined, body: unknown): string | undefined {
  if (!key) return undefined;
  const digest = createHash('sha256')
    .update(JSON.stringify([operation, clientId ?? '', key, canonical(body)]))
    .digest('hex');
  return `idem-${digest.slice(0, 40)}`;
}

/** JSON with object keys sorted, so that a retry whose client orders its fields otherwise is the same request. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value as Record<string, unknown>)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}
