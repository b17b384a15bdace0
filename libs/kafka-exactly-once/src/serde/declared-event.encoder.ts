import { MissingKeyError } from '../errors/missing-key.error';
import { UndeclaredTopicError } from '../errors/undeclared-topic.error';
import type { ResolvedOptions } from '../options/resolved-options';
import type { SchemaRegistry } from './schema-registry';
import { encodeSingleObject } from './single-object.codec';

/** An event encoded for one of the module's declared topics. */
export interface EncodedEvent {
  /** The topic as written (with the module's topicPrefix). */
  topic: string;
  key: string;
  /** Avro single-object encoding with the topic's current schema. */
  value: Buffer;
  /** The schema's full name, the record's `event-type`. */
  eventType: string;
}

/**
 * Encodes an event for a topic of the module option `topics`, as both `EventPublisher.publish` and a handler's
 * `ctx.emit` write it: the topic must be declared (UndeclaredTopicError), the key given or derived by the
 * topic's key function (MissingKeyError), and the event valid for the topic's current schema
 * (EventValidationError, naming the fields). Nothing is written when it throws.
 */
export function encodeDeclaredEvent(options: Pick<ResolvedOptions, 'topics' | 'topicPrefix'>, registry: SchemaRegistry, topic: string, event: unknown, key: string | undefined): EncodedEvent {
  const declared = options.topics[topic];
  if (!declared) throw new UndeclaredTopicError(topic);
  const recordKey = key ?? declared.key?.(event);
  if (typeof recordKey !== 'string' || recordKey === '') throw new MissingKeyError(topic);
  const schema = registry.current(declared.schema);
  return { topic: `${options.topicPrefix}${topic}`, key: recordKey, value: encodeSingleObject(schema, event), eventType: schema.name };
}
