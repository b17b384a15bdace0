import type { Logger } from '@nestjs/common';
import { sleep } from '../engine/sleep';
import { SchemaRegistryError } from '../errors/schema-registry.error';
import type { EventFormat } from '../interfaces/format-options.interface';
import { assertPeersInstalled, type PeerNeed } from '../optional-peers';
import type { ResolvedOptions } from '../options/resolved-options';
import { avroWriterOf, notAvroReason } from './avro/avro.reader';
import type { LoadedSchema, SchemaRegistry } from './avro/schema-registry';
import type { FormatRegistry } from './writer-codecs';

/** A handler's topic and how it reads it (HandlerDefinition's, without the engine's types). */
export interface RegistryReader {
  name: string;
  /** As consumed (with topicPrefix). */
  topic: string;
  format: EventFormat;
  /** The Avro reader schema (format `avro`). */
  schema?: LoadedSchema;
  /** Whether the handler reads values in the registry's framing (false: a topic of plain JSON only). */
  readsRegistry: boolean;
}

/**
 * Whether values written to `topic` (a name of the module's `topics`, without prefix) use the registry's framing:
 * Protobuf always; JSON and Avro with `wireFormat: 'schema-registry'` (the topic's, else the module's), unless the
 * topic is declared plain JSON only (`registryFraming: false`).
 */
export function writesToRegistry(options: Pick<ResolvedOptions, 'topics' | 'wireFormat'>, topic: string): boolean {
  const declared = options.topics[topic];
  if (declared?.format === 'protobuf') return true;
  if (declared?.registryFraming === false) return false;
  return (declared?.wireFormat ?? options.wireFormat) === 'schema-registry';
}

/**
 * The optional peers the declared formats are sure to need: protobufjs for every handler and declared topic of
 * format `protobuf`, ajv for every topic written as JSON Schema. A `json` handler of a registry may meet Protobuf
 * or JSON Schema writers too, but only its records say so: checkReaders looks at its subject's latest schema at boot;
 * at run time such a record waits a while only when the topic's subject holds its schema, else it is dead-lettered
 * (RegistrySchemas.missingPeerFailure).
 */
export function formatPeersNeeded(options: Pick<ResolvedOptions, 'topics' | 'wireFormat'>, handlers: ReadonlyArray<{ name: string; format: EventFormat }>): PeerNeed[] {
  const needs: PeerNeed[] = handlers.filter((h) => h.format === 'protobuf').map((h) => ({ peer: 'protobufjs', neededBy: `${h.name} reads format protobuf` }));
  for (const [topic, declared] of Object.entries(options.topics)) {
    if (declared.format === 'protobuf') needs.push({ peer: 'protobufjs', neededBy: `topics["${topic}"] is format protobuf` });
    else if (declared.format === 'json' && writesToRegistry(options, topic)) needs.push({ peer: 'ajv', neededBy: `topics["${topic}"] is written as JSON Schema (format json in the registry's framing)` });
  }
  return needs;
}

/**
 * At boot, with a Schema Registry: first, that `schemaRegistry.url` is a registry's API (a server that answers as
 * something else fails the boot: SchemaRegistryError `not-a-registry`); then each Avro handler (any topic may carry
 * the registry's framing) has its reader schema checked against the latest writer schema of its topic's subject: a
 * reader that cannot read it fails the boot (SchemaRegistryError `incompatible`, naming both). A `json` or `protobuf`
 * handler's subject (under the `topic` strategy, where a topic names it) has its latest schema looked up too: a
 * JSON Schema or Protobuf one whose package (ajv, protobufjs) is not installed fails the boot (MissingPeerError).
 * A registry that does not answer is warned about; the checks are not made then (the records show any mismatch as
 * decode failures, and wait `missingPeerWaitMs` for a missing package their topic's subject declares).
 */
export async function checkReaders(remote: FormatRegistry, readers: RegistryReader[], logger: Logger): Promise<void> {
  try {
    await remote.probe();
  } catch (err) {
    if ((err as SchemaRegistryError).failure !== 'unavailable') throw err;
    logger.warn(`Schema Registry: ${(err as Error).message}; its schemas are fetched when it answers`);
    return;
  }
  await checkFormatReaders(remote, readers.filter((r) => r.format !== 'avro' && r.readsRegistry), logger);
  for (const reader of readers) {
    if (!reader.schema) continue;
    const schema = reader.schema;
    const subject = remote.subjectOf(reader.topic, schema.name);
    let latest: Awaited<ReturnType<FormatRegistry['latest']>>;
    try {
      latest = await remote.latest(subject);
    } catch (err) {
      logger.warn(`${reader.name}: could not check its schema ${schema.name} against subject ${subject} of the Schema Registry: ${(err as Error).message}`);
      continue;
    }
    if (!latest) {
      logger.log(`${reader.name}: subject ${subject} has no schema in the Schema Registry; records of ${reader.topic} in the registry's framing are read with ${schema.name} (${schema.file}) from their writer schemas as they come`);
      continue;
    }
    const found = latest.writer;
    const writer = found === 'unknown' || 'unreadable' in found ? undefined : avroWriterOf(found);
    if (!writer) {
      const why = found === 'unknown' ? 'the registry does not give it' : 'unreadable' in found ? found.unreadable : notAvroReason(found);
      throw new SchemaRegistryError('incompatible', `${reader.name}: the latest schema of subject ${subject} (id ${latest.id}) is not an Avro schema it can read: ${why}`, subject);
    }
    try {
      schema.type.createResolver(writer.type);
    } catch (err) {
      throw new SchemaRegistryError(
        'incompatible',
        `${reader.name} reads ${reader.topic} with ${schema.name} (${schema.file}), which cannot read the latest writer schema of subject ${subject} (id ${latest.id}: ${truncate(JSON.stringify(writer.type.schema()))}): ${(err as Error).message}. Deploy a reader schema that can (Avro resolution: added fields need defaults), or fix the subject`,
        subject,
        { cause: err },
      );
    }
  }
}

