import { withDeadline } from '../engine/deadline';
import { DecodeError } from '../errors/decode.error';
import { SchemaRegistryError } from '../errors/schema-registry.error';
import { installLineOf, OPTIONAL_PEERS, type OptionalPeer } from '../optional-peers';
import { CachedLookups } from './cached-lookups';
import { registryIdOf } from './registry-framing';
import { errorCodeOf, httpTransport, type RegistryAnswer, type RegistryOptions, type RegistryTransport } from './registry-http';

/**
 * A schema as the registry gives it for an id: its `schemaType` (AVRO when the answer names none), its text, and the
 * schemas its text refers to, fetched by subject and version (each after those it refers to in turn), under the
 * name the text refers to it by (a `$ref`, an import path, a named type).
 */
export interface RegistrySchema {
  id: number;
  schemaType: string;
  text: string;
  references: ReadonlyArray<{ name: string; text: string }>;
}

/** A writer schema whose package (ajv, protobufjs) is not installed. */
export interface MissingPeerWriter {
  missingPeer: OptionalPeer;
  /** The registry's schemaType (JSON, PROTOBUF). */
  schemaType: string;
  /** What the schema is, in a sentence: `a JSON Schema`, `a Protobuf schema`. */
  kind: string;
  /**
   * The subjects the registry listed for the id when this process fetched it (`GET /schemas/ids/{id}/versions`):
   * whether a topic's own subject holds the schema (see RegistrySchemas.missingPeerFailure). Set by the registry.
   */
  subjects?: readonly string[];
}

/** What the formats make of a registry's schema: its codec, or why there is none here. */
export type BuiltWriter<C> = { codec: C } | { unreadable: string } | MissingPeerWriter;

/** A schema this process writes with (the application's own), as the registry looks up and registers it. */
export interface OwnSchema {
  /** Its full name, for messages. */
  name: string;
  /** Where it comes from (a file of the schemas directory), for messages. */
  file: string;
  /** Its text, as registered. */
  text: string;
  /** What tells it from the subject's other schemas (an Avro schema's fingerprint). */
  fingerprint: bigint;
}

/**
 * How the registry's schemas become codecs: given by the formats (formats/writer-codecs.ts), so that the registry
 * knows no format's details. `C` is a writer schema's codec; `S` a schema the process writes with.
 */
export interface WriterBuilder<C, S extends OwnSchema> {
  /** Whether the formats read schemas of this schemaType; another is kept as `{ unsupported }`, its references not fetched. */
  reads(schemaType: string): boolean;
  /** The codec of a schema the registry gave (the reasons it gives are the record's failure: they name the schema problem). */
  build(schema: RegistrySchema): BuiltWriter<C>;
  /** The codec of a schema the process writes with, kept for the id the registry gives it: its records then read without a lookup. */
  ownCodec(schema: S): C;
}

/**
 * A writer schema by id: its `codec` (built by the formats); `unknown` when the registry's last answer was that no
 * schema has the id (asked again by each prefetch); `unsupported` (the schemaType) when the id holds a kind of
 * schema the formats do not read; `unreadable` when the registry's schema cannot be built here (the reason names
 * the schema problem); `missingPeer` when the package that reads it (ajv, protobufjs) is not installed.
 */
export type Writer<C> = { codec: C } | 'unknown' | { unsupported: string } | { unreadable: string } | MissingPeerWriter;

/** A writer schema a record can be read with, or whose failure is the partition's wait (see readableWriter). */
export type ReadableWriter<C> = Exclude<Writer<C>, 'unknown' | { unreadable: string }>;

/** The id and writer of a subject's latest schema, as the writers of JSON Schema and Protobuf write with it. */
export interface LatestWriter<C> {
  id: number;
  writer: Exclude<Writer<C>, 'unknown'>;
}

/** What a writer schema whose package is missing is, in a sentence naming the package and its range. */
function missingPeerText(id: number, writer: MissingPeerWriter): string {
  return `schema id ${id} of the Schema Registry is ${writer.kind}, and ${writer.missingPeer} (${OPTIONAL_PEERS[writer.missingPeer]}, an optional peer dependency of kafka-exactly-once) is not installed`;
}

/**
 * A writer schema whose package is not installed, as the console shows it: SchemaRegistryError `missing-peer`
 * naming the package, its range and the install line (what a record of it does is RegistrySchemas.missingPeerFailure's).
 */
export function missingPeerFault(id: number, writer: MissingPeerWriter): SchemaRegistryError {
  return new SchemaRegistryError('missing-peer', `${missingPeerText(id, writer)}. Install it and restart the application: ${installLineOf(writer.missingPeer)}`);
}

