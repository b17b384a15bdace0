/** Metadata key set by @IdempotentHandler. */
export const IDEMPOTENT_HANDLER_METADATA = 'kafka-eo:idempotent-handler';

/** Metadata key set by @OrderedEvent. */
export const ORDERED_EVENT_METADATA = 'kafka-eo:ordered-event';

/** Injection token of the validated options with defaults applied. */
export const RESOLVED_OPTIONS = Symbol('kafka-eo:resolved-options');

/** Injection token of the KafkaJS client the module shares between its consumer, producers and admin. */
export const KAFKA_CLIENT = Symbol('kafka-eo:kafka-client');

/** Record headers the library reads and writes. */
export const HEADERS = {
  messageId: 'message-id',
  eventType: 'event-type',
  causationId: 'causation-id',
} as const;

/** Headers stamped on dead letters (docs/operations.md). */
export const DEAD_LETTER_HEADERS = {
  originalTopic: 'dlq-original-topic',
  originalPartition: 'dlq-original-partition',
  originalOffset: 'dlq-original-offset',
  consumerGroup: 'dlq-consumer-group',
  errorClass: 'dlq-error-class',
  errorMessage: 'dlq-error-message',
  errorStack: 'dlq-error-stack',
  attempts: 'dlq-attempts',
  reason: 'dlq-reason',
  /** On a parked record: the ordering key it is parked under (text form). */
  parkedKey: 'dlq-parked-key',
  /** Only on a dead letter that would exceed its topic's max.message.bytes: sent without the value, says why. */
  valueOmitted: 'dlq-value-omitted',
  /** Only on an output an operator diverted (reason `output-refused`): the topic that refused it. */
  outputTopic: 'dlq-output-topic',
} as const;

/**
 * Headers stamped on a record moved to a retry topic (docs/retries.md). `retry-history` repeats: one per
 * stage the record failed on (the topic, then each tier), and dead letters after the last tier carry them all.
 */
export const RETRY_HEADERS = {
  /** Where the record was first consumed: its topic, partition and offset (kept across tiers). */
  originalTopic: 'retry-original-topic',
  originalPartition: 'retry-original-partition',
  originalOffset: 'retry-original-offset',
  /** The tier the record is on: 1 on `<topic>.retry.1`... */
  attempt: 'retry-attempt',
  /** When the record is due on its tier, ms since the epoch. */
  dueAt: 'retry-due-at',
  /** The error of the stage it failed on last. */
  errorClass: 'retry-error-class',
  errorMessage: 'retry-error-message',
  /** JSON of one failed stage: `{ stage, topic, partition, offset, attempts, error, message, at }`. */
  history: 'retry-history',
} as const;

/** Name of the inbox table and of the table that records which of the library's migrations ran. */
export const INBOX_TABLE = 'kafka_eo_inbox';
export const MIGRATIONS_TABLE = 'kafka_eo_migrations';
/**
 * The outputs of a unit of work's records, one row (a binary blob) per unit of work, and the sequence of its ids:
 * an inbox row handled plainly says `[{"unit": "<id>"}]` where it would hold its outputs.
 */
export const UNIT_OUTPUTS_TABLE = 'kafka_eo_unit_outputs';
export const UNIT_SEQUENCE = 'kafka_eo_unit_seq';
/**
 * The outputs a partition's own producer is known to have committed in Kafka, read before the library aborted a
 * hanging transaction of that producer: the records that come again after the abort leave them out of their replay.
 */
export const COMMITTED_OUTPUTS_TABLE = 'kafka_eo_committed_outputs';

/** Keys of @OrderedEvent handlers that are parked, and the records parked under them. */
export const PARKED_KEYS_TABLE = 'kafka_eo_parked_keys';
export const PARKED_RECORDS_TABLE = 'kafka_eo_parked_records';
/** Every operator action (release, replay, discard): the request the consumer carries out, and its outcome. */
export const AUDIT_TABLE = 'kafka_eo_audit';
/** Outputs of replays (releases, dead-letter replays), until their Kafka transaction is known to have committed. */
export const REPLAYS_TABLE = 'kafka_eo_replays';
/** What each running instance of a group last reported, for the console of any other (one row per instance). */
export const INSTANCES_TABLE = 'kafka_eo_instances';
/** Each partition's counts and gauges over buckets of time (10 s, folded into 1 min and 5 min), for the console's charts. */
export const SAMPLES_TABLE = 'kafka_eo_samples';
/** Bulk actions of operators (a filter, its cursor, its lease), walked by every process with the admin module. */
export const BULK_OPERATIONS_TABLE = 'kafka_eo_bulk_operations';

/**
 * Fault injection, for the library's own crash tests only: `KAFKA_EO_FAULT=<point>:<n>` kills the process
 * with SIGKILL the n-th time a unit of work reaches <point>. Never set it in production.
 */
export const FAULT_ENV = 'KAFKA_EO_FAULT';

/** The transactional outbox (docs/outbox.md): events waiting for the relay, in the writers' commit order per key. */
export const OUTBOX_TABLE = 'kafka_eo_outbox';
/** The relay's bookkeeping: its name, the batch numbers it gave out, and the last one known relayed. */
export const OUTBOX_RELAY_TABLE = 'kafka_eo_outbox_relay';
/** Outbox events Kafka refused for good, with the reason, until an operator retries or discards them. */
export const OUTBOX_SET_ASIDE_TABLE = 'kafka_eo_outbox_set_aside';
/** The session-level advisory lock the one active relay of a database holds (arbitrary constant). */
export const OUTBOX_RELAY_LOCK = '7364211905';
/** The channel a writer's commit notifies the relay on. */
export const OUTBOX_CHANNEL = 'kafka_eo_outbox';
