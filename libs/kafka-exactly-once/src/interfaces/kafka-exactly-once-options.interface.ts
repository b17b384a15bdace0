import type { DatabasePort } from '../database/database.port';
import type { KafkaConfig } from 'kafkajs';
import type { EventFormat, JsonLimits } from './format-options.interface';
import type { MessageIdFrom } from './record-info.interface';

/** Options of KafkaExactlyOnceModule.forRoot / forRootAsync. */
export interface KafkaExactlyOnceModuleOptions {
  /** KafkaJS client settings; `ssl`, `sasl` and timeouts are passed through to KafkaJS. */
  kafka: Pick<KafkaConfig, 'clientId' | 'brokers' | 'ssl' | 'sasl' | 'connectionTimeout' | 'requestTimeout' | 'retry'>;
  /**
   * The Kafka client the consumer group runs on: `kafkajs` (default; KafkaJS 2.2.4 with the library's corrections)
   * or `platformatic` (@platformatic/kafka, an optional peer dependency; Node.js 22.22+ or 24.6+). The producers and
   * the library's own requests run on KafkaJS with either. docs/drivers.md.
   */
  driver?: 'kafkajs' | 'platformatic';
  /** Consumer group shared by every handler of this module (required when there are handlers). */
  groupId?: string;
  /** Prefix of the per-partition transactional ids: `{prefix}.{groupId}.{topic}.{partition}`, the group escaped (`.` as `%2E`). */
  transactionalIdPrefix: string;
  /** The Avro schemas (required when a handler or a declared topic is Avro, the default format). */
  schemas?: {
    /** Directory of .avsc files, resolved from the working directory. */
    directory: string;
    /** How Avro longs are decoded: `bigint` (default, exact) or `number`. */
    longs?: 'bigint' | 'number';
  };
  /**
   * The topics the module writes (`ctx.emit`, the publisher, the outbox, ClientKafkaExactlyOnce) and the formats of
   * the topics handlers read: each topic's format (`avro` by default, `json`, `protobuf`), its Avro schema, its key.
   */
  topics?: Record<string, TopicOptions>;
  /**
   * Limits and answers of JSON reading, for every handler that reads JSON (a handler's `json` overrides them):
   * `maxBytes` (default 1 MiB), `maxDepth` (default 64) and `bigIntegers`, what an integer beyond ±(2^53-1) becomes:
   * `reject` (default: the record is dead-lettered, never silently rounded), `bigint` or `string` (exact). See
   * docs/formats.md.
   */
  json?: Partial<JsonLimits>;
  /**
   * How values are framed when the module writes them (`ctx.emit`, the publisher, the outbox), by default for
   * every topic (`topics[name].wireFormat` overrides it for one): `single-object` (default: Avro single-object
   * encoding, `C3 01`, the schema's fingerprint, the body) or `schema-registry` (Confluent's framing: `00`, the
   * 4-byte schema id, the body; needs `schemaRegistry`). Handlers read both, told apart by the first bytes, so
   * a topic can move from one to the other while records of both are on it (docs/schema-registry.md).
   */
  wireFormat?: WireFormat;
  /**
   * The application's `@nestjs-cls/transactional` (TypeORM adapter), when it has one for the module's DataSource:
   * `Outbox.add(topic, event)` without an EntityManager joins the transaction it has open, and during each handler
   * call `TransactionHost.tx` is the unit of work's transaction, so that services written for it commit with the
   * unit. Default true (used when present); `{ connectionName }` for a named TransactionHost; false: never.
   */
  ambientTransactions?: boolean | { connectionName?: string };
  /** A Confluent-compatible Schema Registry (Confluent, Confluent Cloud, Apicurio, Redpanda, Karapace): docs/schema-registry.md. */
  schemaRegistry?: RegistryConnectionOptions;
  /** Prefix prepended to every topic subscribed, emitted to or dead-lettered to (shared clusters, tests). */
  topicPrefix?: string;
  /** Name of the TypeORM DataSource to use (`TypeOrmModule.forRoot({ name })`); the default one if omitted. */
  dataSourceName?: string;
  /**
   * The data layer the library runs its SQL on and lends handlers as `ctx.db`: `prismaDatabase(...)`,
   * `drizzleDatabase(...)`, `kyselyDatabase(...)` (from `kafka-exactly-once/prisma`, `/drizzle`, `/kysely`) or
   * `typeormDatabase(dataSource)`. Left out: the TypeORM DataSource of `TypeOrmModule` (`dataSourceName`).
   * docs/data-layers.md.
   */
  database?: DatabasePort;
  consumer?: ConsumerOptions;
  /**
   * A unit of work is a chunk of consecutive records of one partition, capped by count (default 500), by the
   * bytes of its records' keys, values and headers (default 4 MiB; a record larger than that is a chunk of its own) and
   * by handling time (default 1000 ms; not for batch handlers, which are called once per chunk). Its cost is
   * mostly per unit (one PostgreSQL and one Kafka transaction), so larger chunks go faster; a failing record
   * makes its chunk run again (docs/benchmarks.md has the figures).
   */
  chunk?: { maxRecords?: number; maxBytes?: number; maxMillis?: number };
  /** Kafka transaction timeout in ms (KafkaJS `transactionTimeout`) of every transactional producer of the module, default 60000. */
  transactionTimeoutMs?: number;
  /**
   * A hanging transaction is one its coordinator no longer ends: a broker crash can leave one (docs/operations.md,
   * "A hanging transaction"), and nothing but a marker written for it ends it. When it is one of the library's own
   * producers' and holds what the library must read (a partition's committed offset, the outbox relay's
   * checkpoint) past `transactionTimeoutMs`, the library ends it on every partition where it is open: a
   * partition's is aborted (its records come again and their outputs are sent once more from the inbox); the
   * relay's is committed when its database counts the batch relayed, aborted otherwise (the batch is sent again). That needs the ClusterAction permission on the cluster and Read on the topics; without them (or with
   * false here) the partition or the relay waits for an operator and says so in the log and in health.
   * Transactions of other producers are never ended by the library. Default true.
   */
  abortHangingTransactions?: boolean;
  inbox?: InboxOptions;
  /** Retries of a failing handler, in place, before the record is dead-lettered. */
  retry?: RetryOptions;
  /**
   * A chunk whose unit of work fails for anything but an infrastructure fault is re-run one record per unit of
   * work; a record whose unit fails alone `maxFailures` times (counted in the inbox, across restarts) is
   * dead-lettered.
   */
  isolation?: IsolationOptions;
  /** The events a unit of work emits. */
  outputs?: {
    /** A transaction's outputs are sent in produce requests of at most this many bytes each. Default 524288. */
    maxRequestBytes?: number;
  };
  /** Dead-letter topics are `<topic><suffix>`, default suffix `.dlq`. */
  deadLetter?: { topicSuffix?: string };
  /**
   * Operators' releases of parked keys and replays of dead letters (admin REST, `kafka-eo` CLI) are queued in
   * PostgreSQL and carried out by the group's consumer: how often it looks for them (ms, default 1000).
   */
  operations?: {
    pollIntervalMs?: number;
    /**
     * Days a finished release, replay or discard stays in the audit table (with its settled replays and resolved
     * parked records), counted from when it finished; the retention job (inbox.retentionIntervalMs) then deletes
     * it. Open operations, unsettled replays and parked records are never deleted. Default 30; a fraction is allowed.
     */
    retentionDays?: number;
    /**
     * How often (ms) this instance writes its state and its partitions' counts to PostgreSQL (`kafka_eo_instances`,
     * `kafka_eo_samples`), where the operator console of any instance of the group reads them: every member, and
     * the last day in charts (docs/console.md, "The whole group"). Default 10000; from 1000 to 60000; 0 turns it off (the
     * console then shows its own instance only, and no charts).
     */
    reportIntervalMs?: number;
    /**
     * A file to append one JSON line per committed unit of work to: when each of its steps ended (its batch
     * fetched, the unit begun, the inbox claim, the handlers, the inbox rows, the outputs sent, PostgreSQL's
     * COMMIT, Kafka's commit). A diagnostic of where a record's time goes (the bench's `--tail-steps`,
     * docs/benchmarks.md); off by default. Lines are buffered and written once a second.
     */
    stepLog?: string;
  };
  /** Start consuming at application bootstrap (default true). */
  autoStart?: boolean;
  /** Enables the EventPublisher: idempotent sends, circuit breaker, durable local spool. */
  publisher?: PublisherOptions;
  /**
   * The transactional outbox (docs/outbox.md): `Outbox.add` writes an event in the caller's own PostgreSQL
   * transaction, and a relay moves committed events to Kafka exactly once, in per-key commit order.
   */
  outbox?: OutboxOptions;
  /**
   * Prometheus metrics (`kafka_eo_*`, docs/metrics.md) through prom-client, an optional peer dependency: set
   * `metrics: {}` to register them on prom-client's global registry, or pass `{ registry }`. Off by default.
   */
  metrics?: MetricsOptions;
}