/**
 * How long an id the registry once said it does not know stays remembered, after the last such answer, once its
 * records have waited their `unknownIdWaitMs`: a later record of it then waits no more than for a fresh answer. An id
 * not asked about for this long is forgotten, and a record naming it again waits the whole `unknownIdWaitMs`.
 */
export const UNKNOWN_ID_MEMORY_MS = 600_000;
/** Writer schemas kept (the oldest fetched is forgotten past it, and fetched again when a record needs it). */
export const MAX_WRITERS = 10_000;
/** Ids the registry said it does not know, kept at most (a flood of random ids cannot grow the cache past it). */
export const MAX_UNKNOWN_IDS = 10_000;
/**
 * A partition waits for ids the registry does not know at most `unknownIdWaitMs` in all per window of this many
 * times `unknownIdWaitMs`, counted from its first wait: past it, such a record is dead-lettered on a fresh answer.
 */
export const UNKNOWN_ID_WINDOW_FACTOR = 10;
/** Partitions whose waits for unknown ids are counted (the oldest counted is forgotten past it). */
const MAX_WAITERS = 10_000;
/** Rising ids kept to tell which unknown ids may still come (see RegistrySchemas.settledId). */
const MAX_RISING_IDS = 64;
/** Ids not cached yet that one unit of work may look up: a chunk ends before the record of one more. */
export const MAX_LOOKUPS_PER_UNIT = 16;
/** Lookups of one prefetch in flight at once. */
const LOOKUP_CONCURRENCY = 4;
/** Schema references followed for one schema, in all (a registry's references form a tree of named types). */
const MAX_REFERENCES = 100;

/**
 * The Schema Registry as the library reads and writes it, over its Confluent-compatible REST API (HTTP, basic and
 * bearer authentication, TLS): writer schemas by id and ids by subject and schema, cached (a schema id never
 * names another schema), so that records and publishes whose schemas are cached go on while the registry is away.
 *
 * It knows no format: each writer schema it fetches becomes a codec by the `builder` the formats give it (built on
 * its own, so any number of versions of any number of records are read side by side for the life of the process),
 * and a value's bytes are framing (registry-framing.ts) and a body it never reads. The registry's answers are told apart:
 * "no schema of this id" (`error_code` 40403) makes the id's records wait, asked again at each retry (a writer
 * registering it, a replica catching up), and is a decode failure of a record on a fresh answer once the wait is over
 * or not due (see `prefetch`); a 404 without a registry's error body (a wrong base URL, a proxy whose upstream is
 * away), a 5xx, a timeout or refused credentials is `unavailable`, an infrastructure fault that waits.
 *
 * Reading is in two steps: `prefetch` (asynchronous, before a unit of work: the writer schemas of its records
 * that are not cached yet, at most MAX_LOOKUPS_PER_UNIT ids: see `affordable`) and `writer` (synchronous, while
 * decoding). Writing: `idFor` (at boot, for the declared topics) and `idSoon` (while encoding: the cached id at
 * once, else the lookup under way, waited for at most `requestTimeoutMs`); for the formats whose schemas are the
 * registry's rather than the application's (JSON Schema, Protobuf), `latestFor` and `latestSoon` (a subject's latest
 * schema) in the same way.
 */
export class RegistrySchemas<C, S extends OwnSchema = OwnSchema> {
  private readonly http: RegistryTransport;
  private readonly writers = new Map<number, Exclude<Writer<C>, 'unknown'>>();
  /**
   * Ids the registry said it does not know: since when it says so (its records wait `unknownIdWaitMs` from then),
   * its last such answer, and why the last prefetch that asked did not wait for it (the dead letter's words). Never
   * taken as an answer: an unknown id is asked again by each prefetch.
   */
  private readonly unknownIds = new Map<number, { since: number; answeredAt: number; notWaited?: string }>();
  /** The ids the registry has given this process, each higher than the one before, with when it first gave each. */
  private readonly risingIds: Array<{ id: number; at: number }> = [];
  /** Each partition's waits for unknown ids in its current window (see mayWait), by the prefetch's `waiter`. */
  private readonly waits = new Map<string, { windowStart: number; spent: number; since?: number; lastAt: number }>();
  /** When a record first waited for a package this process does not have, by package (see missingPeerFailure). */
  private readonly missingPeerSince = new Map<OptionalPeer, number>();
  /** Writer lookups in flight, shared by the partitions that need the same id at the same moment. */
  private readonly fetching = new Map<number, Promise<void>>();
  /** The ids of the schemas this process writes, by subject and schema. */
  private readonly ids = new CachedLookups<number>();
  /** The latest schema of a subject to write with (JSON Schema, Protobuf), by subject, once looked up. */
  private readonly latestWriters = new CachedLookups<LatestWriter<C>>();

