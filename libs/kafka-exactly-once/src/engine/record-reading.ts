import type { Logger } from '@nestjs/common';
import type { KafkaMessage } from '../kafkajs';
import { RetriableValidationError } from '../errors/retriable-validation.error';
import { SchemaRegistryError } from '../errors/schema-registry.error';
import type { DecodedValue } from '../formats/format.codec';
import type { KeyedRecord, RecordSchema } from '../interfaces/record-info.interface';
import type { ResolvedOptions } from '../options/resolved-options';
import { eventKeyIdentity } from './event-identity';
import type { HandlerDefinition } from './handler-definition';
import { textHeaders } from './record-headers';
import type { RecordIdentity } from './record-identity';
import { retryDelay } from './retry-policy';
import { pauseWithHeartbeats } from './sleep';

/** A record as a unit of work reads it (a ChunkRecord). */
interface ReadableRecord {
  message: KafkaMessage;
  offset: string;
  id: RecordIdentity;
}

/** What reading a record gave: the event as the handler gets it, or the failure and the attempts it took. */
export type ReadOutcome = { ok: true; event: unknown } | { ok: false; error: unknown; attempts: number };

/** Handlers already warned that a record had no usable event key (once per handler and process). */
const warnedNoKey = new WeakSet<object>();

/**
 * The identity of a record known by its coordinates whose handler names its event's own key (`messageIdFrom`): that
 * key's identity, in the same scope; else `id` as it is, with the reason (no field, not a usable value).
 */
export function eventIdentityOf(handler: HandlerDefinition, id: RecordIdentity, event: unknown, record: () => KeyedRecord): { id: RecordIdentity; problem?: string } {
  if (!handler.messageIdFrom || id.kind !== 'coordinates') return { id };
  const key = handler.messageIdFrom.keyOf(event, record);
  return 'key' in key ? { id: eventKeyIdentity(id.scope, key.key) } : { id, problem: key.problem };
}

/** The record as a `messageIdFrom` function is given it: its key as text and, exactly, as bytes (a copy). */
export function keyedRecord(topic: string, partition: number, message: KafkaMessage): KeyedRecord {
  const key = message.key ?? null;
  return { topic, partition, offset: message.offset, key: key?.toString() ?? null, keyBytes: key === null ? null : Buffer.from(key), headers: textHeaders(message), timestamp: message.timestamp };
}

/**
 * The records of one unit of work as their handler reads them: each value decoded once in the unit (before the claim
 * for the records whose identity comes from their event, else when handled), then validated; a validator that
 * could not decide now (RetriableValidationError) is asked again with the handler's retry policy, in place.
 */
export class UnitReading {
  private readonly decoded = new Map<string, { value: DecodedValue } | { error: unknown }>();

  constructor(
    private readonly deps: { handler: HandlerDefinition; options: ResolvedOptions; heartbeat: () => Promise<void>; topic: string; partition: number },
    private readonly logger: Logger,
  ) {}

  /**
   * Before the claim: each record without a `message-id` header whose handler names its event's key takes that
   * key's identity. A record that cannot be decoded or has no usable key keeps its coordinates (and is dead-lettered
   * when handled, if it cannot be decoded). Throws only SchemaRegistryError (a writer schema the registry did not give).
   */
  identify(records: ReadableRecord[]): void {
    const { handler, topic, partition } = this.deps;
    if (!handler.messageIdFrom) return;
    for (const record of records) {
      if (record.id.kind !== 'coordinates') continue;
      const decoded = this.decode(record);
      if (!('value' in decoded)) continue;
      const { id, problem } = eventIdentityOf(handler, record.id, decoded.value.event, () => keyedRecord(topic, partition, record.message));
      record.id = id;
      if (problem && !warnedNoKey.has(handler)) {
        warnedNoKey.add(handler);
        this.logger.warn(
          `${handler.name}: ${topic}[${partition}]@${record.offset} has no message-id header and no usable key for messageIdFrom (${problem}); it is known by its coordinates, so a duplicate of it would be handled again. Said once per handler.`,
        );
      }
    }
  }

  /** The record's event as the handler gets it, or why not (a DecodeError, an EventValidationError...). Throws SchemaRegistryError. */
  async read(record: ReadableRecord): Promise<ReadOutcome> {
    const decoded = this.decode(record);
    if (!('value' in decoded)) return { ok: false, error: decoded.error, attempts: 1 };
    const { handler, options, heartbeat, topic, partition } = this.deps;
    for (let attempt = 1; ; attempt++) {
      try {
        return { ok: true, event: await handler.reader.validate(decoded.value.event) };
      } catch (err) {
        if (!(err instanceof RetriableValidationError) || attempt >= handler.retry.attempts) return { ok: false, error: err, attempts: attempt };
        const message = String(err.message).slice(0, 300);
        this.logger.warn(`${handler.name}: its validator could not decide on ${topic}[${partition}]@${record.offset} (message ${record.id.displayId}) (attempt ${attempt}/${handler.retry.attempts}): ${message}`);
        await pauseWithHeartbeats(retryDelay(handler.retry, attempt), options.consumer.heartbeatInterval, heartbeat);
      }
    }
  }

  /** The registry's writer schema of the record's value, once it was decoded (`ctx.message.schema`). */
  schemaOf(record: ReadableRecord): RecordSchema | undefined {
    const decoded = this.decoded.get(record.offset);
    return decoded && 'value' in decoded ? decoded.value.schema : undefined;
  }

  private decode(record: ReadableRecord): { value: DecodedValue } | { error: unknown } {
    let decoded = this.decoded.get(record.offset);
    if (decoded) return decoded;
    try {
      decoded = { value: this.deps.handler.reader.decode(record.message.value) };
    } catch (err) {
      // A writer schema the Schema Registry did not give: the infrastructure's fault, the unit is retried.
      if (err instanceof SchemaRegistryError) throw err;
      decoded = { error: err };
    }
    this.decoded.set(record.offset, decoded);
    return decoded;
  }
}
