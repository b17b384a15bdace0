import type { FieldError } from '../../errors/event-validation.error';
import type { ErrorObject, Options as AjvOptions, ValidateFunction } from 'ajv';
import { DecodeError } from '../../errors/decode.error';
import type { BuiltWriter, RegistrySchema } from '../../registry/registry-schemas';
import type { JsonSchemaCodec } from '../format.codec';
import { encodeJsonValue, parseJsonValue } from '../json/json.codec';
import { uniqueItemsKeyword } from './unique-items.keyword';

/** Problems reported for one value at most (validation stops at the first, but a failed anyOf or oneOf lists its branches'). */
export const MAX_PROBLEMS = 50;
/** How deep a schema is walked for its references ($ref inside $ref inside ...), beyond what any real schema nests. */
const MAX_SCHEMA_DEPTH = 200;

/** A schema the main one refers to, as the registry answer's references give it: the name its `$ref`s use and its text. */
export interface JsonSchemaReference {
  name: string;
  schema: string;
}

/** A JSON Schema writer schema of the registry, compiled. */
export interface JsonSchemaValidator {
  id: number;
  /**
   * What is wrong with `value` (a parsed JSON value) under the schema, as `<path>: <problem>` (`$.amount: must be
   * integer`, `$.lines[2].sku: must be string`, `$: must have required property 'orderId'`); empty when valid.
   * Validation stops at the first problem (with a failed anyOf or oneOf, after its branches' first ones), so a
   * value's cost is bounded by its size, not by the number of its problems.
   */
  validate(value: unknown): string[];
}

type AjvInstance = {
  addSchema(schema: object, key?: string): unknown;
  addKeyword(definition: object): unknown;
  removeKeyword(keyword: string): unknown;
  addMetaSchema(schema: object): unknown;
  compile(schema: object): ValidateFunction;
};
type AjvClass = new (options: AjvOptions) => AjvInstance;

/**
 * The validator of a registry's JSON Schema: `text` compiled by ajv 8 (unknown keywords and formats are ignored, as
 * the registry's own validators do), as draft-07 unless its `$schema` names draft-06, 2019-09 or 2020-12;
 * each reference added under its name (and under the name resolved against the schema's `$id`, where the `$ref`s
 * resolve it). `{ unreadable }` with the reason when the schema does not compile, or a `$ref` points at a URL no
 * reference provides (never fetched); `{ missingPeer }` when ajv 8 is not installed (not the schema's fault: its
 * records wait for the package).
 */
export function buildJsonSchemaValidator(id: number, text: string, references: readonly JsonSchemaReference[] = []): { jsonSchema: JsonSchemaValidator } | { unreadable: string } | { missingPeer: 'ajv' } {
  let schema: unknown;
  const parsed: Array<{ name: string; schema: object }> = [];
  try {
    schema = JSON.parse(text);
    for (const reference of references) parsed.push({ name: reference.name, schema: JSON.parse(reference.schema) as object });
  } catch (err) {
    return { unreadable: `JSON Schema id ${id} (or one of its references) is not JSON: ${(err as Error).message}` };
  }
  // A boolean is a whole schema too (true: anything; false: nothing).
  if (typeof schema === 'boolean') schema = schema ? {} : { not: {} };
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return { unreadable: `JSON Schema id ${id} is not a schema (an object or a boolean)` };
  const Ajv = loadAjv(draftOf(schema));
  if (Ajv === 'missing') return { missingPeer: 'ajv' };
  if (typeof Ajv === 'string') return { unreadable: Ajv };
  const baseId = typeof (schema as { $id?: unknown }).$id === 'string' ? (schema as { $id: string }).$id : undefined;
  const remote = remoteRef([schema, ...parsed.map((p) => p.schema)], new Set(parsed.flatMap((p) => keysOf(p.name, baseId))));
  if (remote) return { unreadable: `JSON Schema id ${id} refers to ${remote}, which is not among its references: a remote schema is never fetched (register it and name it as a reference)` };
  let validate: ValidateFunction;
  const uniqueItems = uniqueItemsKeyword();
  try {
    // The first problem only: a value's problems are as many as its items (500,000 wrong items cost a second and
    // 68 MB to list), and the first one tells the writer what is wrong. ajv's uniqueItems compares every pair of
    // items whose schema allows objects or arrays: ours numbers each item, in linear time.
    const ajv = new Ajv.Class({ allErrors: false, strict: false, logger: false });
    ajv.removeKeyword('uniqueItems');
    ajv.addKeyword(uniqueItems.definition);
    if (Ajv.meta) ajv.addMetaSchema(Ajv.meta);
    for (const reference of parsed) {
      const [key, ...more] = keysOf(reference.name, baseId);
      ajv.addSchema(reference.schema, key);
      for (const other of more) {
        try {
          ajv.addSchema(reference.schema, other);
        } catch {
          // the reference's own $id is that name already
        }
      }
    }
    validate = ajv.compile(schema as object);
  } catch (err) {
    return { unreadable: `JSON Schema id ${id} does not compile: ${(err as Error).message}` };
  }
  return {
    jsonSchema: {
      id,
      validate(value) {
        let valid: boolean;
        try {
          valid = validate(value) as boolean;
        } finally {
          uniqueItems.reset();
        }
        if (valid) return [];
        const errors = validate.errors ?? [];
        const problems = errors.slice(0, MAX_PROBLEMS).map(problemOf);
        if (errors.length > MAX_PROBLEMS) problems.push(`… and ${errors.length - MAX_PROBLEMS} more`);
        return problems;
      },
    },
  };
}

