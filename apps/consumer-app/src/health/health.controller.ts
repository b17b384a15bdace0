import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { InboxHealthIndicator, KafkaHealthIndicator } from 'kafka-exactly-once';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly kafka: KafkaHealthIndicator,
    private readonly inbox: InboxHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.kafka.isHealthy('kafka'), () => this.inbox.isHealthy('database')]);
  }
}
