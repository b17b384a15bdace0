import type * as avro from 'avsc';
import { Agent } from 'https';
import { withDeadline } from '../engine/deadline';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { SchemaRegistryError } from '../errors/schema-registry.error';
import type { ResolvedOptions } from '../options/resolved-options';
import { BigIntLongType } from './long-type';
import type { LoadedSchema } from './schema-registry';

type RegistryOptions = NonNullable<ResolvedOptions['schemaRegistry']>;

/** What the library uses of `@kafkajs/confluent-schema-registry`'s client. */
interface RegistryClient {
  getSchema(id: number): Promise<unknown>;
  getRegistryIdBySchema(subject: string, schema: { type: 'AVRO'; schema: string }): Promise<number>;
  register(schema: { type: 'AVRO'; schema: string }, options: { subject: string }): Promise<{ id: number }>;
  getLatestSchemaId(subject: string): Promise<number>;
}

/** A writer schema by id: its Avro type, or `unknown` when the registry says no schema has the id. */
type Writer = { type: avro.Type } | 'unknown' | { notAvro: string };

/**
 * The Schema Registry as the library reads and writes it, through `@kafkajs/confluent-schema-registry` (HTTP,
 * basic and bearer authentication, TLS, retries): writer schemas by id and ids by subject and schema, each
 * cached for the life of the process (a schema id is never reused for another schema), so that records and
 * publishes whose schemas are cached go on while the registry is away.
 *
 * Reading is in two steps: `prefetch` (asynchronous, before a unit of work: the writer schemas of its records
 * that are not cached yet) and `writer` (synchronous, while decoding). Writing too: `idFor` (asynchronous, at
 * boot for the declared topics, and again whenever an id is missing) and `cachedId` (synchronous, while encoding).
 */
export class RegistrySchemas {
  private readonly client: RegistryClient;
  private readonly writers = new Map<number, Writer>();
  private readonly ids = new Map<string, number>();
  private readonly lookups = new Map<string, Promise<number>>();
  /** Why the last lookup of an id failed, by subject and schema, until one succeeds. */
  private readonly failures = new Map<string, SchemaRegistryError>();