/**
 * The codec of a registry's JSON Schema: a body is JSON text, read with the reader's limits (DecodeError naming the
 * schema id); a value read or to be written is checked against the schema (validate), which reading does too, since
 * any JSON text decodes whatever the schema says; an event is written as plain JSON.
 */
export function jsonSchemaCodec(validator: JsonSchemaValidator): JsonSchemaCodec {
  const id = validator.id;
  return {
    format: 'json',
    schemaType: 'JSON',
    describe: `JSON Schema id ${id}`,
    validatesDecoded: true,
    decode(body, limits) {
      try {
        return { value: parseJsonValue(body, limits) };
      } catch (err) {
        throw new DecodeError(`value of JSON Schema id ${id}: ${(err as Error).message}`, { cause: err });
      }
    },
    validate: (value) => fieldErrorsOf(validator.validate(value)),
    encode: (value) => encodeJsonValue(value),
  };
}

/** The codec of a registry's schema of schemaType JSON, or why there is none here (a schema problem, ajv missing). */
export function jsonSchemaWriter(schema: RegistrySchema): BuiltWriter<JsonSchemaCodec> {
  const built = buildJsonSchemaValidator(schema.id, schema.text, schema.references.map((r) => ({ name: r.name, schema: r.text })));
  if ('missingPeer' in built) return { missingPeer: built.missingPeer, schemaType: 'JSON', kind: 'a JSON Schema' };
  if ('unreadable' in built) return { unreadable: `the registry's schema id ${schema.id} is a JSON Schema that cannot be read here: ${built.unreadable}` };
  return { codec: jsonSchemaCodec(built.jsonSchema) };
}

/**
 * The JSON value of a record's bytes after the schema id (UTF-8 JSON text); DecodeError naming `schemaId` when
 * they are not. Numbers read as JavaScript numbers: integers beyond 2^53 lose precision, as with any JSON.parse.
 */
export function parseJsonBody(schemaId: number, bytesAfterId: Buffer): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytesAfterId);
  } catch {
    throw new DecodeError(`value of JSON Schema id ${schemaId} is not UTF-8 text`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DecodeError(`value of JSON Schema id ${schemaId} is not JSON: ${(err as Error).message}`, { cause: err });
  }
}

type Draft = 'draft-07' | 'draft-06' | '2019-09' | '2020-12';

function draftOf(schema: object): Draft | string {
  const declared = (schema as { $schema?: unknown }).$schema;
  if (typeof declared !== 'string') return 'draft-07';
  if (declared.includes('2020-12')) return '2020-12';
  if (declared.includes('2019-09')) return '2019-09';
  if (/draft-07/.test(declared)) return 'draft-07';
  if (/draft-06/.test(declared)) return 'draft-06';
  return declared;
}

