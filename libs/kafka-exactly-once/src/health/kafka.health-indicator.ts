import { Inject, Injectable } from '@nestjs/common';
import type { Kafka } from 'kafkajs';
import { KAFKA_CLIENT } from '../kafka-exactly-once.constants';
import { withDeadline } from '../engine/deadline';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { down, up, type HealthCheckOptions, type HealthResult } from './health-result';

export interface KafkaHealthOptions extends HealthCheckOptions {
  /** Overrides the module's `consumer.stallAfterMs` for this check. */
  stallAfterMs?: number;
}

/**
 * Kafka health in the terminus style. Down when no broker answers within the timeout, when the consumer
 * crashed for good, or when a partition is stalled: records fetched from it have waited longer than
 * `consumer.stallAfterMs` (60 s) without a commit. Reports the consumer's state, its assignment and, for each
 * assigned partition, the committed offset, lag, time since the last commit, failures in a row and the last
 * error; a down result names the stalled partitions and their last error.
 *
 * @example
 * check() { return this.health.check([() => this.kafka.isHealthy('kafka')]); }
 */
@Injectable()
export class KafkaHealthIndicator {
  constructor(
    @Inject(KAFKA_CLIENT) private readonly kafka: Kafka,
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
  ) {}

  async isHealthy<const Key extends string>(key: Key, options: KafkaHealthOptions = {}): Promise<HealthResult<Key>> {
    const consumer = this.lifecycle.status(options.stallAfterMs);
    const admin = this.kafka.admin({ retry: { retries: 0 } });
    try {
      const cluster = await withDeadline(
        admin.connect().then(() => admin.describeCluster()),
        options.timeoutMs ?? 3000,
        'Kafka',
      );
      const details = {
        brokers: cluster.brokers.length,
        consumer: consumer?.state ?? 'not-started',
        assignment: consumer?.assignment ?? {},
        partitions: consumer?.partitions ?? [],
      };
      if (consumer?.state === 'crashed') return down(key, { ...details, error: consumer.lastError ?? 'crashed' });
      const stalled = details.partitions.filter((p) => p.stalled);
      if (stalled.length > 0) {
        const names = stalled.map((p) => `${p.topic}[${p.partition}] (waiting ${Math.round((p.waitingMs ?? 0) / 1000)} s, ${p.lastError ? `last error: ${p.lastError.message}` : 'no error'})`);
        return down(key, { ...details, message: `stalled: ${names.join('; ')}` });
      }
      return up(key, details);
    } catch (err) {
      return down(key, { message: (err as Error).message, consumer: consumer?.state ?? 'not-started', partitions: consumer?.partitions ?? [] });
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }
}
