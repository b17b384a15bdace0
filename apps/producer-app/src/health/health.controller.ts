import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { PublisherHealthIndicator } from 'kafka-exactly-once';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly publisher: PublisherHealthIndicator,
  ) {}

  /**
   * Up while events are delivered or safely spooled (the breaker state says whether Kafka answers); down once
   * spooled events have waited longer than the publisher's threshold.
   */
  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.publisher.isHealthy('publisher')]);
  }
}
