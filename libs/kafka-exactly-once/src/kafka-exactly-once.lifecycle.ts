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
import { getDataSourceToken } from '@nestjs/typeorm';
import { Admin, ConfigResourceTypes, Kafka } from 'kafkajs';
import type { DataSource } from 'typeorm';
import { ConsumerStatus, ExactlyOnceConsumer } from './engine/exactly-once.consumer';
import { isConnectionFault } from './engine/error-classification';
import { sleep } from './engine/sleep';
import { FaultInjector } from './engine/fault-injector';
import { InvalidOptionsError } from './errors/invalid-options.error';
import { InboxRetention } from './inbox/inbox-retention';
import { StableOffsets } from './engine/stable-offsets';
import { runInboxMigrations } from './inbox/inbox-migrator';
import { hardenPool } from './inbox/connection-pool';
import { KAFKA_CLIENT, RESOLVED_OPTIONS } from './kafka-exactly-once.constants';
import type { HandlerDefinition } from './engine/handler-definition';
import { KafkaExactlyOnceExplorer, type TransportHandlerSpec } from './kafka-exactly-once.explorer';
import type { ResolvedOptions } from './options/resolved-options';
import { SchemaRegistry } from './serde/schema-registry';
import { ReplayWorker } from './parking/replay-worker';
import { KafkaExactlyOnceMetrics } from './metrics/kafka-exactly-once.metrics';
import { KafkaExactlyOnceTracing } from './tracing/kafka-exactly-once.tracing';
import { KafkaAuthenticationError } from './errors/kafka-authentication.error';

/**
 * Owns the module's runtime: discovers and checks the handlers at module init (fail fast), applies the inbox
 * migrations and starts the consumer at application bootstrap, drains in-flight units of work before
 * shutdown and disconnects at shutdown.
 */
