import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** The kafkajs package the library's clients are built on: where it lies and its version, when they could be read. */
export interface KafkaJsCopy {
  /** Its folder (the one holding its package.json). */
  path?: string;
  version?: string;
}

/** A correction of KafkaJS the library relies on, as named in the error. */
export interface KafkaJsFixName {
  /** Its name: `partition-workers`, `aborted-transactions`, `request-queue` (src/kafkajs/README.md). */
  name: string;
  /** What it corrects, in a few words. */
  corrects: string;
}

const where = (copy: KafkaJsCopy) => `kafkajs ${copy.version ?? '(version unknown)'} at ${copy.path ?? '(a folder not found)'}`;
const named = (fixes: readonly KafkaJsFixName[]) => fixes.map((f) => `${f.name} (${f.corrects})`).join('; ');

/**
 * Thrown at boot when a correction of KafkaJS the library relies on is not in force on the Kafka client it runs
 * on, so that its consumers and producers would run without what its guarantees rest on: the client is not one the
 * library built (a KafkaJS client put in place of the module's, `KAFKA_CLIENT`), the installed kafkajs is another
 * version than 2.2.4 (the one the corrections are written against), or a correction's check failed on it. The
 * message names the corrections, the kafkajs found and what to do.
 */
export class KafkaJsFixesNotInForceError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    /** The kafkajs package the library's clients are built on (the one it resolves). */
    readonly found: KafkaJsCopy,
    /** The corrections that are not in force (every one on a client the library did not build). */
    readonly missing: readonly KafkaJsFixName[],
    /** The version the corrections are written against. */
    readonly expectedVersion: string,
    /** Whether the client is not one the library built. */
    readonly foreignClient = false,
  ) {
    super(
      found.version !== undefined && found.version !== expectedVersion
        ? `kafka-exactly-once builds its Kafka clients from KafkaJS ${expectedVersion} with corrections written against that version, and runs on no other, and this application resolves ${where(found)}. ` +
            `Install kafkajs ${expectedVersion}: pin "kafkajs": "${expectedVersion}" in package.json (with an "overrides" entry when another package brings its own); \`npm ls kafkajs\` shows what is installed.`
        : foreignClient
          ? `kafka-exactly-once runs on Kafka clients it builds itself, with its corrections of KafkaJS (${named(missing)}), and the client it was given is not one of them ` +
            '(a KafkaJS client put in place of the module\'s own, KAFKA_CLIENT). Its consumers would run without them, so the module does not start: leave KAFKA_CLIENT to the module.'
          : `kafka-exactly-once's corrections of KafkaJS are not in force on the Kafka client it built: ${named(missing)} (on ${where(found)}). ` +
            `Its consumers would run without them, so the module does not start. Reinstall kafkajs ${expectedVersion} unchanged (\`npm ls kafkajs\`, then \`npm ci\`).`,
    );
  }
}
