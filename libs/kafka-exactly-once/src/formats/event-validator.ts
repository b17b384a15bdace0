import { EventValidationError, type FieldError } from '../errors/event-validation.error';
import { requirePeer } from '../optional-peers';

/**
 * A Standard Schema (https://standardschema.dev): what zod, valibot, arktype and others implement, so any of them
 * validates an event without an adapter of the library's. The interface is copied (it is the specification's
 * whole contract), so that `@standard-schema/spec` need not be installed.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined }> };

/**
 * How a handler's events are validated before it is called: a DTO class with `class-validator` decorators (as
 * Nest's ValidationPipe validates; `class-transformer`'s `plainToInstance` builds the instance when it is
 * installed, so `@Type` and nested DTOs work as there), or a Standard Schema (zod, valibot, arktype...).
 */
export type EventValidation = (abstract new (...args: any[]) => object) | StandardSchemaV1;

/** Validates one decoded event: the value the handler gets (a DTO instance, a schema's output), or EventValidationError. */
export type EventValidator = (event: unknown) => Promise<unknown>;

function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  const standard = (value as { '~standard'?: { version?: unknown; validate?: unknown } } | null)?.['~standard'];
  return typeof standard === 'object' && standard !== null && standard.version === 1 && typeof standard.validate === 'function';
}

/** Whether `validate` is something a handler may give (checked at boot, with the option's name in the error). */
export function validationProblem(validate: unknown): string | undefined {
  if (isStandardSchema(validate)) return undefined;
  if (typeof validate === 'function' && validate.prototype) return undefined;
  return `must be a DTO class (with class-validator decorators) or a Standard Schema (zod, valibot, arktype...), got ${validate === null ? 'null' : typeof validate}`;
}

/** How a validation is named in logs and in its failures: the DTO class's name, or `a <vendor> schema`. */
export function validationName(validate: EventValidation): string {
  return isStandardSchema(validate) ? `a ${validate['~standard'].vendor} schema` : validate.name;
}

/** The validator of `validate` (a DTO class or a Standard Schema). Throws at boot when a peer it needs is missing. */
export function eventValidator(validate: EventValidation): EventValidator {
  if (isStandardSchema(validate)) return standardValidator(validate);
  return classValidator(validate as new () => object);
}

/** Zod's own asynchronous parse (zod 3.24+ and 4 carry both it and `~standard`). */
interface ZodLike {
  safeParseAsync(value: unknown): Promise<{ success: true; data: unknown } | { success: false; error: { issues: StandardIssues } }>;
}

type StandardIssues = Extract<StandardResult<unknown>, { issues: unknown }>['issues'];

function standardValidator(schema: StandardSchemaV1): EventValidator {
  const name = validationName(schema);
  // NOTE: zod's `~standard.validate` parses synchronously first and again asynchronously when the schema has an async
  // refinement: every refinement runs twice, and one that rejects the first time is left as an unhandled rejection,
  // which ends a Node.js process (colinhacks/zod#6610). Its own asynchronous parse runs each refinement once.
  const zod = schema['~standard'].vendor === 'zod' && typeof (schema as unknown as Partial<ZodLike>).safeParseAsync === 'function' ? (schema as unknown as ZodLike) : undefined;
  const validate = zod
    ? async (event: unknown): Promise<StandardResult<unknown>> => {
        const parsed = await zod.safeParseAsync(event);
        return parsed.success ? { value: parsed.data } : { issues: parsed.error.issues };
      }
    : async (event: unknown): Promise<StandardResult<unknown>> => schema['~standard'].validate(event);
  return async (event) => {
    const result = await validate(event);
    if (result.issues) {
      throw new EventValidationError(name, result.issues.map((issue) => ({ path: (issue.path ?? []).map((p) => String(typeof p === 'object' && p !== null ? p.key : p)).join('.'), problem: issue.message })));
    }
    return result.value;
  };
}

interface ClassValidatorError {
  property: string;
  constraints?: Record<string, string>;
  children?: ClassValidatorError[];
}

function classValidator(dto: new () => object): EventValidator {
  const { validate } = requirePeer<{ validate(object: object, options?: object): Promise<ClassValidatorError[]> }>('class-validator', `validating events with the DTO ${dto.name}`);
  let transformer: { plainToInstance(cls: new () => object, plain: object): object } | undefined;
  try {
    transformer = require('class-transformer');
  } catch {
    // Without class-transformer, the instance is the event's own properties on the DTO's prototype (no nested DTOs).
  }
  return async (event) => {
    if (event === null || typeof event !== 'object' || Array.isArray(event)) throw new EventValidationError(dto.name, [{ path: '', problem: `expected an object, got ${Array.isArray(event) ? 'an array' : event === null ? 'null' : typeof event}` }]);
    const instance = transformer ? transformer.plainToInstance(dto, event) : ownCopy(dto, event as Record<string, unknown>);
    // forbidUnknownValues: class-validator's own default since 0.14, kept explicit: an unknown object is refused.
    const errors = await validate(instance, { forbidUnknownValues: true });
    if (errors.length > 0) throw new EventValidationError(dto.name, flatten(errors, ''));
    return instance;
  };
}

/** The event's own properties on an instance of the DTO, each defined (never assigned: no setter, no prototype reached). */
function ownCopy(dto: new () => object, event: Record<string, unknown>): object {
  const instance = Object.create(dto.prototype) as object;
  for (const key of Object.keys(event)) Object.defineProperty(instance, key, { value: event[key], enumerable: true, writable: true, configurable: true });
  return instance;
}

function flatten(errors: ClassValidatorError[], prefix: string): FieldError[] {
  return errors.flatMap((error) => {
    const path = prefix ? `${prefix}.${error.property}` : error.property;
    const own = Object.values(error.constraints ?? {}).map((problem) => ({ path, problem }));
    return [...own, ...flatten(error.children ?? [], path)];
  });
}
