import * as avro from 'avsc';
import { existsSync, readdirSync, readFileSync, statSync } from 'fs';
import { isAbsolute, join, relative, resolve } from 'path';
import { SchemaLoadError } from '../../errors/schema-load.error';
import { UnknownSchemaError } from '../../errors/unknown-schema.error';
import { BigIntLongType } from './long-type';
import { rabinFingerprint64 } from './rabin-fingerprint';
import type { RegistrySchemas } from '../../registry/registry-schemas';
import type { WriterCodec } from '../format.codec';

type Resolver = ReturnType<avro.Type['createResolver']>;

/** Parsing Canonical Form of a type (avsc's getSchema() without options returns it; its typings omit it). */
export function canonicalForm(type: avro.Type): string {
  return JSON.stringify((type as unknown as { getSchema(): unknown }).getSchema());
}

/** One version of a schema, as loaded from one .avsc file. */
export interface LoadedSchema {
  /** Full name (namespace.name) of a named type; the canonical form for an unnamed one. */
  name: string;
  type: avro.Type;
  /** CRC-64-AVRO of the Parsing Canonical Form. */
  fingerprint: bigint;
  /** The file the schema came from, relative to the schemas directory. */
  file: string;
  /** The schema as written in its file (docs and defaults kept), as compact JSON: what a Schema Registry is given. */
  text: string;
}

export interface SchemaRegistryOptions {
  /** `bigint` (default): Avro longs decode to bigint. `number`: to JS numbers (unsafe past 2^53). */
  longs?: 'bigint' | 'number';
}

/** Sorts `a.v2.avsc` before `a.v10.avsc`. */
const naturalOrder = new Intl.Collator('en', { numeric: true }).compare;

/**
 * The Avro schemas of a directory (.avsc files, searched recursively). Several files may hold versions of the
 * same record: they are ordered by file name (natural order), and the last one is the current version, which
 * handlers read with and publishers write with. Every version is known by its fingerprint, so records written
 * with an older or newer version are resolved to the reader's version by Avro's resolution rules.
 */
export class SchemaRegistry {
  /**
   * The Schema Registry, when the module has `schemaRegistry`: writer schemas of values in Confluent's framing,
   * and the ids of the schemas written in it (see RegistrySchemas).
   */
  remote?: RegistrySchemas<WriterCodec, LoadedSchema>;
  private readonly byFingerprint = new Map<bigint, LoadedSchema>();
  private readonly versions = new Map<string, LoadedSchema[]>();
  private readonly resolvers = new Map<string, Resolver>();
  /**
   * The resolvers of the registry's writer schemas, by writer type then reader: held only as long as the writer is
   * (RegistrySchemas keeps at most MAX_WRITERS of them), so that a writer it forgets is not kept alive here.
   */
  private readonly registryResolvers = new WeakMap<avro.Type, Map<bigint, Resolver>>();

  static fromDirectory(directory: string, options: SchemaRegistryOptions = {}): SchemaRegistry {
    const root = resolve(directory);
    if (!existsSync(root) || !statSync(root).isDirectory()) {
      const relativeHint = isAbsolute(directory)
        ? ''
        : `: "${directory}" is relative, resolved from the working directory ${process.cwd()}; give an absolute path, e.g. join(__dirname, '..', 'schemas')`;
      throw new SchemaLoadError(root, `the schemas directory does not exist (option schemas.directory)${relativeHint}`);
    }
    const files = listAvsc(root).sort((a, b) => naturalOrder(relative(root, a), relative(root, b)));
    const registry = new SchemaRegistry();
    for (const file of files) {
      registry.add(readFileSync(file, 'utf8'), relative(root, file), options);
    }
    return registry;
  }

  static fromSchemas(schemas: Array<{ schema: object | string; file?: string }>, options: SchemaRegistryOptions = {}): SchemaRegistry {
    const registry = new SchemaRegistry();
    schemas.forEach(({ schema, file }, i) =>
      registry.add(typeof schema === 'string' ? schema : JSON.stringify(schema), file ?? `schema-${i}`, options),
    );
    return registry;
  }

  private add(text: string, file: string, options: SchemaRegistryOptions): void {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new SchemaLoadError(file, `is not valid JSON (${(err as Error).message})`, { cause: err });
    }
    let type: avro.Type;
    try {
      type = avro.Type.forSchema(json as avro.Schema, {
        registry: options.longs === 'number' ? {} : { long: BigIntLongType },
        wrapUnions: false,
      } as avro.ForSchemaOptions);
    } catch (err) {
      throw new SchemaLoadError(file, `is not a valid Avro schema (${(err as Error).message})`, { cause: err });
    }
    const canonical = canonicalForm(type);
    const fingerprint = rabinFingerprint64(Buffer.from(canonical, 'utf8'));
    const name = type.name ?? canonical;
    const existing = this.byFingerprint.get(fingerprint);
    if (existing) {
      if (existing.name !== name) throw new SchemaLoadError(file, `has the same fingerprint as ${existing.file}`);
      return; // the same schema twice (e.g. docs differ): one entry is enough
    }
    const loaded: LoadedSchema = { name, type, fingerprint, file, text: JSON.stringify(json) };
    this.byFingerprint.set(fingerprint, loaded);
    this.versions.set(name, [...(this.versions.get(name) ?? []), loaded]);
  }

  /** The current (last) version of a schema. */
  current(name: string): LoadedSchema {
    const versions = this.versions.get(name);
    if (!versions) throw new UnknownSchemaError(name, this.names());
    return versions[versions.length - 1];
  }

  has(name: string): boolean {
    return this.versions.has(name);
  }

  byFingerprintOf(fingerprint: bigint): LoadedSchema | undefined {
    return this.byFingerprint.get(fingerprint);
  }

  names(): string[] {
    return [...this.versions.keys()].sort();
  }

  /**
   * The resolver that reads data written with the registry's writer schema `writer` as `reader` (cached with the
   * writer; throws when the reader cannot read the writer: a DecodeError for the record).
   */
  resolverFor(reader: LoadedSchema, writer: avro.Type): Resolver {
    let byReader = this.registryResolvers.get(writer);
    if (!byReader) {
      byReader = new Map();
      this.registryResolvers.set(writer, byReader);
    }
    let resolver = byReader.get(reader.fingerprint);
    if (!resolver) {
      resolver = reader.type.createResolver(writer);
      byReader.set(reader.fingerprint, resolver);
    }
    return resolver;
  }

  /** The resolver that reads data written with `writer` as `reader` (cached). */
  resolver(reader: LoadedSchema, writer: LoadedSchema): Resolver {
    const key = `${reader.fingerprint}:${writer.fingerprint}`;
    let resolver = this.resolvers.get(key);
    if (!resolver) {
      resolver = reader.type.createResolver(writer.type);
      this.resolvers.set(key, resolver);
    }
    return resolver;
  }
}

function listAvsc(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return listAvsc(path);
    return entry.isFile() && entry.name.endsWith('.avsc') ? [path] : [];
  });
}
