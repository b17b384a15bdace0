import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { Counter, register } from 'prom-client';
import { Observable } from 'rxjs';

const NAME = 'consumer_app_payment_handler_calls_total';

/** Counts calls of the payments handler (served with the other metrics at GET /metrics). */
@Injectable()
export class HandlerCallsInterceptor implements NestInterceptor {
  private readonly calls = (register.getSingleMetric(NAME) as Counter | undefined) ?? new Counter({ name: NAME, help: 'Calls of the payments handler, failed ones included' });

  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    this.calls.inc();
    return next.handle();
  }
}
