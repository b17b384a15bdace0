import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import type { Kafka } from 'kafkajs';
import { KAFKA_CLIENT } from '../kafka-exactly-once.constants';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export interface KafkaHealthOptions {
  /** How long a broker may take to answer. Default 3000. */
  timeoutMs?: number;
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
    private readonly indicators: HealthIndicatorService,
    @Inject(KAFKA_CLIENT) private readonly kafka: Kafka,
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
  ) {}

  async isHealthy<const Key extends string>(key: Key, options: KafkaHealthOptions = {}) {
    const indicator = this.indicators.check(key);
    const consumer = this.lifecycle.status(options.stallAfterMs);
    const admin = this.kafka.admin({ retry: { retries: 0 } });
    try {
      const cluster = await withTimeout(
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
      if (consumer?.state === 'crashed') return indicator.down({ ...details, error: consumer.lastError ?? 'crashed' });
      const stalled = details.partitions.filter((p) => p.stalled);
      if (stalled.length > 0) {
        const names = stalled.map((p) => `${p.topic}[${p.partition}] (waiting ${Math.round((p.waitingMs ?? 0) / 1000)} s, ${p.lastError ? `last error: ${p.lastError.message}` : 'no error'})`);
        return indicator.down({ ...details, message: `stalled: ${names.join('; ')}` });
      }
      return indicator.up(details);
    } catch (err) {
      return indicator.down({ message: (err as Error).message, consumer: consumer?.state ?? 'not-started', partitions: consumer?.partitions ?? [] });
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }
}
