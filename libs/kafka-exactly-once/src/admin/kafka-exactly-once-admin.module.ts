import { DynamicModule, Module, Provider, type Type } from '@nestjs/common';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { ConsoleAccessGuard, consoleController } from '../console/console.controller';
import { ADMIN_OPTIONS, KafkaExactlyOnceAdminOptions, resolveAdminOptions } from './admin.options';
import { AdminAccessGuard } from './admin-access.guard';
import { BulkController } from './bulk/bulk.controller';
import { BulkWorker } from './bulk/bulk-worker';
import { KafkaExactlyOnceAdminController } from './kafka-exactly-once-admin.controller';
import { OperatorService } from './operator.service';

/** forRootAsync's options: the factory, and the console beside it (its routes are fixed when the module is built). */
export interface KafkaExactlyOnceAdminAsyncOptions {
  useFactory: (...args: any[]) => Omit<KafkaExactlyOnceAdminOptions, 'console'> | Promise<Omit<KafkaExactlyOnceAdminOptions, 'console'>>;
  inject?: any[];
  imports?: any[];
  /** As `console` of forRoot. */
  console?: KafkaExactlyOnceAdminOptions['console'];
}

/**
 * Opt-in REST endpoints for operators (under /kafka-eo): the overview, dead letters and parked keys, replay a
 * dead letter, release a parked key, discard a parked record, the outbox's events set aside, a message's story,
 * the audit log; and, with `console`, the operator console, a page of this application on the same API
 * (docs/console.md). Every request needs `Authorization: Bearer <token>`, or passes the application's own
 * `guard`; the module refuses to start without one or the other. Import it next to KafkaExactlyOnceModule.
 *
 * @example
 * KafkaExactlyOnceAdminModule.forRoot({ token: process.env.ADMIN_TOKEN, console: true }) // page at /kafka-eo/
 */
@Module({})
export class KafkaExactlyOnceAdminModule {
  static forRoot(options: KafkaExactlyOnceAdminOptions): DynamicModule {
    const resolved = resolveAdminOptions(options);
    return this.build({ provide: ADMIN_OPTIONS, useValue: resolved }, resolved.console && consoleController(resolved.console));
  }

  static forRootAsync(options: KafkaExactlyOnceAdminAsyncOptions): DynamicModule {
    // The console's path and settings, checked now (with a stand-in token: the real one comes from the factory).
    const consoleOptions = resolveAdminOptions({ token: 'x'.repeat(16), console: options.console }).console;
    const module = this.build(
      {
        provide: ADMIN_OPTIONS,
        useFactory: async (...args: unknown[]) => {
          const given = await options.useFactory(...args);
          if (given && 'console' in given && (given as KafkaExactlyOnceAdminOptions).console !== undefined) {
            throw new InvalidOptionsError('console', 'is given beside useFactory in forRootAsync({ useFactory, console }), not by the factory: its routes are fixed when the module is built');
          }
          return { ...resolveAdminOptions(given), console: consoleOptions };
        },
        inject: options.inject ?? [],
      },
      consoleOptions && consoleController(consoleOptions),
    );
    return { ...module, imports: options.imports ?? [] };
  }

  private static build(optionsProvider: Provider, console?: Type<unknown>): DynamicModule {
    return {
      module: KafkaExactlyOnceAdminModule,
      controllers: [KafkaExactlyOnceAdminController, BulkController, ...(console ? [console] : [])],
      providers: [optionsProvider, AdminAccessGuard, ConsoleAccessGuard, OperatorService, BulkWorker],
    };
  }
}
