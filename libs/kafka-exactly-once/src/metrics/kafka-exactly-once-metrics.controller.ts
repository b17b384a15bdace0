import { Controller, Get, Header, NotFoundException } from '@nestjs/common';
import { KafkaExactlyOnceMetrics } from './kafka-exactly-once.metrics';

/**
 * `GET /metrics` for Prometheus: every metric of the registry the module option `metrics` names (prom-client's
 * global one by default), the application's own included. Add it to the controllers of the module that
 * imports KafkaExactlyOnceModule; answers 404 while the option `metrics` is not set.
 *
 * @example
 * @Module({ imports: [KafkaExactlyOnceModule.forRoot({ ..., metrics: {} })], controllers: [KafkaExactlyOnceMetricsController] })
 */
@Controller('metrics')
export class KafkaExactlyOnceMetricsController {
  constructor(private readonly metrics: KafkaExactlyOnceMetrics) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  async scrape(): Promise<string> {
    const text = await this.metrics.scrape();
    if (text === undefined) throw new NotFoundException('metrics are off: set the option metrics of KafkaExactlyOnceModule (and install prom-client)');
    return text;
  }
}