  constructor(
    private readonly options: RegistryOptions,
    private readonly builder: WriterBuilder<C, S>,
    transport?: RegistryTransport,
    private readonly now: () => number = Date.now,
  ) {
    this.http = transport ?? httpTransport(options);
  }

  /** The subject of a topic's values for a record type, by the configured strategy. */
  subjectOf(topic: string, recordName: string): string {
    switch (this.options.subjectNameStrategy) {
      case 'record':
        return recordName;
      case 'topic-record':
        return `${topic}-${recordName}`;
      default:
        return `${topic}-value`;
    }
  }

  /** Whether a topic names its subject (the `topic` strategy), so that a handler of any format has one. */
  get subjectNamedByTopic(): boolean {
    return this.options.subjectNameStrategy === 'topic';
  }

  /** The writer schema of an id, if it was fetched (undefined: not fetched yet, see prefetch). */
  writer(id: number): Writer<C> | undefined {
    return this.writers.get(id) ?? (this.unknownIds.has(id) ? 'unknown' : undefined);
  }

  /**
   * The writer schema of a record framed with schema `id`, as decoding needs it (after the unit's prefetch, which
   * made its records wait while they were to: see prefetch): SchemaRegistryError `unavailable` when it has not been
   * fetched; DecodeError when the registry said it has no schema of the id, or the schema cannot be built here (the
   * record's failure).
   */
  readableWriter(id: number): ReadableWriter<C> {
    const writer = this.writer(id);
    if (writer === undefined) throw new SchemaRegistryError('unavailable', `the writer schema of id ${id} has not come from the Schema Registry`);
    if (writer === 'unknown') {
      const why = this.unknownIds.get(id)?.notWaited ?? `asked again for ${this.options.unknownIdWaitMs} ms: schemaRegistry.unknownIdWaitMs`;
      throw new DecodeError(`value is framed for a Schema Registry with schema id ${id}, which the registry says does not exist (${why})`);
    }
    if ('unreadable' in writer) throw new DecodeError(`value is framed for a Schema Registry with schema id ${id}, and ${writer.unreadable}`);
    return writer;
  }

  /**
   * A record framed with `id`, whose writer schema's package is not installed, for a handler of `topic` (as consumed)
   * that would read it: a wait (SchemaRegistryError `missing-peer`, an infrastructure fault) only when the topic's own
   * subject holds that schema (the `topic` strategy's `<topic>-value`, the `topic-record` strategy's `<topic>-<name>`:
   * what the boot checks, and could not when the registry was away or the subject changed since), and only for
   * `missingPeerWaitMs` from the first record this process made wait for that package; else DecodeError, the record's
   * dead letter, naming the package and its install line. A record of any other subject (another team's, a hostile
   * one) never stops the partition for a package the application does not declare.
   */
  missingPeerFailure(id: number, writer: MissingPeerWriter, topic: string): SchemaRegistryError | DecodeError {
    const install = installLineOf(writer.missingPeer);
    const subject = writer.subjects?.find((s) => this.namesTopic(s, topic));
    if (subject === undefined) {
      return new DecodeError(
        `value is framed for a Schema Registry: ${missingPeerText(id, writer)}, and the subject of ${topic} does not hold that schema (not waited for: the registry lists it under ${listed(writer.subjects)}). If ${topic} is to carry such records, install it, restart the application and replay this dead letter: ${install}`,
      );
    }
    const now = this.now();
    const wait = this.options.missingPeerWaitMs;
    let since = this.missingPeerSince.get(writer.missingPeer);
    if (since === undefined) this.missingPeerSince.set(writer.missingPeer, (since = now));
    const waited = now - since;
    if (waited < wait) {
      return new SchemaRegistryError(
        'missing-peer',
        `${missingPeerText(id, writer)}, and ${topic}'s subject ${subject} holds it: its records wait up to ${wait} ms (schemaRegistry.missingPeerWaitMs, ${waited} ms so far), then are dead-lettered. Install it and restart the application: ${install}`,
        subject,
      );
    }
    return new DecodeError(`value is framed for a Schema Registry: ${missingPeerText(id, writer)} (the records of ${topic}'s subject ${subject} waited ${wait} ms for it: schemaRegistry.missingPeerWaitMs). Install it, restart the application and replay this dead letter: ${install}`);
  }

  /** Whether `subject` is one the naming strategy gives `topic`'s values (never under `record`: a record's name says no topic). */
  private namesTopic(subject: string, topic: string): boolean {
    switch (this.options.subjectNameStrategy) {
      case 'record':
        return false;
      case 'topic-record':
        return subject.startsWith(`${topic}-`) && subject.length > topic.length + 1;
      default:
        return subject === `${topic}-value`;
    }
  }

  /**
   * Whether the writer schema of `id` must be asked for: not cached, or the registry said it does not know it (a
   * "not found" is never believed for the next unit of work: the id may have been registered since, or a replica
   * may have caught up).
   */
  private needsFetch(id: number): boolean {
    return !this.writers.has(id);
  }

