import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import type { ResolvedOptions } from '../options/resolved-options';
import { EventPublisher } from '../publishing/event-publisher';
import { down, up, type HealthCheckOptions, type HealthResult } from './health-result';

/**
 * The publisher's health: circuit breaker state, spool backlog (records, bytes, age of the oldest), counters,
 * and the spooled records Kafka refused for good (`quarantined`, `lastQuarantineReason`: they wait in the
 * spool's quarantine file for an operator, while the line moves on). Down when the oldest spooled record is
 * older than `publisher.unhealthyBacklogAgeMs`: Kafka has been unreachable for too long, although nothing is lost.
 */
@Injectable()
export class PublisherHealthIndicator {
  constructor(
    private readonly publisher: EventPublisher,
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
  ) {}

  /** `options` as the other indicators take them; the publisher's state is in memory, so nothing can time out. */
  isHealthy<const Key extends string>(key: Key, _options: HealthCheckOptions = {}): HealthResult<Key> {
    const status = this.publisher.status();
    const limit = this.options.publisher?.unhealthyBacklogAgeMs ?? Infinity;
    const details = {
      breaker: status.breaker,
      spool: status.spool,
      sent: status.sent,
      spooled: status.spooled,
      drained: status.drained,
      quarantined: status.quarantined,
      ...(status.lastQuarantineReason === undefined ? {} : { lastQuarantineReason: status.lastQuarantineReason }),
    };
    if (status.spool.oldestAgeMs > limit) {
      return down(key, { ...details, message: `spooled events have waited ${Math.round(status.spool.oldestAgeMs / 1000)} s for Kafka` });
    }
    return up(key, details);
  }
}