export interface MetricsOptions {
  /** A prom-client `Registry`; default prom-client's global `register`. */
  registry?: object;
}

export interface PublisherOptions {
  /**
   * A send still unacknowledged after this long is spooled (KafkaJS would retry it forever); a publish whose key
   * has records in the spool waits this long at most for the drainer to deliver them before it is spooled behind
   * them. Default 5000.
   */
  sendTimeoutMs?: number;
  spool?: {
    /** Directory of the spool files, resolved from the working directory. Default `.spool`. */
    directory?: string;
    /** Backlog in bytes past which publish() rejects with SpoolFullError. Default 256 MiB. */
    maxBytes?: number;
    /** Size of one spool segment file. Default 16 MiB. */
    segmentBytes?: number;
  };
  breaker?: {
    /** Consecutive failed sends that open the breaker. Default 3. */
    consecutiveFailures?: number;
    /** How long the breaker stays open before it lets one send through to test Kafka. Default 2000. */
    halfOpenAfterMs?: number;
  };
  /** The publisher reports down when the oldest spooled record is older than this. Default 300000 (5 min). */
  unhealthyBacklogAgeMs?: number;
  /**
   * A spooled record whose topic the cluster keeps saying does not exist is held (the topic may be created
   * late, or recreated) and moved to the quarantine only after this long. Default 300000 (5 min).
   */
  missingTopicGraceMs?: number;
  /**
   * Names this publisher instance in the transactional id of `publishAll` (`{transactionalIdPrefix}.%publisher.{instanceId}`):
   * stable across restarts, so that a restarted instance settles the transaction a crash left open at once,
   * and unique between instances running at the same time (two instances with one id fence each other).
   * Letters, digits, ".", "_" and "-". Default: a random id created once and kept in the spool directory
   * (file `publisher-instance-id`), since a spool directory belongs to exactly one instance.
   */
  instanceId?: string;
  /**
   * Not settings to choose: the publisher's producer is always idempotent, with one request in flight and acks
   * from all replicas (order and no loss). These fields exist to refuse a weaker setting at boot:
   * `idempotent: false`, `maxInFlightRequests` other than 1 or `acks` other than -1 is a boot error.
   */
  producer?: { idempotent?: boolean; maxInFlightRequests?: number; acks?: number };
}

