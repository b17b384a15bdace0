import * as avro from 'avsc';
import type { FieldError } from '../../errors/event-validation.error';
import type { BuiltWriter, RegistrySchema } from '../../registry/registry-schemas';
import type { AvroCodec } from '../format.codec';
import { BigIntLongType } from './long-type';

/** Lists every field of `value` that does not match `type`, with its path. Empty when valid. */
export function avroProblems(type: avro.Type, value: unknown): FieldError[] {
  const errors: FieldError[] = [];
  type.isValid(value, {
    errorHook: (path: string[], actual: unknown, type: { toString(): string; typeName?: string }) => {
      errors.push({ path: path.join('.'), problem: describeProblem(actual, type) });
    },
  });
  return errors;
}

function describeProblem(actual: unknown, type: { toString(): string; typeName?: string }): string {
  const expected = type.typeName === 'enum' ? `one of ${JSON.stringify((type as unknown as { symbols: string[] }).symbols)}` : `a ${type.toString()}`;
  if (actual === undefined) return `is missing (expected ${expected})`;
  const shown = typeof actual === 'bigint' ? `${actual}n` : JSON.stringify(actual);
  return `expected ${expected}, got ${shown === undefined ? typeof actual : shown}`;
}

/** One codec per type, as long as the type lives (a schema of the directory, a writer the registry keeps). */
const codecs = new WeakMap<avro.Type, AvroCodec>();

/**
 * The codec of an Avro type: a body decodes as the type itself (the writer's own representation; a reader of another
 * version resolves it with avro.reader.ts instead), an event is checked field by field, and encoded by avsc.
 */
export function avroCodec(type: avro.Type): AvroCodec {
  let codec = codecs.get(type);
  if (!codec) {
    codec = {
      format: 'avro',
      schemaType: 'AVRO',
      type,
      describe: type.name ?? 'an unnamed Avro schema',
      validatesDecoded: false,
      decode: (body) => ({ value: type.fromBuffer(body), name: type.name }),
      validate: (value) => avroProblems(type, value),
      encode: (value) => type.toBuffer(value),
    };
    codecs.set(type, codec);
  }
  return codec;
}

/**
 * The codec of a registry's Avro schema: its type built in a type registry of its own, after the types it refers to;
 * unions read as plain values when Avro allows, else as Avro's wrapped branches (a writer's `["int","double"]`: the
 * reader's own representation is what a handler gets either way).
 */
export function avroWriter(schema: RegistrySchema, longs: 'bigint' | 'number'): BuiltWriter<AvroCodec> {
  const texts = [...schema.references.map((r) => r.text), schema.text];
  let parsed: unknown[];
  try {
    parsed = texts.map((text) => JSON.parse(text));
  } catch (err) {
    return { unreadable: `the registry's schema id ${schema.id} is not valid JSON: ${(err as Error).message}` };
  }
  let firstError: Error | undefined;
  for (const wrapUnions of [false, true]) {
    try {
      const registry: Record<string, unknown> = longs === 'bigint' ? { long: BigIntLongType } : {};
      let built: avro.Type | undefined;
      for (const one of parsed) built = avro.Type.forSchema(one as avro.Schema, { registry, wrapUnions } as avro.ForSchemaOptions);
      return { codec: avroCodec(built!) };
    } catch (err) {
      firstError ??= err as Error;
    }
  }
  return { unreadable: `the registry's schema id ${schema.id} is not an Avro schema this library can build: ${firstError?.message}` };
}