  /**
   * How many of these values, from the first, one unit of work may read: every value up to the one that would
   * make more than MAX_LOOKUPS_PER_UNIT ids to look up (at least one value). Bounds what a flood of ids the
   * registry does not know costs a unit.
   */
  affordable(values: ReadonlyArray<Buffer | null | undefined>): number {
    return this.missingIds(values, MAX_LOOKUPS_PER_UNIT).readable;
  }

  /**
   * The distinct ids of these values that must be asked for (see needsFetch), at most `limit` of them, and how many
   * values from the first need no other (at least one).
   */
  private missingIds(values: ReadonlyArray<Buffer | null | undefined>, limit = Infinity): { ids: Set<number>; readable: number } {
    const ids = new Set<number>();
    for (let i = 0; i < values.length; i++) {
      const id = registryIdOf(values[i]);
      if (id === undefined || ids.has(id) || !this.needsFetch(id)) continue;
      if (ids.size === limit) return { ids, readable: Math.max(1, i) };
      ids.add(id);
    }
    return { ids, readable: values.length };
  }

  /**
   * Fetches the writer schemas of these values' ids that are not cached yet (LOOKUP_CONCURRENCY at a time); a
   * registry that does not answer, or not as a registry, throws SchemaRegistryError (`unavailable`). An id the
   * registry says it does not know (asked again by every prefetch) throws SchemaRegistryError `unknown-id` while its
   * records are to wait for it: the unit of work is retried as for a registry away, and asks again. They wait only
   * while all of these hold (else their decoding fails: see readableWriter):
   * - `unknownIdWaitMs` has not passed since the registry first said so;
   * - the id is above every id the registry gave this process at least `unknownIdWaitMs` ago. A registry gives ids
   *   in increasing order (Confluent's, Apicurio's, Karapace's and Redpanda's do), so a registration race or a lagging
   *   replica concerns new ids only: an id below one it gave is not coming (a replica lagging that one by less than
   *   the wait has caught up);
   * - the partition (`waiter`: one key per partition; the unit of work's) has waited for unknown ids less than
   *   `unknownIdWaitMs` in all in its current window of UNKNOWN_ID_WINDOW_FACTOR times that. A flood of random ids
   *   then costs a partition that much delay at most, however many units of work it fills.
   */
  async prefetch(values: ReadonlyArray<Buffer | null | undefined>, waiter = ''): Promise<void> {
    const queue = [...this.missingIds(values).ids];
    const failures: unknown[] = [];
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        await this.fetchWriter(id).catch((err: unknown) => failures.push(err));
        if (failures.length > 0) return;
      }
    };
    await Promise.all(Array.from({ length: Math.min(LOOKUP_CONCURRENCY, queue.length) }, worker));
    if (failures.length > 0) throw failures[0];
    const now = this.now();
    const waiting = new Set<number>();
    for (const value of values) {
      const id = registryIdOf(value);
      if (id !== undefined && !waiting.has(id) && this.mayCome(id, now)) waiting.add(id);
    }
    const spent = this.mayWait(waiter, waiting.size > 0, now);
    if (waiting.size === 0) return;
    const wait = this.options.unknownIdWaitMs;
    if (spent === undefined) {
      const why = `not waited for: this partition already waited ${wait} ms for ids the registry does not know within ${UNKNOWN_ID_WINDOW_FACTOR * wait} ms (schemaRegistry.unknownIdWaitMs)`;
      for (const id of waiting) this.unknownIds.get(id)!.notWaited = why;
      return;
    }
    const [id] = waiting;
    const waited = now - this.unknownIds.get(id)!.since;
    throw new SchemaRegistryError(
      'unknown-id',
      `the Schema Registry at ${this.options.url} has no schema of id ${id} (yet)${waiting.size > 1 ? ` nor of ${waiting.size - 1} other id(s) of this unit of work` : ''}: records framed with it wait up to ${wait} ms (schemaRegistry.unknownIdWaitMs) for a writer to register it or a replica to catch up, the id asked again at each retry, then are dead-lettered (${waited} ms so far)`,
    );
  }

  /**
   * Whether the records of `id` are still to wait for it, if the registry says it does not know it (see prefetch);
   * when they are not, the id keeps why (its records' dead letters say it).
   */
  private mayCome(id: number, now: number): boolean {
    const unknown = this.unknownIds.get(id);
    if (!unknown || this.writers.has(id)) return false;
    const wait = this.options.unknownIdWaitMs;
    const settled = this.settledId(now);
    if (settled !== undefined && id < settled) {
      unknown.notWaited = `not waited for: the registry gave id ${settled} more than ${wait} ms ago, and gives ids in increasing order`;
      return false;
    }
    if (now - unknown.since >= wait) {
      unknown.notWaited = `asked again for ${wait} ms: schemaRegistry.unknownIdWaitMs`;
      return false;
    }
    return true;
  }

  /**
   * A partition's waits for unknown ids: records one more prefetch of it (`waiting`: whether its records would wait),
   * and gives the time it has waited in its current window, or undefined when that has reached `unknownIdWaitMs`
   * (its records then do not wait). A window starts at the partition's first wait after the last one ended; a gap
   * between two prefetches longer than the wait (the partition moved away meanwhile) ends the wait at the first.
   */
  private mayWait(waiter: string, waiting: boolean, now: number): number | undefined {
    const wait = this.options.unknownIdWaitMs;
    let waits = this.waits.get(waiter);
    if (waits?.since !== undefined && now - waits.lastAt > wait) {
      waits.spent += waits.lastAt - waits.since;
      waits.since = undefined;
    }
    if (!waiting) {
      if (waits?.since !== undefined) {
        waits.spent += now - waits.since;
        waits.since = undefined;
      }
      if (waits) waits.lastAt = now;
      return 0;
    }
    if (!waits || now - waits.windowStart >= UNKNOWN_ID_WINDOW_FACTOR * wait) {
      this.waits.delete(waiter);
      if (this.waits.size >= MAX_WAITERS) this.waits.delete(this.waits.keys().next().value!);
      this.waits.set(waiter, (waits = { windowStart: now, spent: 0, lastAt: now }));
    }
    const spent = waits.spent + (waits.since === undefined ? 0 : now - waits.since);
    waits.lastAt = now;
    if (spent >= wait) {
      if (waits.since !== undefined) waits.spent = spent;
      waits.since = undefined;
      return undefined;
    }
    waits.since ??= now;
    return spent;
  }

  /**
   * The highest id the registry gave this process at least `unknownIdWaitMs` ago (undefined: none yet): every id
   * below it that the registry does not know is not coming (see prefetch).
   */
  private settledId(now: number): number | undefined {
    const ids = this.risingIds;
    let i = ids.length - 1;
    while (i >= 0 && now - ids[i].at < this.options.unknownIdWaitMs) i--;
    if (i < 0) return undefined;
    // The ones below it are not needed any more.
    if (i > 0) ids.splice(0, i);
    return ids[0].id;
  }

  /** An id the registry gave (a writer schema fetched, an id looked up or registered): kept when it is the highest. */
  private gaveId(id: number): void {
    const ids = this.risingIds;
    if (ids.length > 0 && id <= ids[ids.length - 1].id) return;
    // Bounded: an id dropped from the middle only makes the settled id lower for a while (fewer ids not waited for).
    if (ids.length >= MAX_RISING_IDS) ids.splice(1, 1);
    ids.push({ id, at: this.now() });
  }

  private fetchWriter(id: number): Promise<void> {
    let pending = this.fetching.get(id);
    if (!pending) {
      pending = this.fetchWriterNow(id).finally(() => this.fetching.delete(id));
      this.fetching.set(id, pending);
    }
    return pending;
  }

  private async fetchWriterNow(id: number): Promise<void> {
    const what = `the schema of id ${id}`;
    const answer = await this.call(what, 'GET', `/schemas/ids/${id}`);
    if (answer.status === 404 && errorCodeOf(answer) === 40403) {
      this.noSuchId(id);
      return;
    }
    const found = this.expectOk(what, answer) as { schema?: unknown; schemaType?: unknown; references?: unknown };
    const writer = await this.buildWriter(id, found);
    if ('missingPeer' in writer) writer.subjects = await this.subjectsOf(id);
    this.unknownIds.delete(id);
    this.keepWriter(id, writer);
  }

  /**
   * The subjects the registry lists for schema `id` (`GET /schemas/ids/{id}/versions`); none when it answers 404
   * (the id gone since, or a registry without that endpoint: its records are then not waited for). A registry that
   * does not answer throws SchemaRegistryError `unavailable`.
   */
  private async subjectsOf(id: number): Promise<string[]> {
    const what = `the subjects of schema id ${id}`;
    const answer = await this.call(what, 'GET', `/schemas/ids/${id}/versions`);
    if (answer.status === 404) return [];
    const body = this.expectOk(what, answer);
    return Array.isArray(body) ? body.map((v: { subject?: unknown } | null) => v?.subject).filter((s): s is string => typeof s === 'string') : [];
  }

  /**
   * The registry says it has no schema of `id`. Its records wait from the first such answer: kept across answers
   * while they wait (however long a registry away made the retries), and for UNKNOWN_ID_MEMORY_MS after the last
   * answer once they have waited; an id asked about again after that waits anew.
   */
  private noSuchId(id: number): void {
    const now = this.now();
    const previous = this.unknownIds.get(id);
    const waiting = previous !== undefined && previous.answeredAt - previous.since < this.options.unknownIdWaitMs;
    const since = previous !== undefined && (waiting || now - previous.answeredAt < UNKNOWN_ID_MEMORY_MS) ? previous.since : now;
    this.unknownIds.delete(id);
    if (this.unknownIds.size >= MAX_UNKNOWN_IDS) this.unknownIds.delete(this.unknownIds.keys().next().value!);
    this.unknownIds.set(id, { since, answeredAt: now });
  }

  private keepWriter(id: number, writer: Exclude<Writer<C>, 'unknown'>): void {
    this.gaveId(id);
    if (!this.writers.has(id) && this.writers.size >= MAX_WRITERS) this.writers.delete(this.writers.keys().next().value!);
    this.writers.set(id, writer);
  }

  /**
   * The writer of a registry's schema: the codec the formats build from its schemaType, its text and its references
   * (fetched by subject and version, each with the name it is referred to by), or why there is none.
   */
  private async buildWriter(id: number, found: { schema?: unknown; schemaType?: unknown; references?: unknown }): Promise<Exclude<Writer<C>, 'unknown'>> {
    const schemaType = typeof found.schemaType === 'string' ? found.schemaType.toUpperCase() : 'AVRO';
    if (!this.builder.reads(schemaType)) return { unsupported: schemaType };
    let references: Array<{ name: string; text: string }>;
    try {
      references = await this.referencesOf(id, found.references);
    } catch (err) {
      if (err instanceof SchemaRegistryError) throw err;
      return { unreadable: `the registry's schema id ${id} cannot be read here: ${(err as Error).message}` };
    }
    if (typeof found.schema !== 'string') return { unreadable: `the registry's answer for schema id ${id} has no schema text` };
    return this.builder.build({ id, schemaType, text: found.schema, references });
  }

  /**
   * The schemas a registry's schema refers to, fetched by subject and version, each after those it refers to in
   * turn (every one once), with the name the referring schema gives it. A reference the registry does not have is
   * an Error (the schema is unreadable); a registry that does not answer, SchemaRegistryError.
   */
  private async referencesOf(id: number, references: unknown): Promise<Array<{ name: string; text: string }>> {
    const found: Array<{ name: string; text: string }> = [];
    const seen = new Set<string>();
    const collect = async (references: unknown, depth: number): Promise<void> => {
      if (!Array.isArray(references)) return;
      for (const reference of references as Array<{ name?: unknown; subject?: unknown; version?: unknown }>) {
        const key = `${String(reference?.subject)}\u0000${String(reference?.version)}`;
        if (seen.has(key)) continue;
        seen.add(key);
        if (seen.size > MAX_REFERENCES || depth > 10) throw new Error(`more than ${MAX_REFERENCES} schema references, or references deeper than 10`);
        if (typeof reference?.subject !== 'string' || (typeof reference.version !== 'number' && typeof reference.version !== 'string')) throw new Error(`a schema reference without subject and version: ${JSON.stringify(reference)}`);
        const what = `schema reference ${reference.subject} version ${reference.version} (of id ${id})`;
        const answer = await this.call(what, 'GET', `/subjects/${encodeURIComponent(reference.subject)}/versions/${encodeURIComponent(String(reference.version))}`);
        // The registry's own "no such subject or version": the schema names a reference the registry does not have.
        if (answer.status === 404 && errorCodeOf(answer) !== undefined) throw new Error(`${what}: ${messageOf(answer)}`);
        const referenced = this.expectOk(what, answer) as { schema?: unknown; references?: unknown };
        await collect(referenced.references, depth + 1);
        if (typeof referenced.schema !== 'string') throw new Error(`${what} has no schema text`);
        found.push({ name: typeof reference.name === 'string' ? reference.name : reference.subject, text: referenced.schema });
      }
    };
    await collect(references, 0);
    return found;
  }

  /** The id of `schema` under `subject`, if known (see idFor). */
  cachedId(subject: string, schema: S): number | undefined {
    return this.ids.values.get(idKey(subject, schema));
  }

  /**
   * The id to write `schema` with under `subject`: the cached one at once; else a promise of it, from the lookup
   * under way (the boot's, or another write's) or one started now (registering with `autoRegister`), waited for at
   * most `requestTimeoutMs`. The promise rejects as idFor does, or `unavailable` when no answer came in time.
   */
  idSoon(subject: string, schema: S): number | Promise<number> {
    return this.ids.soon(idKey(subject, schema), () => this.lookUp(subject, schema), this.options.requestTimeoutMs, () => this.late(`the id of ${schema.name} under subject ${subject}`, subject));
  }

  /**
   * The id of `schema` under `subject` if the subject has it (kept, as idFor keeps it), or undefined: never
   * registers, whatever `autoRegister` says (the boot's lookup for a topic the module may only read). Throws
   * SchemaRegistryError `unavailable` when the registry does not answer.
   */
  async findId(subject: string, schema: S): Promise<number | undefined> {
    const cached = this.cachedId(subject, schema);
    if (cached !== undefined) return cached;
    const id = await this.find(subject, schema);
    if (id !== undefined) {
      this.ids.values.set(idKey(subject, schema), id);
      this.keepWriter(id, { codec: this.builder.ownCodec(schema) });
    }
    return id;
  }

  /** A write's wait for the registry ran out: `unavailable`, naming what it waited for. */
  private late(what: string, subject: string): SchemaRegistryError {
    return new SchemaRegistryError('unavailable', `the Schema Registry at ${this.options.url} did not give ${what} within ${this.options.requestTimeoutMs} ms (schemaRegistry.requestTimeoutMs)`, subject);
  }

  /**
   * The id of `schema` under `subject`: looked up (and, with `autoRegister`, registered when the subject does not
   * have it), then cached. Throws SchemaRegistryError: `no-id` when the subject does not have it and registering
   * is off, `unavailable` when the registry does not answer.
   */
  idFor(subject: string, schema: S): Promise<number> {
    return this.ids.get(idKey(subject, schema), () => this.lookUp(subject, schema));
  }

  private async lookUp(subject: string, schema: S): Promise<number> {
    let id = await this.find(subject, schema);
    if (id === undefined) {
      if (!this.options.autoRegister) {
        throw new SchemaRegistryError(
          'no-id',
          `subject ${subject} of the Schema Registry at ${this.options.url} has no version of ${schema.name} as this application writes it (${schema.file}), and registering at run time is off: register it at deploy time (npx kafka-eo schemas register), or set schemaRegistry.autoRegister`,
          subject,
        );
      }
      id = await this.registerNow(subject, schema);
    }
    this.keepWriter(id, { codec: this.builder.ownCodec(schema) });
    return id;
  }

  /** The id of `schema` under `subject`, or undefined when the subject (or the schema under it) is not there. */
  private async find(subject: string, schema: S): Promise<number | undefined> {
    const what = `the id of ${schema.name} under subject ${subject}`;
    const answer = await this.call(what, 'POST', `/subjects/${encodeURIComponent(subject)}`, { schema: schema.text });
    // 40401: no such subject; 40403: the subject has no such schema.
    if (answer.status === 404 && (errorCodeOf(answer) === 40401 || errorCodeOf(answer) === 40403)) return undefined;
    return idIn(what, this.expectOk(what, answer), this.options.url);
  }

  /** Registers `schema` under `subject` (the deploy-time step: `kafka-eo schemas register`); its id. */
  async register(subject: string, schema: S): Promise<number> {
    const id = await this.registerNow(subject, schema);
    this.ids.values.set(idKey(subject, schema), id);
    return id;
  }

  private async registerNow(subject: string, schema: S): Promise<number> {
    const what = `registering ${schema.name} under subject ${subject}`;
    const answer = await this.call(what, 'POST', `/subjects/${encodeURIComponent(subject)}/versions`, { schema: schema.text });
    if (answer.status === 409 || answer.status === 422) {
      throw new SchemaRegistryError('incompatible', `the Schema Registry at ${this.options.url} refused ${what} (${answer.status}): ${messageOf(answer)}`, subject);
    }
    return idIn(what, this.expectOk(what, answer), this.options.url);
  }

  /** The subject's latest schema, or undefined when the subject has none yet. */
  async latest(subject: string): Promise<{ id: number; writer: Writer<C> } | undefined> {
    const what = `the latest schema of subject ${subject}`;
    const answer = await this.call(what, 'GET', `/subjects/${encodeURIComponent(subject)}/versions/latest`);
    if (answer.status === 404 && (errorCodeOf(answer) === 40401 || errorCodeOf(answer) === 40402)) return undefined;
    const id = idIn(what, this.expectOk(what, answer), this.options.url);
    if (this.needsFetch(id)) await this.fetchWriter(id);
    return { id, writer: this.writer(id)! };
  }

  /**
   * The id and writer to write `subject`'s records with (the writer side of JSON Schema and Protobuf: values are
   * written with whatever version the subject has registered last): the cached one at once; else a promise of it,
   * from the lookup under way or one started now, waited for at most `requestTimeoutMs`. The promise rejects as
   * latestFor does, or `unavailable` when no answer came in time.
   */
  latestSoon(subject: string): LatestWriter<C> | Promise<LatestWriter<C>> {
    return this.latestWriters.soon(subject, () => this.lookUpLatest(subject), this.options.requestTimeoutMs, () => this.late(`the latest schema of subject ${subject}`, subject));
  }

  /**
   * The id and writer of `subject`'s latest schema, looked up once and cached for the life of the process (a
   * version registered later is written after a restart, as the ids of Avro writes are). Throws SchemaRegistryError:
   * `no-id` when the subject has no schema (register it at deploy time), `unavailable` when the registry does not
   * answer or its latest schema's id does not resolve.
   */
  latestFor(subject: string): Promise<LatestWriter<C>> {
    return this.latestWriters.get(subject, () => this.lookUpLatest(subject));
  }

  private async lookUpLatest(subject: string): Promise<LatestWriter<C>> {
    const found = await this.latest(subject);
    if (!found) {
      throw new SchemaRegistryError('no-id', `subject ${subject} of the Schema Registry at ${this.options.url} has no schema to write with: register one at deploy time`, subject);
    }
    if (found.writer === 'unknown') {
      throw new SchemaRegistryError('unavailable', `the Schema Registry at ${this.options.url} names id ${found.id} as the latest schema of subject ${subject}, and says it has no schema of that id`, subject);
    }
    return { id: found.id, writer: found.writer };
  }

  /**
   * Whether `schemaRegistry.url` is a registry's API, asked once at boot: a server that answers, but not as a
   * registry (a 404 without a registry's error body, a page that is not JSON), is a wrong URL and throws
   * SchemaRegistryError `not-a-registry`; one that does not answer throws `unavailable` (the caller warns).
   */
  async probe(): Promise<void> {
    const what = 'its list of subjects';
    const answer = await this.call(what, 'GET', '/subjects');
    if (answer.status === 200 && Array.isArray(answer.body)) return;
    if (answer.status === 401 || answer.status === 403 || answer.status >= 500) this.expectOk(what, answer);
    throw new SchemaRegistryError(
      'not-a-registry',
      `schemaRegistry.url ${this.options.url} answers, but not as a Confluent-compatible Schema Registry (GET ${this.options.url}/subjects: ${answer.status} ${describeBody(answer)}). Give the base URL of the registry's Confluent-compatible API: Confluent's, Redpanda's and Karapace's are at the server's root (or a path your proxy adds); Apicurio's is under /apis/ccompat/v7`,
    );
  }

  /** One request within `requestTimeoutMs`; no answer at all is `unavailable`. */
  private async call(what: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<RegistryAnswer> {
    try {
      return await withDeadline(this.http.request(method, path, body), this.options.requestTimeoutMs, `the Schema Registry (${what})`);
    } catch (err) {
      throw new SchemaRegistryError('unavailable', `the Schema Registry at ${this.options.url} did not give ${what}: ${(err as Error)?.message ?? err}`, undefined, { cause: err });
    }
  }

  /** The body of a 2xx answer; any other is `unavailable`, saying what the answer was. */
  private expectOk(what: string, answer: RegistryAnswer): unknown {
    if (answer.status >= 200 && answer.status < 300 && answer.body !== null && typeof answer.body === 'object') return answer.body;
    const hint =
      answer.status === 401 || answer.status === 403
        ? ' (check schemaRegistry.auth)'
        : answer.status === 404 && errorCodeOf(answer) === undefined
          ? ` (a 404 that is not a registry's answer: check schemaRegistry.url, e.g. Apicurio's Confluent-compatible API is under /apis/ccompat/v7, or a proxy in front of the registry whose upstream is away)`
          : '';
    throw new SchemaRegistryError('unavailable', `the Schema Registry at ${this.options.url} did not give ${what}: ${answer.status} ${describeBody(answer)}${hint}`);
  }
}

function idKey(subject: string, schema: OwnSchema): string {
  return `${subject}\u0000${schema.fingerprint}`;
}

function idIn(what: string, body: unknown, url: string): number {
  const id = (body as { id?: unknown }).id;
  if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) {
    throw new SchemaRegistryError('unavailable', `the Schema Registry at ${url} gave ${what} without a schema id: ${describeBody({ status: 200, body })}`);
  }
  return id;
}

/** The subjects of a list, for a message: `subjects a-value, b-value`, or `no subject`. */
function listed(subjects: readonly string[] | undefined): string {
  if (!subjects || subjects.length === 0) return 'no subject';
  const shown = subjects.slice(0, 5).join(', ');
  return `subject${subjects.length > 1 ? 's' : ''} ${shown}${subjects.length > 5 ? ` and ${subjects.length - 5} more` : ''}`;
}

function messageOf(answer: RegistryAnswer): string {
  const message = (answer.body as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message.slice(0, 300) : describeBody(answer);
}

function describeBody(answer: RegistryAnswer): string {
  const text = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
  if (!text) return '(empty)';
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
