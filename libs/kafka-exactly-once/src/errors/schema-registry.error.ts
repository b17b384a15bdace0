import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/**
 * Why the Schema Registry could not serve what was asked:
 * - `unavailable`: it did not answer, or answered with an error of its own (5xx, a timeout, refused credentials):
 *   an infrastructure fault. A record waiting on it is retried (nothing dead-lettered, nothing committed) and its
 *   partition shows the error in health; a publish or an outbox write that needs an id not cached yet throws.
 * - `no-id`: the topic's subject has no version of the schema the library writes with, and registering at run
 *   time is off (`schemaRegistry.autoRegister`): register it at deploy time (`kafka-eo schemas register`).
 * - `incompatible`: a handler's reader schema cannot read the subject's latest writer schema (checked at boot), or
 *   the registry refused to register a schema (its compatibility rule).
 * - `not-a-registry`: `schemaRegistry.url` answers, but not as a Confluent-compatible registry's API (checked at
 *   boot): a wrong base URL.
 * - `unknown-id`: the registry has no schema of a record's id (yet): the record waits, as for `unavailable`, for at
 *   most `schemaRegistry.unknownIdWaitMs` from the first such answer (a writer registering it, a replica catching
 *   up), the id asked again at each retry; after that the record is dead-lettered (`decode-failed`). Not waited for:
 *   an id below one the registry gave that long ago, or any once its partition has waited that long for unknown ids
 *   within ten times that.
 * - `missing-peer`: a record's writer schema is a JSON Schema or a Protobuf schema, the package that reads it (ajv,
 *   protobufjs) is not installed, and the topic's own subject holds that schema: the record waits, as for
 *   `unavailable`, for at most `schemaRegistry.missingPeerWaitMs` from the first such record of the process (install
 *   the package and restart), then is dead-lettered (`decode-failed`). A record of a schema the topic's subject does
 *   not hold is dead-lettered at once, naming the package.
 */
export type SchemaRegistryFailure = 'unavailable' | 'no-id' | 'incompatible' | 'not-a-registry' | 'unknown-id' | 'missing-peer';

/** The Schema Registry could not serve a schema or an id (see SchemaRegistryFailure). */
export class SchemaRegistryError extends KafkaExactlyOnceError {
  readonly retriable: boolean;

  constructor(
    readonly failure: SchemaRegistryFailure,
    message: string,
    readonly subject?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.retriable = failure === 'unavailable' || failure === 'no-id' || failure === 'unknown-id' || failure === 'missing-peer';
  }
}
