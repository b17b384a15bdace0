import { Injectable, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { OperatorStore } from './operator-store';
import { dataSourceSql } from './sql-client';

/**
 * The OperatorStore of the application's consumer group, on its DataSource (created at first use). The
 * KafkaExactlyOnceModule is found anywhere in the application (it need not be imported into this module).
 */
@Injectable()
export class OperatorService implements OnModuleInit {
  private cached?: OperatorStore;

  constructor(private readonly moduleRef: ModuleRef) {}

  /** Fails the boot, not the first request, when the application has no KafkaExactlyOnceModule with a group. */
  onModuleInit(): void {
    this.lifecycle();
  }

  get store(): OperatorStore {
    if (this.cached) return this.cached;
    const lifecycle = this.lifecycle();
    this.cached = new OperatorStore(dataSourceSql(lifecycle.getDataSource()), lifecycle.groupId);
    return this.cached;
  }

  private lifecycle(): KafkaExactlyOnceLifecycle {
    let lifecycle: KafkaExactlyOnceLifecycle | undefined;
    try {
      lifecycle = this.moduleRef.get(KafkaExactlyOnceLifecycle, { strict: false });
    } catch {
      lifecycle = undefined;
    }
    if (!lifecycle?.groupId) throw new InvalidOptionsError('KafkaExactlyOnceAdminModule', 'needs KafkaExactlyOnceModule with a groupId in the same application (the group whose dead letters and parked keys it serves)');
    return lifecycle;
  }
}