export interface OutboxOptions {
  /**
   * Run the relay in this application (default true). With false, `Outbox.add` still writes events, and a relay
   * runs elsewhere (`kafka-eo outbox relay`, or another instance of the application): one relay is active per
   * database at a time, however many run.
   */
  relay?: boolean;
  /**
   * The relay's name: its Kafka transactional id is `{transactionalIdPrefix}.%outbox.{name}.{outbox id}` (the name
   * with `.` as `%2E`; the outbox id is the database's) and its checkpoint is kept under `{name}:{outbox id}`.
   * Fixed for the life of a database's outbox: a relay of another name refuses to start on it.
   * Default: `transactionalIdPrefix`. Letters, digits, ".", "_" and "-".
   */
  name?: string;
  /** The compacted topic of the relay's checkpoints (created with one partition if missing). Default `kafka-eo.outbox-checkpoints`. */
  checkpointTopic?: string;
  /** Events per Kafka transaction of the relay, at most (default 2000). */
  batchMaxRecords?: number;
  /** Bytes of event keys, values and headers per Kafka transaction of the relay, about (an event larger goes alone). Default 524288. */
  batchMaxBytes?: number;
  /** How often the relay looks for events when no notification came, ms (default 1000). */
  pollIntervalMs?: number;
  /** Health turns down when the oldest event waiting in the outbox is older than this, ms (default 60000). */
  unhealthyAgeMs?: number;
  /** How long one Kafka or PostgreSQL step of the relay may take (statements at most 60 s) before it starts over from its checkpoint, ms (default 30000). */
  sendTimeoutMs?: number;
}

