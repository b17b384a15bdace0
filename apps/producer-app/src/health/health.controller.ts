import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { OutboxHealthIndicator, PublisherHealthIndicator } from 'kafka-exactly-once';
import { producerAppConfig } from '../producer-app.config';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly publisher: PublisherHealthIndicator,
    private readonly outbox: OutboxHealthIndicator,
  ) {}

  /**
   * Up while events are delivered or safely spooled (the breaker state says whether Kafka answers); down once
   * spooled events have waited longer than the publisher's threshold. In outbox mode, also down while the oldest
   * outbox event has waited longer than the outbox's threshold.
   */
  @Get()
  @HealthCheck()
  check() {
    const outbox = producerAppConfig().paymentsMode === 'outbox';
    return this.health.check([() => this.publisher.isHealthy('publisher'), ...(outbox ? [() => this.outbox.isHealthy('outbox')] : [])]);
  }
}
