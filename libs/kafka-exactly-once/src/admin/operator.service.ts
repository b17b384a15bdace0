import { Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { adminOf, brokerSettings, type KafkaClient, logRequestsOf } from '../kafkajs';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { InboxHealthIndicator } from '../health/inbox.health-indicator';
import { KafkaHealthIndicator } from '../health/kafka.health-indicator';
import { OutboxHealthIndicator } from '../health/outbox.health-indicator';
import { PublisherHealthIndicator } from '../health/publisher.health-indicator';
import type { HealthResult } from '../health/health-result';
import { KAFKA_CLIENT, RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import type { ResolvedOptions } from '../options/resolved-options';
import { Outbox } from '../outbox/outbox';
import { OutboxOperations } from '../outbox/outbox-operations';
import { EventPublisher } from '../publishing/event-publisher';
import { SchemaRegistry } from '../formats/avro/schema-registry';
import { MessageStories } from './message-story';
import { OpenTransactions } from './open-transactions';
import { OperatorOverview } from './operator-overview';
import { readHistory, type HistoryDocument, type HistoryQuery } from './group-history';
import { OperatorStore } from './operator-store';
import { BulkOperations } from './bulk/bulk-operations';
import { dataSourceSql, type SqlClient } from './sql-client';

/**
 * The operator tools of the application's consumer group, on its DataSource (created at first use): the
 * OperatorStore, the message stories, the outbox's operations and the overview, the same code `kafka-eo` runs.
 * The KafkaExactlyOnceModule is found anywhere in the application (it need not be imported into this module).
 */
@Injectable()
export class OperatorService implements OnModuleInit, OnApplicationShutdown {
  private cached?: { sql: SqlClient; store: OperatorStore; stories: MessageStories; outbox: OutboxOperations };
  private overviewReader?: OperatorOverview;
  private bulkOperations?: BulkOperations;
  private transactionsReader?: OpenTransactions;

  constructor(private readonly moduleRef: ModuleRef) {}

  /** Fails the boot, not the first request, when the application has no KafkaExactlyOnceModule with a group. */
  onModuleInit(): void {
    this.lifecycle();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.overviewReader?.close();
    await this.transactionsReader?.close();
  }

  get store(): OperatorStore {
    return this.tools().store;
  }

  get stories(): MessageStories {
    return this.tools().stories;
  }

  get outbox(): OutboxOperations {
    return this.tools().outbox;
  }

  /** The group's bulk actions (docs/console.md, Bulk actions), on the same DataSource. */
  get bulk(): BulkOperations {
    this.bulkOperations ??= new BulkOperations(this.tools().sql, this.lifecycle().groupId);
    return this.bulkOperations;
  }

  /** The group's samples over a range (the console's charts). */
  history(query: HistoryQuery): Promise<HistoryDocument> {
    const lifecycle = this.lifecycle();
    return readHistory(this.tools().sql, lifecycle.groupId, query, lifecycle.retryTierTopics());
  }

  get overview(): OperatorOverview {
    if (this.overviewReader) return this.overviewReader;
    const lifecycle = this.lifecycle();
    const options = this.find<ResolvedOptions>(RESOLVED_OPTIONS);
    const indicators: Record<string, () => Promise<HealthResult> | HealthResult> = {};
    const kafkaHealth = this.find(KafkaHealthIndicator);
    const inboxHealth = this.find(InboxHealthIndicator);
    if (kafkaHealth) indicators.kafka = () => kafkaHealth.isHealthy('kafka');
    if (inboxHealth) indicators.inbox = () => inboxHealth.isHealthy('inbox');
    const publisher = options?.publisher ? this.find(EventPublisher) : undefined;
    const publisherHealth = options?.publisher ? this.find(PublisherHealthIndicator) : undefined;
    if (publisherHealth) indicators.publisher = () => publisherHealth.isHealthy('publisher');
    const outbox = options?.outbox ? this.find(Outbox) : undefined;
    const outboxHealth = options?.outbox ? this.find(OutboxHealthIndicator) : undefined;
    if (outboxHealth) indicators.outbox = () => outboxHealth.isHealthy('outbox');
    this.overviewReader = new OperatorOverview({
      lifecycle,
      kafka: this.find<KafkaClient>(KAFKA_CLIENT)!,
      sql: this.tools().sql,
      outbox: this.tools().outbox,
      publisher,
      relay: outbox ? () => outbox.relayStatus() : undefined,
      indicators,
    });
    return this.overviewReader;
  }

  /** The open transactions of the group's input and output partitions, and the abort of a hanging one. */
  get transactions(): OpenTransactions {
    if (this.transactionsReader) return this.transactionsReader;
    const lifecycle = this.lifecycle();
    const options = this.find<ResolvedOptions>(RESOLVED_OPTIONS)!;
    const consumed = lifecycle.consumedTopics().flatMap((t) => [t.topic, ...t.tiers]);
    const written = [
      ...Object.keys(options.topics).map((t) => `${options.topicPrefix}${t}`),
      ...lifecycle.consumedTopics().map((t) => `${t.topic}${options.deadLetter.topicSuffix}`),
      ...(options.outbox ? [options.outbox.checkpointTopic] : []),
    ];
    this.transactionsReader = new OpenTransactions({
      requests: logRequestsOf(this.find<KafkaClient>(KAFKA_CLIENT)!),
      sql: this.tools().sql,
      store: this.tools().store,
      ids: { prefix: options.transactionalIdPrefix, groupId: lifecycle.groupId, consumed: [...new Set(consumed)] },
      written: [...new Set(written)],
      abortsHanging: options.abortHangingTransactions,
      transactionTimeoutMs: options.transactionTimeoutMs,
      maxTransactionTimeoutMs: () => brokerMaxTransactionTimeoutMs(this.find<KafkaClient>(KAFKA_CLIENT)!),
    });
    return this.transactionsReader;
  }

  private tools() {
    if (this.cached) return this.cached;
    const lifecycle = this.lifecycle();
    const sql = dataSourceSql(lifecycle.getDatabase());
    const store = new OperatorStore(sql, lifecycle.groupId, this.find(SchemaRegistry));
    this.cached = { sql, store, stories: new MessageStories(sql, store), outbox: new OutboxOperations(sql) };
    return this.cached;
  }

  private find<T>(token: (abstract new (...args: any[]) => T) | symbol): T | undefined {
    try {
      return this.moduleRef.get<T>(token as never, { strict: false }) as T;
    } catch {
      return undefined;
    }
  }

  private lifecycle(): KafkaExactlyOnceLifecycle {
    const lifecycle = this.find(KafkaExactlyOnceLifecycle);
    if (!lifecycle?.groupId) throw new InvalidOptionsError('KafkaExactlyOnceAdminModule', 'needs KafkaExactlyOnceModule with a groupId in the same application (the group whose dead letters and parked keys it serves)');
    return lifecycle;
  }
}

/** Kafka's default transaction.max.timeout.ms, for a broker that does not say its own. */
const KAFKA_MAX_TRANSACTION_TIMEOUT_MS = 900000;

/** The brokers' transaction.max.timeout.ms (of the first broker described): how long a live transaction may last. */
async function brokerMaxTransactionTimeoutMs(kafka: KafkaClient): Promise<number> {
  const admin = adminOf(kafka, { retry: { retries: 0 } });
  await admin.connect();
  try {
    const value = (await brokerSettings(admin, ['transaction.max.timeout.ms'] as const))?.['transaction.max.timeout.ms'] ?? NaN;
    return value > 0 ? value : KAFKA_MAX_TRANSACTION_TIMEOUT_MS;
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}