export interface TopicOptions {
  /**
   * What the topic's values are: `avro` (default), `json` (plain JSON, as Nest's Kafka transport writes; JSON Schema
   * in the registry's framing with `wireFormat: 'schema-registry'`) or `protobuf` (in the registry's framing). A
   * handler of the topic reads it in this format unless it says otherwise.
   */
  format?: EventFormat;
  /** Full name of the Avro record written to the topic (format `avro`: required). */
  schema?: string;
  /** Derives the record key from the event, so callers cannot forget it. */
  key?: (event: any) => string;
  /**
   * For the handlers of this topic: where a record without a `message-id` header takes its identity from, a field
   * path of the decoded event (`'paymentId'`) or a function `(event, record) => key` (a handler's own
   * `messageIdFrom` wins). A record with a `message-id` keeps it; a second record with the same key is skipped as a
   * duplicate. See `IdempotentHandlerOptions.messageIdFrom` and docs/guarantees.md.
   */
  messageIdFrom?: MessageIdFrom;
  /**
   * How this topic's values are framed when written (the module's `wireFormat` when omitted). For a topic a
   * handler consumes, `schema-registry` also makes the boot check its schema against the subject's latest.
   */
  wireFormat?: WireFormat;
  /**
   * Format `json` with a `schemaRegistry`: whether the topic's values may be in the registry's framing (`00`, a
   * 4-byte schema id, JSON Schema or Protobuf). Default true. false: the topic is plain JSON only, read and written:
   * a value starting with `00` gets the JSON reader's refusal (`decode-failed`), never a registry lookup. A handler's
   * own `registryFraming` overrides it.
   */
  registryFraming?: boolean;
}

export type WireFormat = 'single-object' | 'schema-registry';

/** A Confluent-compatible Schema Registry, called over its REST API with Node's own HTTP client (nothing to install). */
export interface RegistryConnectionOptions {
  /**
   * The base URL of its Confluent-compatible API, e.g. `https://registry.example.com` or Apicurio's
   * `http://host:8080/apis/ccompat/v7`. A URL that answers, but not as a registry, fails the boot.
   */
  url: string;
  /** Basic (an API key and secret on Confluent Cloud) or bearer (a token, or a function that gives a fresh one). */
  auth?: { username: string; password: string } | { bearerToken: string | (() => string | Promise<string>) };
  /** TLS for an https URL: Node's options (`ca`, `cert`, `key`, `rejectUnauthorized`...). */
  tls?: { ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer; rejectUnauthorized?: boolean };
  /**
   * The subject of a topic's values: `topic` (TopicNameStrategy, default: `<topic>-value`), `record`
   * (RecordNameStrategy: the record's full name) or `topic-record` (TopicRecordNameStrategy: `<topic>-<full name>`).
   */
  subjectNameStrategy?: 'topic' | 'record' | 'topic-record';
  /**
   * Register a schema the library writes with when its subject does not have it yet. Default false: register at
   * deploy time (`kafka-eo schemas register`), so that a writer can never change a subject by itself.
   */
  autoRegister?: boolean;
  /** How long one request to the registry may take, its retries included, in ms. Default 10000. */
  requestTimeoutMs?: number;
  /**
   * How long the records of a schema id the registry says it does not know wait for it, in ms, from its first "not
   * found": a writer may register it moments later, or a registry replica lag behind the one the writer used. Their
   * unit of work is retried meanwhile as for a registry away (the partition paused, heartbeats going, the id asked
   * again at each retry, health naming it); after the wait, a record whose id the registry still does not know is
   * dead-lettered (`decode-failed`). A "not found" is never reused for another unit of work. Not waited for: an id
   * below one the registry gave this process more than this long ago (registries give ids in increasing order), and
   * any once the partition has waited this long for unknown ids within ten times this long. Default 30000; 0: no
   * wait; below `consumer.stallAfterMs`.
   */
  unknownIdWaitMs?: number;
  /**
   * How long the records of a JSON Schema or Protobuf writer schema wait when the package that reads it (ajv,
   * protobufjs) is not installed and the topic's own subject holds that schema (what the boot refuses, when the
   * registry answers then), in ms, from the first such record of the process: health names the package and its
   * install line meanwhile; after it, they are dead-lettered (`decode-failed`). A record of a schema the topic's
   * subject does not hold is dead-lettered at once. Default 600000 (10 minutes); 0: no wait.
   */
  missingPeerWaitMs?: number;
}

