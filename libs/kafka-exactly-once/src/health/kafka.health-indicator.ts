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

/**
 * Kafka health in the terminus style: down when no broker answers within the timeout or the consumer crashed
 * for good; reports the consumer's state (rebalancing, running) and assignment.
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

  async isHealthy<const Key extends string>(key: Key, options: { timeoutMs?: number } = {}) {
    const indicator = this.indicators.check(key);
    const consumer = this.lifecycle.status();
    const admin = this.kafka.admin({ retry: { retries: 0 } });
    try {
      const cluster = await withTimeout(
        admin.connect().then(() => admin.describeCluster()),
        options.timeoutMs ?? 3000,
        'Kafka',
      );
      if (consumer?.state === 'crashed') {
        return indicator.down({ brokers: cluster.brokers.length, consumer: consumer.state, error: consumer.lastError ?? 'crashed' });
      }
      return indicator.up({ brokers: cluster.brokers.length, consumer: consumer?.state ?? 'not-started', assignment: consumer?.assignment ?? {} });
    } catch (err) {
      return indicator.down({ message: (err as Error).message, consumer: consumer?.state ?? 'not-started' });
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }
}
