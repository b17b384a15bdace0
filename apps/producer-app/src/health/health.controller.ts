import { Controller, Get, Inject, OnModuleDestroy } from '@nestjs/common';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { Admin, Kafka, logLevel } from 'kafkajs';
import { producerAppConfig } from '../producer-app.config';

@Controller('health')
export class HealthController implements OnModuleDestroy {
  private readonly admin: Admin = new Kafka({
    clientId: 'producer-app-health',
    brokers: producerAppConfig().kafkaBrokers,
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
  }).admin();

  constructor(
    private readonly health: HealthCheckService,
    @Inject(HealthIndicatorService) private readonly indicators: HealthIndicatorService,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.kafka()]);
  }

  private async kafka() {
    const indicator = this.indicators.check('kafka');
    try {
      await this.admin.connect();
      const cluster = await this.admin.describeCluster();
      return indicator.up({ brokers: cluster.brokers.length, controller: cluster.controller });
    } catch (err) {
      return indicator.down({ message: (err as Error).message });
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.admin.disconnect();
  }
}
