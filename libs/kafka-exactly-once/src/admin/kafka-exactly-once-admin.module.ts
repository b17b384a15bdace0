import { DynamicModule, Module, Provider } from '@nestjs/common';
import { ADMIN_OPTIONS, KafkaExactlyOnceAdminOptions, resolveAdminOptions } from './admin.options';
import { AdminTokenGuard } from './admin-token.guard';
import { KafkaExactlyOnceAdminController } from './kafka-exactly-once-admin.controller';
import { OperatorService } from './operator.service';

/**
 * Opt-in REST endpoints for operators (under /kafka-eo): list and show dead letters and parked keys, replay a
 * dead letter, release a parked key, discard a parked record. Every request needs `Authorization: Bearer
 * <token>`; the module refuses to start without a token. Import it next to KafkaExactlyOnceModule.
 *
 * @example
 * KafkaExactlyOnceAdminModule.forRoot({ token: process.env.ADMIN_TOKEN })
 */
@Module({})
export class KafkaExactlyOnceAdminModule {
  static forRoot(options: KafkaExactlyOnceAdminOptions): DynamicModule {
    return this.build({ provide: ADMIN_OPTIONS, useFactory: () => resolveAdminOptions(options) });
  }

  static forRootAsync(options: { useFactory: (...args: any[]) => KafkaExactlyOnceAdminOptions | Promise<KafkaExactlyOnceAdminOptions>; inject?: any[]; imports?: any[] }): DynamicModule {
    const module = this.build({ provide: ADMIN_OPTIONS, useFactory: async (...args: unknown[]) => resolveAdminOptions(await options.useFactory(...args)), inject: options.inject ?? [] });
    return { ...module, imports: options.imports ?? [] };
  }

  private static build(optionsProvider: Provider): DynamicModule {
    return {
      module: KafkaExactlyOnceAdminModule,
      controllers: [KafkaExactlyOnceAdminController],
      providers: [optionsProvider, AdminTokenGuard, OperatorService],
    };
  }
}
