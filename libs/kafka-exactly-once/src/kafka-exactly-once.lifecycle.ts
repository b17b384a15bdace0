import {
  BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import type { DatabasePort } from './database/database.port';
import { typeormDatabase, type TypeOrmDatabasePort } from './database/typeorm.database';
import { ConsumerStatus, ExactlyOnceConsumer } from './engine/exactly-once.consumer';
import { brokerAnswered, isKafkaUnavailable } from './engine/error-classification';
import { wakeableSleep } from './engine/sleep';
import { DeadlineExceeded, withDeadline } from './engine/deadline';
import { FaultInjector } from './engine/fault-injector';
import { InvalidOptionsError } from './errors/invalid-options.error';
import { InboxRetention } from './inbox/inbox-retention';
import { InstanceReporter } from './reporting/instance-reporter';
import { OutboxOperations } from './outbox/outbox-operations';
import { dataSourceSql } from './admin/sql-client';
import { runInboxMigrations } from './inbox/inbox-migrator';
import { hardenPool } from './inbox/connection-pool';
import { KAFKA_CLIENT, RESOLVED_OPTIONS } from './kafka-exactly-once.constants';
import type { HandlerDefinition } from './engine/handler-definition';
import { KafkaExactlyOnceExplorer, type TransportHandlerSpec } from './kafka-exactly-once.explorer';
import type { ResolvedOptions } from './options/resolved-options';
import { checkReaders, warmUpIds } from './formats/registry-boot';
import { AmbientTransactions } from './transaction/ambient-transaction';
import { SchemaRegistry } from './formats/avro/schema-registry';
import { ReplayWorker } from './parking/replay-worker';
import { KafkaExactlyOnceMetrics } from './metrics/kafka-exactly-once.metrics';
import { KafkaExactlyOnceTracing } from './tracing/kafka-exactly-once.tracing';
import { KafkaAuthenticationError } from './errors/kafka-authentication.error';
import { groupConsumersOf, probeClient } from './client/choose-driver';
import { platformaticKafka } from './platformatic/load';
import { adminOf, assertKafkaJsFixesInForce, brokerSettings, type ClusterAdmin, ConfigResourceTypes, type KafkaClient, StableOffsets } from './kafkajs';
import { provisionRetryTopics } from './retry/retry-topics.provisioner';
import { createTopicsAndWait } from './kafka-topics';

/** How long the boot waits for Kafka to answer before the application starts without it. */
const BOOT_WAIT_MS = 10000;

/**
 * Where the start of the module's consumer stands: `not-started` (autoStart false, or a publish-only
 * application), `connecting` (checking the brokers and topics), `starting` (joining the group), `running`,
 * `stopped` (the application shut down before it ran).
 */
export type StartPhase = 'not-started' | 'connecting' | 'starting' | 'running' | 'stopped';

export interface StartStatus {
  phase: StartPhase;
  /** Why the last try failed (Kafka unreachable, a topic missing...), while the consumer does not run yet. */
  lastError?: string;
}

/**
 * Owns the module's runtime: discovers and checks the handlers at module init (fail fast), applies the inbox
 * migrations and starts the consumer at application bootstrap (in the background once the brokers' checks
 * passed, or when Kafka is away: see `start`), drains in-flight units of work before shutdown and disconnects
 * at shutdown.
 */
@Injectable()
export class KafkaExactlyOnceLifecycle implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('KafkaExactlyOnce');
  private handlers: HandlerDefinition[] = [];
  /** The application's @nestjs-cls/transactional, once looked for after the boot's init hooks (null: it has none). */
  private ambient?: AmbientTransactions | null;
  /** Set when the application's init hooks have run (its bootstrap began): every provider of it exists. */
  private initialized = false;
  /** The background look-up of the Schema Registry ids this module writes with (see warmUpIds). */
  private registryIds?: Promise<void>;
  private admin?: ClusterAdmin;
  private consumer?: ExactlyOnceConsumer;
  private retention?: InboxRetention;
  /** This instance's reports for the console of any instance (the whole group, its charts). */
  private reporter?: InstanceReporter;
  /** The retention job's reader of the group's committed offsets. */
  private retentionOffsets?: StableOffsets;
  private replays?: ReplayWorker;
  private database?: DatabasePort;
  private transport?: { owner: object; name: string; handlers: () => TransportHandlerSpec[] };
  private explored = false;
  /** The background start of the Kafka side: `checked` settles the boot's wait, `loop` ends with the tries. */
  private kafkaSide?: { checked: Promise<void>; loop: Promise<void> };
  private phase: StartPhase = 'connecting';
  /** The last try's error, while the consumer does not run. */
  private startError?: string;
  /** The start in progress or done (PostgreSQL side, then the boot's wait). */
  private starting?: Promise<void>;
  private stopRequested = false;
  private wake?: () => void;
  private markStopped!: () => void;
  /** Resolves when the application shuts down: ends the wait for a join. */
  private readonly stopped = new Promise<void>((resolve) => (this.markStopped = resolve));
  private markRunning!: () => void;
  /** Resolves when the consumer has joined its group; rejects when the application shuts down before. */
  private readonly running = new Promise<void>((resolve, reject) => {
    this.markRunning = resolve;
    void this.stopped.then(() => reject(new Error(`the application shut down before the consumer of group ${this.options.groupId} ran`)));
  });
  private probe?: KafkaClient;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(KAFKA_CLIENT) private readonly kafka: KafkaClient,
    private readonly explorer: KafkaExactlyOnceExplorer,
    private readonly registry: SchemaRegistry,
    private readonly moduleRef: ModuleRef,
    private readonly metrics: KafkaExactlyOnceMetrics,
    private readonly tracing: KafkaExactlyOnceTracing,
  ) {
    this.running.catch(() => undefined); // a shutdown before the join rejects it, whether anyone waits or not
  }

  /**
   * Called by a transport (KafkaExactlyOnceServer) when a Nest microservice takes it as its strategy, before the
   * application's init hooks: the @EventPattern handlers bound to it are consumed with the module's own, in its
   * consumer group.
   */
  useTransport(owner: object, name: string, handlers: () => TransportHandlerSpec[]): void {
    if (this.transport && this.transport.owner !== owner) {
      throw new InvalidOptionsError('transport', `is another ${this.transport.name} already; one KafkaExactlyOnceServer per module`);
    }
    if (this.explored) {
      throw new InvalidOptionsError(
        'transport',
        `${name} became a transport after the module had found its handlers (its @EventPattern handlers would not be consumed): connect the microservice (connectMicroservice) before the application initializes (app.init or app.listen)`,
      );
    }
    this.transport = { owner, name, handlers };
  }

  async onModuleInit(): Promise<void> {
    this.explored = true;
    this.handlers = this.explorer.explore(this.transport?.handlers() ?? []);
    for (const [topic, declared] of Object.entries(this.options.topics)) {
      if ((declared.format ?? 'avro') !== 'avro' || declared.schema === undefined) continue;
      if (!this.registry.has(declared.schema)) {
        const where = this.options.schemas.directory === '' ? 'the module has no schemas directory (option schemas)' : `it is not in the schemas directory (known: ${this.registry.names().join(', ')})`;
        throw new InvalidOptionsError(`topics["${topic}"].schema`, `names "${declared.schema}", and ${where}`);
      }
    }
    // Before anything consumes, relays or publishes (they start at bootstrap, after every module's init): on the
    // client they would all run on.
    await assertKafkaJsFixesInForce(this.kafka);
    // The driver's client (the consumer group's and the producers'): installed, and runnable on this Node.js.
    if (this.options.driver === 'platformatic') platformaticKafka();
  }

  async onApplicationBootstrap(): Promise<void> {
    this.initialized = true;
    const remote = this.registry.remote;
    if (remote) {
      // The URL a registry's API, each reader against its subject's latest schema (an incompatible one fails the
      // boot), and the ids this module writes with, looked up in the background until known.
      await checkReaders(remote, this.handlers.map((h) => ({ name: h.name, topic: h.topic, format: h.reader.format, schema: h.reader.schema, readsRegistry: h.reader.readsRegistry })), this.logger);
      this.registryIds = warmUpIds(remote, this.registry, this.options, this.logger, () => !this.stopRequested, new Set(this.handlers.map((h) => h.topic)));
    }
    if (!this.options.autoStart) return;
    await this.start();
  }

  /**
   * Starts consuming (called at bootstrap unless `autoStart: false`). The PostgreSQL side (pool settings,
   * migrations, the retention job) is done before it resolves; the Kafka side runs in the background, so that
   * the application serves HTTP and health while the consumer joins its group, and while Kafka is away:
   * - Kafka answers: the checks against the brokers run first and a wrong configuration (a missing topic, a
   *   timeout over the broker's bounds, refused credentials) rejects, failing the boot as before; once they
   *   passed it resolves, and the consumer joins its group meanwhile.
   * - Kafka does not answer (or not within 10 s): it resolves with a warning, and the consumer starts when Kafka
   *   answers, tried again without end with capped backoff. A wrong configuration found then is logged as an
   *   error and reported by the health indicator, and tried again too.
   * {@link whenRunning} waits for the consumer to run.
   */
  start(): Promise<void> {
    const starting = (this.starting ??= this.startOnce());
    // A boot that failed may be tried again (autoStart: false, after fixing what it said).
    starting.catch(() => {
      if (this.starting === starting) this.starting = undefined;
    });
    return starting;
  }

  private async startOnce(): Promise<void> {
    if (this.stopRequested) return; // the application is shutting down
    if (this.handlers.length === 0) {
      // A publish-only application needs neither the inbox nor a consumer.
      if (!this.options.publisher && !this.options.outbox) this.logger.warn('no @IdempotentHandler found and neither a publisher nor an outbox configured: this module does nothing');
      return;
    }
    const dataSource = this.getDatabase();
    const hardened = hardenPool(dataSource, Math.max(5000, this.options.inbox.statementTimeoutMs));
    if (hardened.length > 0) this.logger.log(`PostgreSQL pool: set ${hardened.join(' and ')} (the application left them unset; a server that stops answering must end as an error)`);
    if (this.options.inbox.runMigrations) await runInboxMigrations(dataSource);
    if (this.stopRequested) return; // shut down during the migrations
    // The data layer's one-off work (Prisma's first statement) before the first unit of work, not in it.
    await dataSource.warmUp?.().catch((err: Error) => this.logger.warn(`warming up the ${dataSource.kind} data layer failed (its first unit of work does it instead): ${err.message}`));
    const offsets = (this.retentionOffsets = new StableOffsets(this.kafka));
    this.retention = new InboxRetention(dataSource, this.options.groupId, (topic, partitions) => offsets.committedOffsets(this.options.groupId, topic, partitions), {
      ...this.options.inbox,
      operationsRetentionDays: this.options.operations.retentionDays,
    });
    this.retention.start();
    const outbox = new OutboxOperations(dataSourceSql(dataSource));
    this.reporter = new InstanceReporter(dataSource, { groupId: this.options.groupId, clientId: this.options.kafka.clientId ?? '', intervalMs: this.options.operations.reportIntervalMs }, {
      status: () => this.consumer?.getStatus(),
      startStatus: () => this.startStatus(),
      samples: () => this.consumer?.samples,
      metrics: this.metrics.sources,
      outboxBacklog: () => outbox.backlog(),
    });
    this.reporter.start();
    let settle!: { resolve: () => void; reject: (err: Error) => void };
    const checked = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    this.kafkaSide = { checked, loop: this.runKafkaSide(dataSource, settle) };
    await checked;
  }

  /**
   * Resolves once the consumer has joined its group and runs (at once in an application without handlers);
   * rejects after `timeoutMs`, naming what the start is waiting for, or when the application shuts down
   * first. For tests, and for start-up scripts that must not go on before the consumer runs.
   */
  whenRunning(timeoutMs = 60000): Promise<void> {
    if (this.explored && this.handlers.length === 0) return Promise.resolve();
    return withDeadline(this.running, timeoutMs).catch((err: Error) => {
      if (!(err instanceof DeadlineExceeded)) throw err;
      const { phase, lastError } = this.startStatus();
      throw new Error(`the consumer of group ${this.options.groupId} is not running after ${timeoutMs} ms (${phase}${lastError ? `; last error: ${lastError}` : ''})`);
    });
  }

  /** Where the start of the Kafka side stands, for health checks. */
  startStatus(): StartStatus {
    if (!this.kafkaSide) return { phase: this.stopRequested ? 'stopped' : 'not-started' };
    // While the group is joined: why the last join failed (a group ACL, a coordinator that cannot load...).
    const lastError = this.startError ?? (this.phase === 'starting' ? this.consumer?.getStatus().lastError : undefined);
    return { phase: this.phase, ...(lastError ? { lastError } : {}) };
  }

  /** Tries to start the Kafka side until it runs or the application stops; settles the boot's wait on the way. */
  private async runKafkaSide(dataSource: DatabasePort, boot: { resolve: () => void; reject: (err: Error) => void }): Promise<void> {
    let booting = true;
    const release = () => {
      if (!booting) return;
      booting = false;
      boot.resolve();
    };
    // A broker that accepts connections but does not answer (stalled, not dead) must not hold the boot.
    const bootWait = setTimeout(() => {
      if (!booting) return;
      this.logger.warn(`Kafka has not answered within ${BOOT_WAIT_MS / 1000} s: the application starts without waiting; the consumer of group ${this.options.groupId} starts when Kafka answers`);
      release();
    }, BOOT_WAIT_MS);
    bootWait.unref();
    let waitingSince = 0;
    for (let attempt = 1; !this.stopRequested; attempt++) {
      try {
        this.phase = 'connecting';
        const consumer = await this.startKafkaSide(dataSource, () => {
          this.phase = 'starting';
          this.startError = undefined;
          release();
        });
        clearTimeout(bootWait);
        if (this.stopRequested || !consumer) break;
        // Launched: from here the consumer rejoins and restarts by itself (KafkaJS, or the library's recovery).
        await Promise.race([consumer.joined, this.stopped]);
        if (this.stopRequested) break;
        this.phase = 'running';
        this.startError = undefined;
        if (attempt > 1) this.logger.log(`consumer of group ${this.options.groupId} started (attempt ${attempt}${waitingSince ? `, after ${Math.round((Date.now() - waitingSince) / 1000)} s without Kafka` : ''})`);
        this.markRunning();
        return;
      } catch (caught) {
        await this.stopKafkaSide();
        if (this.stopRequested) break;
        // Waiting does not fix refused credentials.
        const refused = KafkaAuthenticationError.from(caught, this.options.kafka);
        const err = (refused ?? caught) as Error;
        const unreachable = !refused && isKafkaUnavailable(caught);
        if (booting && !unreachable) {
          // A wrong configuration, found while the boot waits: fail the boot, naming it.
          booting = false;
          clearTimeout(bootWait);
          this.kafkaSide = undefined;
          await this.stopRetention();
          boot.reject(err);
          return;
        }
        this.startError = err.message;
        const delay = unreachable ? Math.min(5000, 250 * 2 ** attempt) : Math.min(30000, 1000 * 2 ** attempt);
        const answered = brokerAnswered(caught);
        if (booting) {
          if (!answered) waitingSince = Date.now();
          this.logger.warn(
            answered
              ? `Kafka is not ready (${err.message}): the application starts; the consumer of group ${this.options.groupId} starts when Kafka is (tried again every 5 s at most)`
              : `Kafka is not available (${err.message}): the application starts without it; the consumer of group ${this.options.groupId} starts when Kafka answers (tried again every 5 s at most)`,
          );
          clearTimeout(bootWait);
          release();
        } else if (!unreachable) {
          this.logger.error(`the consumer of group ${this.options.groupId} cannot start: ${err.message} (tried again in ${delay / 1000} s)`);
        } else if (attempt === 4 || attempt === 16 || attempt % 60 === 0) {
          // About 4 s and 1 min in, then every 5 min: an outage is said again now and then, not at every try.
          if (!answered) waitingSince ||= Date.now();
          this.logger.warn(`the consumer of group ${this.options.groupId} is still waiting for Kafka (${err.message}; attempt ${attempt})`);
        }
        await this.pause(delay);
      }
    }
    clearTimeout(bootWait);
    this.phase = 'stopped';
    release();
  }

  /**
   * One try: checks against the brokers and topics (then `checked`), the consumer's launch, the replay worker.
   * Resolves the consumer (undefined when the application stopped meanwhile); its join follows.
   */
  private async startKafkaSide(dataSource: DatabasePort, checked: () => void): Promise<ExactlyOnceConsumer | undefined> {
    // The loop above retries: the probe's checks fail fast rather than hold a boot or a shutdown.
    this.probe ??= probeClient(this.options);
    const probe = adminOf(this.probe, { retry: { retries: 0 } });
    let limits: Map<string, number>;
    try {
      await probe.connect();
      await this.checkBrokerLimits(probe);
      await this.checkTopics(probe);
      limits = await this.topicLimits(probe);
    } finally {
      await probe.disconnect().catch(() => undefined);
    }
    checked();
    const admin = (this.admin = adminOf(this.kafka));
    await admin.connect();
    if (this.stopRequested) return undefined;
    const faults = new FaultInjector();
    const consumer = (this.consumer = new ExactlyOnceConsumer(this.kafka, groupConsumersOf(this.options.driver, this.kafka, this.options.kafka), admin, dataSource, this.registry, this.options, faults, this.handlers, limits, this.metrics, this.tracing, this.ambientTransactions()));
    this.metrics.attach({ partitions: () => consumer.getStatus().partitions ?? [], retryTiers: () => consumer.getStatus().retryTiers });
    try {
      await consumer.start();
    } catch (err) {
      // A consumer that failed half-way through its start is stopped before the next try.
      await consumer.stop().catch(() => undefined);
      throw err;
    }
    if (this.stopRequested) return undefined;
    this.replays = new ReplayWorker(this.kafka, dataSource, this.registry, this.options, this.handlers, limits, faults, this.metrics, this.tracing, this.ambientTransactions());
    this.replays.start();
    return consumer;
  }

  /** Undoes a try that failed (nothing is left connected). */
  private async stopKafkaSide(): Promise<void> {
    await this.replays?.stop().catch(() => undefined);
    this.replays = undefined;
    await this.consumer?.disconnect().catch(() => undefined);
    this.consumer = undefined;
    await this.admin?.disconnect().catch(() => undefined);
    this.admin = undefined;
  }

  /** Waits before the next try; shutting down ends the wait at once. */
  private pause(ms: number): Promise<void> {
    return wakeableSleep(ms, (wake) => (this.wake = wake));
  }

  /**
   * Timeouts the broker bounds: a transaction timeout over `transaction.max.timeout.ms` fails every
   * InitProducerId, a session timeout outside `group.min/max.session.timeout.ms` fails every join. Said at
   * boot, naming the option, instead of as a retry loop later.
   */
  private async checkBrokerLimits(admin: ClusterAdmin): Promise<void> {
    const settings = await brokerSettings(admin, ['transaction.max.timeout.ms', 'group.min.session.timeout.ms', 'group.max.session.timeout.ms'] as const);
    if (!settings) return;
    const maxTransaction = settings['transaction.max.timeout.ms'];
    if (maxTransaction > 0 && this.options.transactionTimeoutMs > maxTransaction) {
      throw new InvalidOptionsError('transactionTimeoutMs', `is ${this.options.transactionTimeoutMs}, over the broker's transaction.max.timeout.ms (${maxTransaction}): lower it, or raise the broker setting`);
    }
    const [minSession, maxSession] = [settings['group.min.session.timeout.ms'], settings['group.max.session.timeout.ms']];
    const session = this.options.consumer.sessionTimeout;
    if ((minSession > 0 && session < minSession) || (maxSession > 0 && session > maxSession)) {
      throw new InvalidOptionsError('consumer.sessionTimeout', `is ${session}, outside the broker's group.min.session.timeout.ms..group.max.session.timeout.ms (${minSession}..${maxSession})`);
    }
  }

  /** `max.message.bytes` of every topic the handlers write to (outputs and dead letters). */
  private async topicLimits(admin: ClusterAdmin): Promise<Map<string, number>> {
    const outputs = Object.keys(this.options.topics).map((t) => `${this.options.topicPrefix}${t}`);
    const deadLetters = this.handlers.map((h) => `${h.topic}${this.options.deadLetter.topicSuffix}`);
    const retryTopics = this.handlers.flatMap((h) => h.retryTopics?.topics ?? []);
    return maxMessageBytes(admin, [...new Set([...outputs, ...deadLetters, ...retryTopics])]);
  }

  async beforeApplicationShutdown(signal?: string): Promise<void> {
    // No more tries to start; a start or a try in flight ends first (what it started is stopped below).
    this.stopRequested = true;
    this.wake?.();
    this.markStopped();
    await this.starting?.catch(() => undefined);
    await this.kafkaSide?.loop;
    await this.replays?.stop();
    if (this.consumer) {
      this.logger.log(`shutting down${signal ? ` (${signal})` : ''}: no more fetches, finishing the unit of work in flight`);
      await this.consumer.stop();
      this.logger.log('consumer stopped: in-flight work committed or rolled back');
    }
    await this.stopRetention();
    await this.registryIds;
  }

  private async stopRetention(): Promise<void> {
    await this.reporter?.stop();
    await this.retention?.stop();
    await this.retentionOffsets?.disconnect();
  }

  async onApplicationShutdown(): Promise<void> {
    this.metrics.detach();
    await this.consumer?.disconnect();
    await this.admin?.disconnect().catch(() => undefined);
    if (this.consumer) this.logger.log('disconnected from Kafka');
  }

  /** The consumer group of the application's handlers ('' when it only publishes). */
  get groupId(): string {
    return this.options.groupId;
  }

  /** The topics the group's handlers consume, each with its retry tiers (the console's open transactions). */
  consumedTopics(): Array<{ topic: string; tiers: string[] }> {
    return this.handlers.map((h) => ({ topic: h.topic, tiers: h.retryTopics?.topics ?? [] }));
  }

  /** This instance's id in the reports every console of the group reads (undefined before the start, or when off). */
  get instanceId(): string | undefined {
    return this.reporter && this.options.operations.reportIntervalMs > 0 ? this.reporter.instanceId : undefined;
  }

  /** Each retry tier's topic with the topic whose records it retries (the console tells tiers from topics by it). */
  retryTierTopics(): Array<{ topic: string; retriesOf: string }> {
    return this.handlers.flatMap((h) => (h.retryTopics?.topics ?? []).map((topic) => ({ topic, retriesOf: h.topic })));
  }

  /** The consumer's state, for health checks. */
  status(stallAfterMs?: number): ConsumerStatus | undefined {
    return this.consumer?.getStatus(stallAfterMs);
  }

  /**
   * The application's @nestjs-cls/transactional (see AmbientTransactions), unless `ambientTransactions: false`.
   * Looked for again at each call until the application's bootstrap began, then remembered: a look made
   * earlier (from another provider's init hook) may come before the application's TransactionHost exists, and
   * a miss remembered then would have handlers lend nothing for the process's life.
   */
  ambientTransactions(): AmbientTransactions | undefined {
    const config = this.options.ambientTransactions;
    if (!config) return undefined;
    if (this.ambient !== undefined) return this.ambient ?? undefined;
    const found = AmbientTransactions.detect(this.getDataSource(), config.connectionName, this.logger, this.options.dataSourceName);
    if (!this.initialized) return found;
    this.ambient = found ?? null;
    if (found && !found.refusal) this.logger.log(`@nestjs-cls/transactional found${config.connectionName ? ` (${config.connectionName})` : ''}: handlers lend it their unit of work's transaction, and Outbox.add joins its transaction`);
    return found;
  }

  /**
   * The module's data layer: the `database` option, else the TypeORM DataSource of `TypeOrmModule`
   * (`dataSourceName`), as it always was.
   */
  getDatabase(): DatabasePort {
    if (this.database) return this.database;
    const given = this.options.database;
    if (given) {
      given.configure?.({ handlerTimeoutMs: this.options.consumer.handlerTimeoutMs });
      return (this.database = given);
    }
    let token: unknown;
    try {
      // NOTE: @nestjs/typeorm is needed only when the module runs on TypeORM (no `database` option).
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      token = (require('@nestjs/typeorm') as { getDataSourceToken(name?: string): unknown }).getDataSourceToken(this.options.dataSourceName);
    } catch {
      throw new InvalidOptionsError(
        'database',
        'is not set, and @nestjs/typeorm is not installed: give the module its data layer (database: prismaDatabase(...), drizzleDatabase(...), kyselyDatabase(...) or typeormDatabase(dataSource))',
      );
    }
    let dataSource: DataSource;
    try {
      dataSource = this.moduleRef.get<DataSource>(token as string, { strict: false });
    } catch {
      throw new InvalidOptionsError(
        'dataSourceName',
        `names a TypeORM DataSource (${String(this.options.dataSourceName ?? 'default')}) that is not registered: import TypeOrmModule.forRoot(...) in the application, or give the module its data layer with the database option`,
      );
    }
    return (this.database = typeormDatabase(dataSource));
  }

  /** The TypeORM DataSource the module runs on, when its data layer is TypeORM. */
  getDataSource(): DataSource | undefined {
    const database = this.getDatabase();
    return database.kind === 'typeorm' ? (database as TypeOrmDatabasePort).dataSource : undefined;
  }


  /**
   * Input and declared output topics must exist (a typo would otherwise stop the line at runtime); each input
   * topic's dead-letter topic is created with the same number of partitions when missing, and so are the retry
   * topics of handlers that have them.
   */
  private async checkTopics(admin: ClusterAdmin): Promise<void> {
    const existing = new Set(await admin.listTopics());
    const inputs = this.handlers.map((h) => h.topic);
    const outputs = Object.keys(this.options.topics).map((t) => `${this.options.topicPrefix}${t}`);
    const missing = [...new Set([...inputs, ...outputs])].filter((t) => !existing.has(t));
    if (missing.length > 0) {
      throw new Error(`Kafka topic(s) ${missing.join(', ')} do not exist: create them before starting (the library does not create input or output topics)`);
    }
    const { topics } = await admin.fetchTopicMetadata({ topics: inputs });
    const inputLimits = await maxMessageBytes(admin, inputs);
    const deadLetters = topics
      .map((t) => ({
        topic: `${t.name}${this.options.deadLetter.topicSuffix}`,
        numPartitions: t.partitions.length,
        // Room for the dead-letter headers on top of the largest record the input topic accepts.
        configEntries: [{ name: 'max.message.bytes', value: String((inputLimits.get(t.name) || 1048588) + 65536) }],
      }))
      .filter((t) => !existing.has(t.topic));
    if (deadLetters.length > 0) {
      await createTopicsAndWait(admin, deadLetters);
      this.logger.log(`created dead-letter topic(s) ${deadLetters.map((t) => t.topic).join(', ')}`);
    }
    await provisionRetryTopics(admin, this.handlers, existing, this.logger);
  }

}

/** `max.message.bytes` of each topic, in one request; a topic whose value cannot be read is left out. */
async function maxMessageBytes(admin: ClusterAdmin, topics: string[]): Promise<Map<string, number>> {
  const limits = new Map<string, number>();
  if (topics.length === 0) return limits;
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['max.message.bytes'] })),
  });
  for (const resource of resources) {
    const value = Number(resource.configEntries.find((e) => e.configName === 'max.message.bytes')?.configValue);
    if (Number.isInteger(value) && value > 0) limits.set(resource.resourceName, value);
  }
  return limits;
}
