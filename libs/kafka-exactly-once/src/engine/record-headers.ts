import type { IHeaders, KafkaMessage, Message } from '../kafkajs';
import { fromRecordedOutput, OutputRecord, outputRecordSize, type RecordedOutput } from './output-record';

/** A header as recorded on the inbox: name and value as base64 (value null for a null header). */
export type HeaderPair = [string, string | null];

const b64 = (bytes: Buffer | string) => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes, 'utf8')).toString('base64');

/**
 * The values of one header name as KafkaJS decoded them. NOTE: KafkaJS 2.2.4 folds repeated names into an
 * array on a plain object, so a header named like an Object.prototype member (`constructor`, `toString`,
 * `__proto__`) comes out as `[<inherited member>, <bytes>]`: only bytes, strings and null are header values.
 */
function headerValues(value: unknown): Array<Buffer | string | null> {
  return (Array.isArray(value) ? value : [value]).filter((v): v is Buffer | string | null => v === null || Buffer.isBuffer(v) || typeof v === 'string');
}

/** Every header of a record, in order, byte for byte (a repeated name gives several pairs). */
export function headerPairs(headers: IHeaders | undefined): HeaderPair[] {
  const pairs: HeaderPair[] = [];
  for (const [name, value] of Object.entries(headers ?? {})) {
    for (const one of headerValues(value)) pairs.push([b64(name), one === null ? null : b64(one)]);
  }
  return pairs;
}

/** Text headers (added by the library or given to ctx.emit) as pairs. */
export function textHeaderPairs(headers: Record<string, string | Buffer>): HeaderPair[] {
  return Object.entries(headers).map(([name, value]) => [b64(name), b64(value)]);
}

/** The headers of a record as text, for handlers that read them (`ctx.message.headers`): lossy for non-UTF-8 bytes. */
export function textHeaders(message: KafkaMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    const [first] = headerValues(value);
    if (first !== undefined && first !== null) Object.defineProperty(headers, name, { value: first.toString(), enumerable: true, writable: true, configurable: true });
  }
  return headers;
}

/** A header of a record as text (the first value of a repeated name), or undefined when absent or null. */
export function headerText(message: KafkaMessage, name: string): string | undefined {
  const headers = message.headers;
  if (!headers || !Object.prototype.hasOwnProperty.call(headers, name)) return undefined;
  const [first] = headerValues(headers[name]);
  return first === undefined || first === null ? undefined : first.toString();
}

/** A record's headers read one name at a time (tracing's propagator asks for two or three names). */
export class MessageHeaderReader {
  constructor(private readonly message: KafkaMessage) {}
  get(name: string): string | undefined {
    return headerText(this.message, name);
  }
  names(): string[] {
    return Object.keys(this.message.headers ?? {});
  }
}

/** KafkaJS headers from an output's pairs (a repeated name gives an array, in order). */
export function kafkaHeaders(pairs: ReadonlyArray<[string, Buffer | null]>): IHeaders {
  // No prototype: a header may be named `__proto__` or `constructor`.
  const headers: IHeaders = Object.create(null);
  for (const [name, value] of pairs) {
    const existing = headers[name];
    const one = value as Buffer; // null is a null header
    headers[name] = existing === undefined ? one : Array.isArray(existing) ? [...existing, one] : [existing as Buffer, one];
  }
  return headers;
}

/** KafkaJS headers from recorded pairs (also reads the text headers of rows written before 0.2). */
export function toKafkaHeaders(output: RecordedOutput): IHeaders {
  return kafkaHeaders(fromRecordedOutput(output).headers);
}

export function toKafkaMessage(output: OutputRecord): Message {
  return { key: output.key, value: output.value, headers: kafkaHeaders(output.headers) };
}

/** Bytes a recorded output takes in a record batch, framing included (an upper estimate). */
export function outputSize(output: RecordedOutput): number {
  const len = (s: string | null | undefined) => (s ? Math.ceil((s.length * 3) / 4) : 0);
  let size = 64 + len(output.key) + len(output.value);
  for (const [name, value] of output.h ?? []) size += 10 + len(name) + len(value);
  for (const [name, value] of Object.entries(output.headers ?? {})) size += 10 + Buffer.byteLength(name) + Buffer.byteLength(value);
  return size;
}

/**
 * Outputs grouped per topic for KafkaJS sendBatch calls, cut into several requests (a transaction's outputs may
 * be larger than one produce request): each request holds at most `maxBytes`, and at most `topicLimit(topic)`
 * bytes for any one topic, since the broker refuses a record batch over the topic's `max.message.bytes`.
 * Order within a topic is kept.
 */
export function toProduceRequests(
  outputs: readonly OutputRecord[],
  maxBytes: number,
  topicLimit: (topic: string) => number | undefined = () => undefined,
): Array<Array<{ topic: string; messages: Message[] }>> {
  const requests: Array<Array<{ topic: string; messages: Message[] }>> = [];
  let current = new Map<string, { messages: Message[]; bytes: number }>();
  let bytes = 0;
  const flush = () => {
    if (current.size > 0) requests.push([...current].map(([topic, { messages }]) => ({ topic, messages })));
    current = new Map();
    bytes = 0;
  };
  for (const output of outputs) {
    const size = outputRecordSize(output);
    const limit = Math.min(maxBytes, topicLimit(output.topic) ?? maxBytes);
    const forTopic = current.get(output.topic)?.bytes ?? 0;
    if (bytes > 0 && (bytes + size > maxBytes || (forTopic > 0 && forTopic + size > limit))) flush();
    const entry = current.get(output.topic) ?? { messages: [], bytes: 0 };
    entry.messages.push(toKafkaMessage(output));
    entry.bytes += size;
    current.set(output.topic, entry);
    bytes += size;
  }
  flush();
  return requests;
}
