import { Injectable } from '@nestjs/common';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { OperatorStore } from './operator-store';
import { dataSourceSql } from './sql-client';

/** The OperatorStore of the application's consumer group, on its DataSource (created at first use). */
@Injectable()
export class OperatorService {
  private cached?: OperatorStore;

  constructor(private readonly lifecycle: KafkaExactlyOnceLifecycle) {}

  get store(): OperatorStore {
    this.cached ??= new OperatorStore(dataSourceSql(this.lifecycle.getDataSource()), this.lifecycle.groupId);
    return this.cached;
  }
}