/** ajv's class for the draft, with a meta-schema to add (draft-06); `missing`: ajv 8 is not installed; another string: why the schema cannot be read. */
function loadAjv(draft: Draft | string): { Class: AjvClass; meta?: object } | 'missing' | string {
  const module = draft === '2020-12' ? 'ajv/dist/2020' : draft === '2019-09' ? 'ajv/dist/2019' : draft === 'draft-07' || draft === 'draft-06' ? 'ajv' : undefined;
  if (!module) return `its $schema ${draft} is not a JSON Schema draft ajv 8 reads (draft-06, draft-07, 2019-09, 2020-12)`;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const loaded = require(module) as { default?: AjvClass };
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const meta = draft === 'draft-06' ? (require('ajv/dist/refs/json-schema-draft-06.json') as object) : undefined;
    // An ajv 6 (another package's, hoisted where this library finds it) has no default export: as good as none.
    if (typeof loaded.default !== 'function') return 'missing';
    return { Class: loaded.default, meta };
  } catch (err) {
    // ajv not installed, or an ajv 6 without ajv 8's dist/ folders.
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND') return 'missing';
    throw err;
  }
}

/** The names a reference answers to: its own, and that resolved against the main schema's absolute `$id`. */
function keysOf(name: string, baseId: string | undefined): string[] {
  const keys = [name];
  if (baseId && isAbsolute(baseId) && !isAbsolute(name)) {
    try {
      const resolved = new URL(name, baseId).href;
      if (resolved !== name) keys.push(resolved);
    } catch {
      // a base ajv will refuse anyway
    }
  }
  return keys;
}

function isAbsolute(uri: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(uri);
}

/**
 * The first `$ref` (or `$dynamicRef`, `$recursiveRef`) to an absolute URI that neither a reference nor an `$id`
 * within the schemas names: a schema that would have to come from elsewhere. Relative ones that resolve to nothing
 * known fail ajv's compilation; ajv compiles synchronously here, so it never loads one.
 */
function remoteRef(schemas: unknown[], referenceKeys: Set<string>): string | undefined {
  const ids = new Set<string>([...referenceKeys].map(withoutFragment));
  const refs: string[] = [];
  const walk = (node: unknown, depth: number): void => {
    if (depth > MAX_SCHEMA_DEPTH || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const item of node) walk(item, depth + 1);
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      if (key === '$id' && typeof value === 'string') ids.add(withoutFragment(value));
      else if ((key === '$ref' || key === '$dynamicRef' || key === '$recursiveRef') && typeof value === 'string') refs.push(value);
      // Values, not schemas: a "$ref" in an example or a constant is data.
      else if (key !== 'const' && key !== 'enum' && key !== 'default' && key !== 'examples') walk(value, depth + 1);
    }
  };
  for (const schema of schemas) walk(schema, 0);
  return refs.find((ref) => isAbsolute(ref) && !ids.has(withoutFragment(ref)));
}

function withoutFragment(uri: string): string {
  const hash = uri.indexOf('#');
  return hash < 0 ? uri : uri.slice(0, hash);
}

/** `$.amount: must be integer`, from ajv's JSON pointer and message, with what names the offending part. */
function problemOf(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  let message = error.message ?? error.keyword;
  if (error.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') message += `: ${JSON.stringify(params.additionalProperty)}`;
  else if (error.keyword === 'unevaluatedProperties' && typeof params.unevaluatedProperty === 'string') message += `: ${JSON.stringify(params.unevaluatedProperty)}`;
  else if (error.keyword === 'enum' && Array.isArray(params.allowedValues)) message += `: ${params.allowedValues.slice(0, 10).map((v) => JSON.stringify(v)).join(', ')}${params.allowedValues.length > 10 ? ', …' : ''}`;
  else if (error.keyword === 'const' && 'allowedValue' in params) message += `: ${JSON.stringify(params.allowedValue)}`;
  return `${pathOf(error.instancePath)}: ${message}`;
}

/** A JSON pointer as a JSONPath-like `$.lines[2].sku` (`$["odd key"]` for a key that is not a plain name). */
export function pathOf(pointer: string): string {
  if (pointer === '') return '$';
  let path = '$';
  for (const raw of pointer.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^(0|[1-9]\d*)$/.test(segment)) path += `[${segment}]`;
    else if (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(segment)) path += `.${segment}`;
    else path += `[${JSON.stringify(segment)}]`;
  }
  return path;
}

/** JSON Schema problems (`$.lines[2].sku: must be string`) as field errors (`lines[2].sku`, `must be string`). */
export function fieldErrorsOf(problems: readonly string[]): FieldError[] {
  return problems.map((problem) => {
    const at = /^\$([^:]*): (.*)$/s.exec(problem);
    return at ? { path: at[1].replace(/^\./, ''), problem: at[2] } : { path: '', problem };
  });
}
