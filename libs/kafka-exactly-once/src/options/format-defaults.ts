import type { EventFormat, JsonLimits } from '../interfaces/format-options.interface';

/** Every EventFormat, as the options and the decorators check a `format` against. */
export const EVENT_FORMATS: readonly EventFormat[] = ['avro', 'json', 'protobuf'];

/** JSON reading's limits when the options give none (`json`, a handler's `json`). */
export const DEFAULT_JSON_LIMITS: JsonLimits = Object.freeze({
  maxBytes: 1_048_576,
  maxDepth: 64,
  bigIntegers: 'reject',
} as const);
