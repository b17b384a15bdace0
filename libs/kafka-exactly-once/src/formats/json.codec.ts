import { DecodeError } from '../errors/decode.error';

// Placeholder of the safe JSON codec (replaced by its full version).
export interface JsonLimits {
  maxBytes: number;
  maxDepth: number;
  bigIntegers: 'reject' | 'bigint' | 'string';
}
export const DEFAULT_JSON_LIMITS: JsonLimits = { maxBytes: 1_048_576, maxDepth: 64, bigIntegers: 'reject' };
export function parseJsonValue(bytes: Buffer | null | undefined, limits: JsonLimits = DEFAULT_JSON_LIMITS): Record<string, unknown> {
  if (!bytes) throw new DecodeError('record has no value (a tombstone)');
  if (bytes.length > limits.maxBytes) throw new DecodeError(`value is ${bytes.length} bytes, over the limit of ${limits.maxBytes}`);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (err) {
    throw new DecodeError(`value is not JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new DecodeError('value is not a JSON object');
  return value as Record<string, unknown>;
}
export function encodeJsonValue(value: unknown): Buffer {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new TypeError('a JSON event must be an object');
  return Buffer.from(JSON.stringify(value), 'utf8');
}