@Injectable()
export class KafkaExactlyOnceLifecycle implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('KafkaExactlyOnce');
  private handlers: HandlerDefinition[] = [];
  private admin?: Admin;
  private consumer?: ExactlyOnceConsumer;
  private retention?: InboxRetention;
  /** The retention job's reader of the group's committed offsets. */
  private retentionOffsets?: StableOffsets;
  private replays?: ReplayWorker;
  private dataSource?: DataSource;
  private transport?: { owner: object; name: string; handlers: () => TransportHandlerSpec[] };
  private explored = false;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
    @Inject(KAFKA_CLIENT) private readonly kafka: Kafka,
    private readonly explorer: KafkaExactlyOnceExplorer,
    private readonly registry: SchemaRegistry,
    private readonly moduleRef: ModuleRef,
    private readonly metrics: KafkaExactlyOnceMetrics,
    private readonly tracing: KafkaExactlyOnceTracing,
  ) {}

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

  onModuleInit(): void {
    this.explored = true;
    this.handlers = this.explorer.explore(this.transport?.handlers() ?? []);
    for (const [topic, declared] of Object.entries(this.options.topics)) {
      if (!this.registry.has(declared.schema)) {
        throw new InvalidOptionsError(`topics["${topic}"].schema`, `names "${declared.schema}", which is not in the schemas directory (known: ${this.registry.names().join(', ')})`);
      }
    }
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.autoStart) return;
    await this.start();
  }

  /** Starts consuming (called at bootstrap unless `autoStart: false`). */
  async start(): Promise<void> {
    if (this.handlers.length === 0) {
      // A publish-only application needs neither the inbox nor a consumer.
      if (!this.options.publisher && !this.options.outbox) this.logger.warn('no @IdempotentHandler found and neither a publisher nor an outbox configured: this module does nothing');
      return;
    }
    const dataSource = this.getDataSource();
    const hardened = hardenPool(dataSource, Math.max(5000, this.options.inbox.statementTimeoutMs));
    if (hardened.length > 0) this.logger.log(`PostgreSQL pool: set ${hardened.join(' and ')} (the application left them unset; a server that stops answering must end as an error)`);
    if (this.options.inbox.runMigrations) await runInboxMigrations(dataSource);
    const offsets = (this.retentionOffsets = new StableOffsets(this.kafka));
    this.retention = new InboxRetention(dataSource, this.options.groupId, (topic, partitions) => offsets.committedOffsets(this.options.groupId, topic, partitions), {
      ...this.options.inbox,
      operationsRetentionDays: this.options.operations.retentionDays,
    });
    this.retention.start();
    const admin = this.kafka.admin();
    try {
      await this.retryStart('connecting to Kafka', () => admin.connect());
      // On a cluster, topics created a moment ago reach every broker's metadata a little later: retry what the
      // broker says is retriable (a missing topic is not: it is an Error of its own).
      const limits = await this.retryStart('checking the brokers and topics', async () => {
        await this.checkBrokerLimits(admin);
        await this.checkTopics(admin);
        return this.topicLimits(admin);
      });
      const faults = new FaultInjector();
      this.consumer = new ExactlyOnceConsumer(this.kafka, admin, dataSource, this.registry, this.options, faults, this.handlers, limits, this.metrics, this.tracing);
      const consumer = this.consumer;
      this.metrics.attach({ partitions: () => consumer.getStatus().partitions ?? [] });
      await this.startConsumer(this.consumer);
      this.replays = new ReplayWorker(this.kafka, dataSource, this.registry, this.options, this.handlers, limits, faults, this.metrics, this.tracing);
      this.replays.start();
    } catch (err) {
      // A failed start must not leave connections behind (the application is not going to shut us down).
      await this.replays?.stop().catch(() => undefined);
      this.replays = undefined;
      await this.consumer?.disconnect().catch(() => undefined);
      this.consumer = undefined;
      await admin.disconnect().catch(() => undefined);
      await this.stopRetention();
      throw err;
    }
    this.admin = admin;
  }

  private async retryStart<T>(what: string, work: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + 60000;
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (err) {
        // Waiting does not fix refused credentials: fail the boot now, naming them.
        const refused = KafkaAuthenticationError.from(err, this.options.kafka);
        if (refused) throw refused;
        if (!isConnectionFault(err) || Date.now() > deadline) throw err;
        this.logger.warn(`${what} failed (${(err as Error).message}); retrying (attempt ${attempt})`);
        await sleep(Math.min(5000, 250 * 2 ** attempt));
      }
    }
  }

  /**
   * Topics created a moment ago may not be served by their leaders yet ("This server does not host this
   * topic-partition"): retry the start for retriable broker errors instead of failing the application.
   */
  private startConsumer(consumer: ExactlyOnceConsumer): Promise<void> {
    return this.retryStart('starting the consumer', async () => {
      try {
        await consumer.start();
      } catch (err) {
        // A consumer that failed half-way through its start is stopped before the next try.
        await consumer.stop().catch(() => undefined);
        await consumer.disconnect().catch(() => undefined);
        throw err;
      }
    });
  }

  /**
   * Timeouts the broker bounds: a transaction timeout over `transaction.max.timeout.ms` fails every
   * InitProducerId, a session timeout outside `group.min/max.session.timeout.ms` fails every join. Said at
   * boot, naming the option, instead of as a retry loop later.
   */
  private async checkBrokerLimits(admin: Admin): Promise<void> {
    const { brokers } = await admin.describeCluster();
    if (brokers.length === 0) return;
    const names = ['transaction.max.timeout.ms', 'group.min.session.timeout.ms', 'group.max.session.timeout.ms'];
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.BROKER, name: String(brokers[0].nodeId), configNames: names }],
    });
    const value = (name: string) => Number(resources[0]?.configEntries.find((e) => e.configName === name)?.configValue);
    const maxTransaction = value('transaction.max.timeout.ms');
    if (maxTransaction > 0 && this.options.transactionTimeoutMs > maxTransaction) {
      throw new InvalidOptionsError('transactionTimeoutMs', `is ${this.options.transactionTimeoutMs}, over the broker's transaction.max.timeout.ms (${maxTransaction}): lower it, or raise the broker setting`);
    }
    const [minSession, maxSession] = [value('group.min.session.timeout.ms'), value('group.max.session.timeout.ms')];
    const session = this.options.consumer.sessionTimeout;
    if ((minSession > 0 && session < minSession) || (maxSession > 0 && session > maxSession)) {
      throw new InvalidOptionsError('consumer.sessionTimeout', `is ${session}, outside the broker's group.min.session.timeout.ms..group.max.session.timeout.ms (${minSession}..${maxSession})`);
    }
  }

  /** `max.message.bytes` of every topic the handlers write to (outputs and dead letters). */
  private async topicLimits(admin: Admin): Promise<Map<string, number>> {
    const outputs = Object.keys(this.options.topics).map((t) => `${this.options.topicPrefix}${t}`);
    const deadLetters = this.handlers.map((h) => `${h.topic}${this.options.deadLetter.topicSuffix}`);
    return maxMessageBytes(admin, [...new Set([...outputs, ...deadLetters])]);
  }

  /**
   * An @OrderedEvent key function that is not the record key can spread one ordering key over several
   * partitions, whose records are then not ordered against each other. Said once at boot, per handler.
   */
  async beforeApplicationShutdown(signal?: string): Promise<void> {
    await this.replays?.stop();
    if (this.consumer) {
      this.logger.log(`shutting down${signal ? ` (${signal})` : ''}: no more fetches, finishing the unit of work in flight`);
      await this.consumer.stop();
      this.logger.log('consumer stopped: in-flight work committed or rolled back');
    }
    await this.stopRetention();
  }

  private async stopRetention(): Promise<void> {
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

  /** The consumer's state, for health checks. */
  status(stallAfterMs?: number): ConsumerStatus | undefined {
    return this.consumer?.getStatus(stallAfterMs);
  }

  getDataSource(): DataSource {
    if (this.dataSource) return this.dataSource;
    const token = getDataSourceToken(this.options.dataSourceName);
    try {
      this.dataSource = this.moduleRef.get<DataSource>(token, { strict: false });
    } catch {
      throw new InvalidOptionsError(
        'dataSourceName',
        `names a TypeORM DataSource (${String(this.options.dataSourceName ?? 'default')}) that is not registered: import TypeOrmModule.forRoot(...) in the application`,
      );
    }
    return this.dataSource;
  }

  /**
   * Input and declared output topics must exist (a typo would otherwise stop the line at runtime); each input
   * topic's dead-letter topic is created with the same number of partitions when missing.
   */
  private async checkTopics(admin: Admin): Promise<void> {
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
      await admin.createTopics({ topics: deadLetters, waitForLeaders: true });
      await waitForTopicLeaders(admin, deadLetters.map((t) => t.topic));
      this.logger.log(`created dead-letter topic(s) ${deadLetters.map((t) => t.topic).join(', ')}`);
    }
  }

}

/** `max.message.bytes` of each topic, in one request; a topic whose value cannot be read is left out. */
async function maxMessageBytes(admin: Admin, topics: string[]): Promise<Map<string, number>> {
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

/**
 * Waits until every partition of the topics has a leader in the metadata: a topic that was just created may
 * not be served yet, and a consumer or producer using it at once fails.
 */
export async function waitForTopicLeaders(admin: Admin, topics: string[], timeoutMs = 30000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const metadata = await admin.fetchTopicMetadata({ topics });
      if (metadata.topics.length === topics.length && metadata.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    if (Date.now() > deadline) throw new Error(`topics ${topics.join(', ')} have no leader after ${timeoutMs} ms`);
    await sleep(200);
  }
}
