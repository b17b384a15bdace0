import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** No schema with this full name is loaded from the schemas directory. */
export class UnknownSchemaError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly schemaName: string,
    known: string[],
  ) {
    super(
      `No Avro schema named "${schemaName}" is loaded (known: ${known.join(', ') || 'none'}). ` +
        'Add a .avsc file with that full name (namespace.name) to the schemas directory.',
    );
  }
}
