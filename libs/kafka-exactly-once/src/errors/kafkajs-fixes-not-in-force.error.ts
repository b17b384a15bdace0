import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** A KafkaJS package found in the application: where it lies and its version, when they could be read. */
export interface KafkaJsCopy {
  /** Its folder (the one holding its package.json); undefined when it could not be found among the loaded modules. */
  path?: string;
  version?: string;
}

/** A correction of KafkaJS the library relies on, as named in the error. */
export interface KafkaJsFixName {
  /** Its name, as its file is named: `partition-workers` for kafkajs-partition-workers.fix.ts. */
  name: string;
  /** What it corrects, in a few words. */
  corrects: string;
}

const HOW_TO_FIX =
  'Use one kafkajs 2.2.4 in the application: `npm ls kafkajs` lists its copies, pin "kafkajs": "2.2.4" in package.json ' +
  '(with an "overrides" entry when another package brings its own), then `npm dedupe` (or reinstall) so that one copy is left.';

const where = (copy: KafkaJsCopy) => `kafkajs ${copy.version ?? '(version unknown)'} at ${copy.path ?? '(a folder not found among the loaded modules)'}`;

/**
 * Thrown at boot when the Kafka client the library runs on is not the KafkaJS it corrected, so that its consumers
 * and producers would run without corrections its guarantees rest on (a second copy of kafkajs in the
 * application, a client built from another copy), or when that KafkaJS is another version than 2.2.4, which the
 * corrections are written against. The message names the corrections missing, the copy found and what to do.
 */
export class KafkaJsFixesNotInForceError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    /** The KafkaJS the client is built from. */
    readonly found: KafkaJsCopy,
    /** The corrections that are not in force on it (empty when only its version is refused). */
    readonly missing: readonly KafkaJsFixName[],
    /** The KafkaJS the library corrected (the one it resolves itself). */
    readonly corrected: KafkaJsCopy,
    /** The version the corrections are written against. */
    readonly expectedVersion: string,
  ) {
    super(
      found.version !== undefined && found.version !== expectedVersion
        ? `kafka-exactly-once corrects KafkaJS ${expectedVersion} and runs on no other version, and its Kafka client is built from ${where(found)}. ${HOW_TO_FIX}`
        : `kafka-exactly-once's corrections of KafkaJS are not in force on the Kafka client it runs on: ${missing.map((f) => `${f.name} (${f.corrects})`).join('; ')}. ` +
            `That client is built from ${where(found)}, the corrections were applied to ${where(corrected)}` +
            `${found.path !== undefined && found.path === corrected.path ? '' : ': the application has two copies of KafkaJS'}. ` +
            `Its consumers would run without them, so the module does not start. ${HOW_TO_FIX}`,
    );
  }
}
