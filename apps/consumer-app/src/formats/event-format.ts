import { NonRetriableHandlerError, type IdempotentHandlerOptions } from 'kafka-exactly-once';
import { consumerAppConfig } from '../consumer-app.config';

/**
 * How a handler of the demo reads its topic, by EVENT_FORMAT: the Avro record of schemas/ (`avro`), or JSON
 * validated with the DTO class or zod schema that mirrors that record (`json`). Evaluated when the handler's class is defined, as the
 * decorators' other settings from the environment are.
 */
export function readAs(schema: string, validate: NonNullable<IdempotentHandlerOptions['validate']>): Pick<IdempotentHandlerOptions, 'schema' | 'format' | 'validate'> {
  return consumerAppConfig().eventFormat === 'json' ? { format: 'json', validate } : { schema };
}

/**
 * An Avro `long` of an output as a JSON topic carries it: a number, exact only up to 2^53 (what JSON readers
 * parse without rounding). Beyond, the payment fails for good rather than being written rounded.
 */
export function jsonInteger(value: bigint, field: string): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new NonRetriableHandlerError(`${field} ${value} is beyond JSON's exact integers (2^53): it cannot be written as JSON without rounding`);
  }
  return Number(value);
}