/**
 * The latest schema of each `json` or `protobuf` reader's subject, when the subject name strategy is `topic` (the
 * others name a record, which such a handler does not): a JSON Schema or Protobuf writer whose package is not
 * installed fails the boot, every one in one MissingPeerError. A subject that cannot be looked up is warned about.
 */
async function checkFormatReaders(remote: FormatRegistry, readers: RegistryReader[], logger: Logger): Promise<void> {
  if (readers.length === 0 || !remote.subjectNamedByTopic) return;
  const needs: PeerNeed[] = [];
  for (const reader of readers) {
    const subject = remote.subjectOf(reader.topic, '');
    try {
      const latest = await remote.latest(subject);
      const writer = latest?.writer;
      if (writer && writer !== 'unknown' && 'missingPeer' in writer) {
        needs.push({ peer: writer.missingPeer, neededBy: `${reader.name} reads ${reader.topic}, whose subject ${subject} has ${writer.kind} as its latest schema (id ${latest!.id})` });
      }
    } catch (err) {
      logger.warn(`${reader.name}: could not look up the latest schema of subject ${subject} of the Schema Registry: ${(err as Error).message}`);
    }
  }
  assertPeersInstalled(needs);
}

/**
 * Looks up the ids the module writes with (the declared topics in the registry's framing) until each is known,
 * in the background, so that writes find them cached; a write that comes first waits for the lookup (see
 * RegistrySchemas.idSoon). A declared topic that a handler of the module also reads (`read`, as consumed) is looked
 * up the same way, without registering (the module may only read it, whatever `autoRegister` says): when its subject
 * does not have the schema, that is logged once and left to the topic's first write (which registers it with
 * `autoRegister`, and fails as any write without an id does otherwise), without the warning and the repeated lookups
 * of a topic only written. Resolves when every id is known, or left to its writes, or `running()` turns false.
 */
export async function warmUpIds(remote: FormatRegistry, registry: SchemaRegistry, options: Pick<ResolvedOptions, 'topics' | 'wireFormat' | 'topicPrefix'>, logger: Logger, running: () => boolean, read: ReadonlySet<string> = new Set()): Promise<void> {
  // Avro: the id of the local schema under the subject. JSON Schema and Protobuf: the subject's latest schema.
  const wanted = Object.entries(options.topics)
    .filter(([topic]) => writesToRegistry(options, topic))
    .map(([topic, declared]) => {
      const written = `${options.topicPrefix}${topic}`;
      const alsoRead = read.has(written);
      if ((declared.format ?? 'avro') !== 'avro') {
        const subject = remote.subjectOf(written, declared.schema ?? '');
        return { subject, alsoRead, what: `the latest ${declared.format === 'json' ? 'JSON Schema' : 'Protobuf'} schema`, lookUp: () => remote.latestFor(subject).then((latest) => latest.id) };
      }
      const schema = registry.current(declared.schema!);
      const subject = remote.subjectOf(written, schema.name);
      const lookUp = alsoRead
        ? () =>
            remote.findId(subject, schema).then((id) => {
              if (id === undefined) throw new SchemaRegistryError('no-id', `subject ${subject} has no version of ${schema.name} as this application writes it (${schema.file})`, subject);
              return id;
            })
        : () => remote.idFor(subject, schema);
      return { subject, alsoRead, what: schema.name, lookUp };
    });
  const warned = new Set<string>();
  for (let round = 0; wanted.length > 0 && running(); round++) {
    for (const entry of [...wanted]) {
      try {
        const id = await entry.lookUp();
        wanted.splice(wanted.indexOf(entry), 1);
        logger.log(`Schema Registry: ${entry.what} is id ${id} under subject ${entry.subject}`);
      } catch (err) {
        const message = (err as Error).message;
        if (entry.alsoRead && (err as SchemaRegistryError).failure === 'no-id') {
          wanted.splice(wanted.indexOf(entry), 1);
          logger.log(`Schema Registry: ${message}; its topic is one this application's handlers read: looked up again when the application first writes to it`);
          continue;
        }
        if (!warned.has(message)) logger.warn(`Schema Registry: ${message}; writes of ${entry.what} under ${entry.subject} fail while this lasts (looked up again every few seconds, and by each write)`);
        warned.add(message);
      }
    }
    const until = Date.now() + Math.min(30000, 1000 * 2 ** Math.min(round, 5));
    while (wanted.length > 0 && running() && Date.now() < until) await sleep(200);
  }
}

function truncate(text: string): string {
  return text.length > 400 ? `${text.slice(0, 400)}…` : text;
}
