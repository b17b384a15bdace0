import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import { probeClient } from '../client/choose-driver';
import { adminOf, type KafkaClient } from '../kafkajs';
import type { ResolvedOptions } from '../options/resolved-options';
import { withDeadline } from '../engine/deadline';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { down, up, type HealthCheckOptions, type HealthResult } from './health-result';

export interface KafkaHealthOptions extends HealthCheckOptions {
  /** Overrides the module's `consumer.stallAfterMs` for this check. */
  stallAfterMs?: number;
}

/**
 * Kafka health in the terminus style: it never throws, it returns `down` with a message (terminus's
 * `HealthCheckService` answers 503 for it; without terminus, read `result[key].status`). Down when no broker
 * answers within the timeout (the message names Kafka), when the consumer cannot start (a topic missing, a
 * broker's refusal: the message says it), when it crashed for good, or when a partition is stalled: records
 * fetched from it have waited longer than `consumer.stallAfterMs` (60 s) without a commit. Up while the consumer
 * joins its group (`consumer: 'starting'`). Reports the consumer's state, its assignment and, for each assigned
 * partition, the committed offset, lag, time since the last commit, failures in a row and the last error, and
 * for handlers with retry topics each tier's waiting records and next due time (waiting on a delay is not a
 * stall; a tier overdue and not moving is). A down result names the stalled partitions and their last error.
 *
 * @example
 * check() { return this.health.check([() => this.kafka.isHealthy('kafka')]); }
 */
@Injectable()
export class KafkaHealthIndicator {
  private readonly probe: KafkaClient;

  constructor(
    @Inject(RESOLVED_OPTIONS) options: ResolvedOptions,
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
  ) {
    this.probe = probeClient(options);
  }

  async isHealthy<const Key extends string>(key: Key, options: KafkaHealthOptions = {}): Promise<HealthResult<Key>> {
    const consumer = this.lifecycle.status(options.stallAfterMs);
    const start = this.lifecycle.startStatus();
    const state = consumer?.state ?? start.phase;
    const admin = adminOf(this.probe, { retry: { retries: 0 } });
    const connecting = admin.connect();
    try {
      const cluster = await withDeadline(
        connecting.then(() => admin.describeCluster()),
        options.timeoutMs ?? 3000,
        'Kafka',
      );
      const details = {
        brokers: cluster.brokers.length,
        consumer: state,
        assignment: consumer?.assignment ?? {},
        partitions: consumer?.partitions ?? [],
        // Only for handlers with retry topics: records waiting on each tier and when the next is due.
        ...(consumer?.retryTiers.length ? { retryTiers: consumer.retryTiers } : {}),
      };
      if (start.lastError && start.phase !== 'running') return down(key, { ...details, message: `the consumer cannot start: ${start.lastError}` });
      if (consumer?.state === 'crashed') return down(key, { ...details, error: consumer.lastError ?? 'crashed' });
      const stalled = details.partitions.filter((p) => p.stalled);
      if (stalled.length > 0) {
        const names = stalled.map((p) => `${p.topic}[${p.partition}] (waiting ${Math.round((p.waitingMs ?? 0) / 1000)} s, ${p.lastError ? `last error: ${p.lastError.message}` : 'no error'})`);
        return down(key, { ...details, message: `stalled: ${names.join('; ')}` });
      }
      return up(key, details);
    } catch (err) {
      const message = (err as Error).message;
      return down(key, { message: /kafka/i.test(message) ? message : `Kafka: ${message}`, consumer: state, partitions: consumer?.partitions ?? [] });
    } finally {
      // After the connection attempt settles (it may outlive the deadline): a disconnect before it would leave
      // the connection it makes open. The answer does not wait for it.
      void connecting.then(
        () => admin.disconnect(),
        () => admin.disconnect(),
      ).catch(() => undefined);
    }
  }
}
