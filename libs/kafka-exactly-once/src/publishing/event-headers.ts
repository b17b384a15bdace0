/**
 * The headers and message id a caller gives `EventPublisher.publish`, `publishAll` and `Outbox.add`, checked at
 * the call, and the form in which they wait on disk (the publisher's spool, the outbox table) until they are sent.
 *
 * A header value is text (sent as its UTF-8 bytes) or bytes (a Buffer or Uint8Array, sent as they are); a header
 * whose value is `undefined` is left out. Anything else (a number, a boolean, null, an object) is refused at the
 * call, naming the header: Kafka's record format has no such values, and an event acknowledged to the caller must
 * be one that can be sent, now or after a restart.
 */

/** A header value `publish`, `publishAll` and `Outbox.add` take. */
export type EventHeaderValue = string | Buffer | Uint8Array;

/** The headers `publish`, `publishAll` and `Outbox.add` take; a name whose value is undefined is left out. */
export type EventHeaders = Record<string, EventHeaderValue | undefined>;

/**
 * A header value as it waits on disk (JSON): text as itself, bytes as base64 in an object, so that bytes come
 * back byte for byte after a restart and are never confused with text.
 */
export type DurableHeaderValue = string | { base64: string };

export type DurableHeaders = Record<string, DurableHeaderValue>;

/** Why these headers cannot be sent (naming the header), or undefined when they can. */
export function headersProblem(headers: unknown): string | undefined {
  if (headers === undefined) return undefined;
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers) || Buffer.isBuffer(headers)) {
    return `headers must be an object of header names to values, got ${describe(headers)}`;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (name === '') return 'a header name must not be empty';
    if (value === undefined || typeof value === 'string' || value instanceof Uint8Array) continue;
    return `header "${printable(name)}" has ${describe(value)} as its value: a header value must be a string (sent as UTF-8) or a Buffer/Uint8Array (sent as is); convert it, e.g. String(value), or leave the header out`;
  }
  return undefined;
}

/**
 * Why this message id cannot be used, or undefined when it can: a non-empty string, well-formed (a lone
 * surrogate would not reach consumers as given) and without U+0000 (PostgreSQL text cannot hold it).
 */
export function messageIdProblem(messageId: unknown): string | undefined {
  if (messageId === undefined) return undefined;
  if (typeof messageId !== 'string') return `messageId must be a string, got ${describe(messageId)}: convert it, e.g. String(id)`;
  if (messageId === '') return 'messageId must not be empty';
  if (messageId.includes('\u0000')) return 'messageId must not contain U+0000 (PostgreSQL text cannot hold it)';
  if (!(messageId as string & { isWellFormed(): boolean }).isWellFormed()) return 'messageId must be well-formed UTF-16 (a lone surrogate would not reach consumers as given)';
  return undefined;
}

/** The headers as they wait on disk (headers already checked by headersProblem). */
export function toDurableHeaders(headers: EventHeaders): DurableHeaders {
  const durable: DurableHeaders = {};
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    own(durable, name, typeof value === 'string' ? value : { base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') });
  }
  return durable;
}

/**
 * The headers to send, from their durable form; throws UnsendableHeadersError when a value is none of the
 * forms this or an earlier version wrote (an earlier version wrote a Buffer as `{"type":"Buffer","data":[...]}`:
 * those are read back as the bytes the caller gave).
 */
export function fromDurableHeaders(durable: unknown): Record<string, string | Buffer> {
  if (durable === undefined || durable === null) return {};
  if (typeof durable !== 'object' || Array.isArray(durable)) throw new UnsendableHeadersError(`its headers are ${describe(durable)}, not an object`);
  const headers: Record<string, string | Buffer> = {};
  for (const [name, value] of Object.entries(durable as Record<string, unknown>)) {
    if (value === undefined) continue;
    const bytes = typeof value === 'string' ? value : durableBytes(value);
    if (bytes === undefined) throw new UnsendableHeadersError(`header "${printable(name)}" has ${describe(value)} as its value, which Kafka's record format cannot carry`);
    own(headers, name, bytes);
  }
  return headers;
}

/** The bytes of a header value in durable form (a header already checked), for size estimates. */
export function durableValueBytes(value: DurableHeaderValue): number {
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  // A value an older version wrote in another form: its size as JSON, never a throw (it is set aside before sending).
  return typeof value?.base64 === 'string' ? Buffer.byteLength(value.base64, 'base64') : Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/** A spooled or outbox record whose headers cannot be sent (written by an older version): it is set aside. */
export class UnsendableHeadersError extends Error {
  constructor(problem: string) {
    super(`the record cannot be sent: ${problem}`);
    this.name = 'UnsendableHeadersError';
  }
}

/** Sets an own property whatever its name: a header named `__proto__` is a header, not the object's prototype. */
function own<T>(target: Record<string, T>, name: string, value: T): void {
  Object.defineProperty(target, name, { value, enumerable: true, writable: true, configurable: true });
}

function durableBytes(value: unknown): Buffer | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { base64, type, data } = value as { base64?: unknown; type?: unknown; data?: unknown };
  if (typeof base64 === 'string' && Object.keys(value).length === 1) return Buffer.from(base64, 'base64');
  // JSON.stringify of a Buffer, as the spool of versions before 0.5 wrote a Buffer header value.
  if (type === 'Buffer' && Array.isArray(data) && data.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) return Buffer.from(data as number[]);
  return undefined;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return `a ${typeof value} (${String(value).slice(0, 40)})`;
}

/** A header name as it can be shown in a message: at most 100 characters, control characters escaped. */
function printable(name: string): string {
  const short = name.length > 100 ? `${name.slice(0, 100)}…` : name;
  return JSON.stringify(short).slice(1, -1);
}