  constructor(
    private readonly options: RegistryOptions,
    longs: 'bigint' | 'number',
    client?: RegistryClient,
  ) {
    this.client = client ?? createClient(options, longs);
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

  /** The writer schema of an id, if it was fetched (undefined: not fetched yet, see prefetch). */
  writer(id: number): Writer | undefined {
    return this.writers.get(id);
  }

  /**
   * Fetches the writer schemas of these values' ids that are not cached yet: a value framed for a registry
   * (byte 0, a 4-byte id) whose id the registry does not know is remembered as unknown (its decoding fails); a
   * registry that does not answer throws SchemaRegistryError (`unavailable`), an infrastructure fault.
   */
  async prefetch(values: ReadonlyArray<Buffer | null | undefined>): Promise<void> {
    const missing = new Set<number>();
    for (const value of values) {
      const id = registryIdOf(value);
      if (id !== undefined && !this.writers.has(id)) missing.add(id);
    }
    for (const id of missing) await this.fetchWriter(id);
  }

  private async fetchWriter(id: number): Promise<void> {
    try {
      const schema = await this.call(`the schema of id ${id}`, () => this.client.getSchema(id));
      this.writers.set(id, isAvroType(schema) ? { type: schema } : { notAvro: 'the registry holds a schema of another type (JSON or Protobuf) under this id' });
    } catch (err) {
      if (statusOf(err) === 404) {
        this.writers.set(id, 'unknown');
        return;
      }
      throw err;
    }
  }

  /** The id of `schema` under `subject`, if known (see idFor). */
  cachedId(subject: string, schema: LoadedSchema): number | undefined {
    return this.ids.get(idKey(subject, schema));
  }

  /**
   * The id to write `schema` with under `subject`, now: the cached one, or SchemaRegistryError saying why there
   * is none yet (the last lookup's failure: `no-id` or `unavailable`), a lookup started meanwhile, so that a
   * later write finds it once the registry answers.
   */
  idNow(subject: string, schema: LoadedSchema): number {
    const cached = this.cachedId(subject, schema);
    if (cached !== undefined) return cached;
    void this.idFor(subject, schema).catch(() => undefined);
    throw (
      this.failures.get(idKey(subject, schema)) ??
      new SchemaRegistryError('unavailable', `no id of ${schema.name} under subject ${subject} has come from the Schema Registry at ${this.options.url} yet (it is being looked up): try again shortly`, subject)
    );
  }

  /**
   * The id of `schema` under `subject`: looked up (and, with `autoRegister`, registered when the subject does not
   * have it), then cached. Throws SchemaRegistryError: `no-id` when the subject does not have it and registering
   * is off, `unavailable` when the registry does not answer.
   */
  idFor(subject: string, schema: LoadedSchema): Promise<number> {
    const key = idKey(subject, schema);
    const cached = this.ids.get(key);
    if (cached !== undefined) return Promise.resolve(cached);
    let lookup = this.lookups.get(key);
    if (!lookup) {
      lookup = this.lookUp(subject, schema).then(
        (id) => {
          this.failures.delete(key);
          return id;
        },
        (err: unknown) => {
          if (err instanceof SchemaRegistryError) this.failures.set(key, err);
          throw err;
        },
      );
      lookup.finally(() => this.lookups.delete(key)).catch(() => undefined);
      this.lookups.set(key, lookup);
    }
    return lookup;
  }

  private async lookUp(subject: string, schema: LoadedSchema): Promise<number> {
    const body = { type: 'AVRO' as const, schema: schema.text };
    let id: number;
    try {
      id = await this.call(`the id of ${schema.name} under subject ${subject}`, () => this.client.getRegistryIdBySchema(subject, body));
    } catch (err) {
      if (!(err instanceof SchemaRegistryError && err.failure === 'no-id')) throw err;
      if (!this.options.autoRegister) {
        throw new SchemaRegistryError(
          'no-id',
          `subject ${subject} of the Schema Registry at ${this.options.url} has no version of ${schema.name} as this application writes it (${schema.file}), and registering at run time is off: register it at deploy time (npx kafka-eo schemas register), or set schemaRegistry.autoRegister`,
          subject,
          { cause: err },
        );
      }
      id = (await this.call(`registering ${schema.name} under subject ${subject}`, () => this.client.register(body, { subject }))).id;
    }
    this.ids.set(idKey(subject, schema), id);
    this.writers.set(id, { type: schema.type });
    return id;
  }

  /** Registers `schema` under `subject` (the deploy-time step: `kafka-eo schemas register`); its id. */
  async register(subject: string, schema: LoadedSchema): Promise<number> {
    const { id } = await this.call(`registering ${schema.name} under subject ${subject}`, () => this.client.register({ type: 'AVRO', schema: schema.text }, { subject }));
    this.ids.set(idKey(subject, schema), id);
    return id;
  }

  /** The subject's latest schema, or undefined when the subject has none yet. */
  async latest(subject: string): Promise<{ id: number; writer: Writer } | undefined> {
    let id: number;
    try {
      id = await this.call(`the latest schema of subject ${subject}`, () => this.client.getLatestSchemaId(subject));
    } catch (err) {
      if (statusOf(err) === 404 || (err instanceof SchemaRegistryError && err.failure === 'no-id')) return undefined;
      throw err;
    }
    if (!this.writers.has(id)) await this.fetchWriter(id);
    return { id, writer: this.writers.get(id)! };
  }

  /** One request (its retries included) within `requestTimeoutMs`; a failure that is not an answer is `unavailable`. */
  private async call<T>(what: string, request: () => Promise<T>): Promise<T> {
    try {
      return await withDeadline(request(), this.options.requestTimeoutMs, `the Schema Registry (${what})`);
    } catch (err) {
      const status = statusOf(err);
      // The client turns a 404 of a lookup by schema into an error of its own without the status.
      if (status === 404 || (err as Error)?.name === 'ConfluentSchemaRegistryError') {
        throw new SchemaRegistryError('no-id', `the Schema Registry at ${this.options.url} has no ${what}`, undefined, { cause: err });
      }
      throw new SchemaRegistryError(
        'unavailable',
        `the Schema Registry at ${this.options.url} did not give ${what}: ${(err as Error)?.message ?? err}${status === 401 || status === 403 ? ' (check schemaRegistry.auth)' : ''}`,
        undefined,
        { cause: err },
      );
    }
  }
}

/** The schema id of a value in Confluent's framing (byte 0 then a 4-byte big-endian id), else undefined. */
export function registryIdOf(value: Buffer | null | undefined): number | undefined {
  if (!value || value.length < 5 || value[0] !== 0x00) return undefined;
  return value.readUInt32BE(1);
}

/** Confluent's framing of an Avro body written with schema `id`. */
export function frameForRegistry(id: number, body: Buffer): Buffer {
  const header = Buffer.allocUnsafe(5);
  header[0] = 0x00;
  header.writeUInt32BE(id, 1);
  return Buffer.concat([header, body]);
}

function idKey(subject: string, schema: LoadedSchema): string {
  return `${subject}\u0000${schema.fingerprint}`;
}

function isAvroType(schema: unknown): schema is avro.Type {
  return typeof (schema as avro.Type | undefined)?.fromBuffer === 'function' && typeof (schema as avro.Type).createResolver === 'function';
}

function statusOf(err: unknown): number | undefined {
  for (let e = err as { status?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.status === 'number' && e.status > 0) return e.status;
  }
  return undefined;
}

/** The client of the optional peer `@kafkajs/confluent-schema-registry`, with the library's Avro options. */
function createClient(options: RegistryOptions, longs: 'bigint' | 'number'): RegistryClient {
  let module: { SchemaRegistry: new (args: object, options?: object) => RegistryClient; SchemaType: { AVRO: string } };
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    module = require('@kafkajs/confluent-schema-registry');
  } catch (err) {
    throw new InvalidOptionsError(
      'schemaRegistry',
      `needs the package @kafkajs/confluent-schema-registry (npm install @kafkajs/confluent-schema-registry@^3.9.0, or ^4 on Node.js 22 and later): ${(err as Error).message}`,
    );
  }
  const auth = options.auth;
  const bearer = auth && 'bearerToken' in auth ? auth.bearerToken : undefined;
  const args = {
    host: options.url,
    clientId: 'kafka-exactly-once',
    retry: { retries: 2, maxRetryTimeInSecs: Math.max(1, Math.floor(options.requestTimeoutMs / 2000)) },
    ...(auth && 'username' in auth ? { auth: { username: auth.username, password: auth.password } } : {}),
    ...(options.tls && options.url.startsWith('https:') ? { agent: new Agent({ keepAlive: true, ...options.tls }) } : {}),
    ...(bearer !== undefined
      ? {
          middlewares: [
            () => ({
              async prepareRequest(next: () => Promise<{ enhance(change: object): unknown }>) {
                const request = await next();
                const token = typeof bearer === 'function' ? await bearer() : bearer;
                return request.enhance({ headers: { authorization: `Bearer ${token}` } });
              },
            }),
          ],
        }
      : {}),
  };
  return new module.SchemaRegistry(args, { [module.SchemaType.AVRO]: { wrapUnions: false, ...(longs === 'bigint' ? { registry: { long: BigIntLongType } } : {}) } });
}