export interface ConsumerOptions {
  /**
   * The consumer group protocol: `classic` (default; JoinGroup and SyncGroup, every member's partitions given up at
   * each rebalance) or `consumer` (Kafka 4's KIP-848: the broker assigns, partitions move one at a time, each
   * revoked partition's worker drained first while the others go on). `consumer` needs `driver: 'platformatic'`
   * and a Kafka 4 broker; `sessionTimeout` and `heartbeatInterval` are then the broker's group settings
   * (`group.consumer.session.timeout.ms`, `group.consumer.heartbeat.interval.ms`). docs/drivers.md.
   */
  groupProtocol?: 'classic' | 'consumer';
  sessionTimeout?: number;
  heartbeatInterval?: number;
  rebalanceTimeout?: number;
  /**
   * How many partitions are handled at once (each one stays strictly in order, with its own transactional
   * producer and, while a unit of work runs, its own PostgreSQL connection). Default 64: every assigned
   * partition of a usual deployment. Size the DataSource's pool (`extra.max`) for it; the consumer warns at
   * assignment when the pool is smaller than the partitions it handles at once.
   */
  partitionsConsumedConcurrently?: number;
  /**
   * Bytes fetched per partition per fetch request. Default 524288 (512 KiB): with every partition handled at
   * once, each partition's fetched records are held in memory until handled, so this bounds the consumer's
   * memory (1 MiB per partition made consumer-app's peak RSS about 15% higher at 12 partitions:
   * docs/benchmarks.md). Keep it at least the largest record batch your producers write: a larger batch still
   * arrives whole, but only when its partition is the first with data in a fetch, so it may wait while other
   * partitions of the broker have records. 512 KiB is the largest batch the library itself writes. Raise it
   * too when records are larger than about 1 KB, so that a unit of work can fill `chunk.maxRecords`.
   */
  maxBytesPerPartition?: number;
  /**
   * Bytes of records the consumer holds across all its partitions at once (keys, values and headers): fetched and
   * decoded, waiting for their partition's worker, and in units of work. When they reach it, fetching waits (the
   * partitions are fetched again as units of work end): no record is skipped or dropped. Default 1048576 (1 MiB),
   * at least `maxBytesPerPartition`. Held can pass it by one record batch (Kafka answers a fetch with one batch at
   * least). This, not the partitions' count, sets what the consumer's records cost in memory: docs/configuration.md.
   */
  maxBytesInFlight?: number;
  maxWaitTimeInMs?: number;
  /**
   * A partition whose fetched records have waited this long without a commit is stalled: KafkaHealthIndicator
   * turns down and names it with its last error. Default 60000.
   */
  stallAfterMs?: number;
  /** Cap of the backoff of a partition retrying an infrastructure fault (it retries without end). Default 10000. */
  maxRetryDelayMs?: number;
  /**
   * How long one handler call may take, ms. A call that overruns fails its unit of work (its connection is closed,
   * so nothing it writes later counts) and counts as a failure of its record: after `isolation.maxFailures` the
   * record is dead-lettered (or its key parked) instead of being retried without end. Must be lower than
   * `inbox.idleInTransactionTimeoutMs`, which PostgreSQL would otherwise enforce by ending the unit's session.
   * Default five sixths of that timeout (25000 with the defaults).
   */
  handlerTimeoutMs?: number;
}

