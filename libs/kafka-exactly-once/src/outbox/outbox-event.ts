import { createHash } from 'crypto';
import type { Message } from '../kafkajs';
import { OUTBOX_CHANNEL, OUTBOX_TABLE } from '../kafka-exactly-once.constants';
import { type DurableHeaders, fromDurableHeaders } from '../publishing/event-headers';

/** One row of the outbox table as the relay reads it. */
export interface OutboxRow {
  /** bigint as text: the event's place in its key's commit order. */
  position: string;
  id: string;
  aggregatetype: string;
  aggregateid: Buffer;
  type: string;
  payload: Buffer;
  headers: Buffer;
  created_at: Date;
}

/** The columns of a row, in the order the relay selects them. */
export const OUTBOX_COLUMNS = 'position, id, aggregatetype, aggregateid, type, payload, headers, created_at';

/** The Kafka record of an outbox row: the key, value and headers `EventPublisher.publish` would have sent. */
export function outboxMessage(row: OutboxRow): Message {
  return { key: row.aggregateid, value: row.payload, headers: decodeHeaders(row.headers) };
}

/** A row's headers column: JSON of the headers in their durable form (bytes as `{ base64 }`, see event-headers.ts). */
export function encodeHeaders(headers: DurableHeaders): Buffer {
  return Buffer.from(JSON.stringify(headers), 'utf8');
}

/** A row's headers to send: text as text, bytes as bytes; throws UnsendableHeadersError for a value of no known form. */
export function decodeHeaders(bytes: Buffer): Record<string, string | Buffer> {
  return fromDurableHeaders(JSON.parse(bytes.toString('utf8')));
}

/**
 * The advisory lock a writer holds on (topic, key) until its transaction ends: the writers of one key take
 * their rows' positions one transaction after the other, so that positions follow the order of their commits.
 * 64 bits of SHA-256 over the topic and the key's bytes (two keys sharing a lock only wait for each other).
 */
export function keyLockId(topic: string, key: Buffer): string {
  const digest = createHash('sha256').update(topic).update('\u0000').update(key).digest();
  return digest.readBigInt64BE(0).toString();
}

/**
 * The two parts of an insert into the outbox that keep a key's positions in commit order: `position`, taken
 * from the sequence in the SELECT list, and `from`, the one-row subquery that first takes the key's lock (its id
 * in parameter `lockParam`) and notifies the relay (at commit). A subquery with volatile functions is not
 * flattened: the lock is held before the position is taken.
 */
export function lockedPosition(lockParam: string): { position: string; from: string } {
  return {
    position: `nextval(pg_get_serial_sequence('${OUTBOX_TABLE}', 'position'))`,
    from: `(SELECT pg_advisory_xact_lock(${lockParam}::bigint), pg_notify('${OUTBOX_CHANNEL}', '')) AS locked`,
  };
}
