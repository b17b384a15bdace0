import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';

/**
 * The inbox database's health: up when PostgreSQL answers a query within the timeout.
 *
 * @example
 * check() { return this.health.check([() => this.inbox.isHealthy('inbox')]); }
 */
@Injectable()
export class InboxHealthIndicator {
  constructor(
    private readonly indicators: HealthIndicatorService,
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
  ) {}

  async isHealthy<const Key extends string>(key: Key, options: { timeoutMs?: number } = {}) {
    const indicator = this.indicators.check(key);
    const timeoutMs = options.timeoutMs ?? 3000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.lifecycle.getDataSource().query('SELECT 1'),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`PostgreSQL did not answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      return indicator.up();
    } catch (err) {
      return indicator.down({ message: (err as Error).message });
    } finally {
      clearTimeout(timer);
    }
  }
}