export interface IsolationOptions {
  /** Failed units of work of a record run alone before it is dead-lettered. Default 3. */
  maxFailures?: number;
  /** Wait before the first re-run of a record that failed alone, doubled after each failure up to `consumer.maxRetryDelayMs`. Default 500. */
  retryDelayMs?: number;
}

export interface InboxOptions {
  /** Apply the library's migrations at boot (default true). Set false to run them with your own TypeORM migrations. */
  runMigrations?: boolean;
  /**
   * Days an inbox row is kept after it was handled (processed, dead-lettered, replayed or discarded); the
   * retention job then deletes it, so that a duplicate arriving later is no longer recognised and a dead letter
   * no longer listed by `kafka-eo dlq` or the admin API (its record stays on the dead-letter topic). Rows of
   * parked records are kept until released, and so is every row whose record the group has not committed in
   * Kafka yet (its offset at or above the partition's committed offset). Default 7; a fraction is allowed.
   */
  retentionDays?: number;
  /** How often the retention job runs, ms (default one hour; 0 disables it). */
  retentionIntervalMs?: number;
  /** Rows deleted per statement by the retention job (default 1000). */
  retentionBatchSize?: number;
  /** `lock_timeout` of the claim, ms: how long a claim waits for a stalled instance's row locks (default 5000). */
  lockTimeoutMs?: number;
  /** `idle_in_transaction_session_timeout` of unit-of-work sessions, ms; at most the transaction timeout (default 30000). */
  idleInTransactionTimeoutMs?: number;
  /**
   * `statement_timeout` of unit-of-work sessions, ms: a statement (a handler's, or the library's own) that runs
   * longer is cancelled; a handler's counts as a failure of its record. Between `inbox.lockTimeoutMs` and
   * `inbox.idleInTransactionTimeoutMs`; default two thirds of the latter (20000 with the defaults). The library
   * also stops waiting for its own statements after this long plus a second, for a server that no longer answers.
   */
  statementTimeoutMs?: number;
  /**
   * `topic` (default): a message id is unique within its topic, so two topics may reuse one. `group`: unique
   * across every topic the group consumes (one event published to two topics is handled once).
   */
  deduplicationScope?: 'topic' | 'group';
}

export interface RetryOptions {
  /** Attempts in all, including the first (default 3). */
  attempts?: number;
  initialDelayMs?: number;
  maxDelayMs?: number;
  multiplier?: number;
}

/**
 * Non-blocking retries (docs/retries.md): a record whose in-place attempts failed moves to a retry topic
 * `<topic>.retry.<n>` inside its unit's Kafka transaction, and comes back to the same handler once its tier's
 * delay has passed, while the partition moves on. After the last tier, the dead-letter topic. Not with
 * @OrderedEvent (a retry topic lets later records of a key overtake the one waiting).
 */
export interface RetryTopicsOptions {
  /**
   * The delay of each tier, in order: milliseconds as a number, or text such as `'500ms'`, `'10s'`, `'1m'`,
   * `'2h'`. From 1 to 10 tiers, each from 100 ms to 7 days.
   */
  delays: Array<number | string>;
  /** Attempts in place (with the handler's retry backoff) on the topic and on each tier before the record moves on. Default: the handler's `retry.attempts`. */
  maxInPlaceAttempts?: number;
  /**
   * Errors that go straight to the dead-letter topic, skipping the tiers, besides those never retried (a
   * NonRetriableHandlerError, an error with `retriable: false`, a guard's or pipe's refusal, an event that
   * cannot be decoded or validated): instances of these classes.
   */
  deadLetterOn?: Array<abstract new (...args: any[]) => Error>;
}
