import { Inject, Injectable } from '@nestjs/common';
import { cappedCount, cappedCounts, type AtLeast } from '../admin/capped-count';
import { queryWithin } from '../engine/clean-release';
import { withDeadline } from '../engine/deadline';
import { OUTBOX_RELAY_TABLE, OUTBOX_SET_ASIDE_TABLE, OUTBOX_TABLE, RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import type { ResolvedOptions } from '../options/resolved-options';
import { Outbox } from '../outbox/outbox';
import { down, up, type HealthCheckOptions, type HealthResult } from './health-result';

/**
 * The outbox's health: down when the oldest event waiting for the relay is older than `outbox.unhealthyAgeMs`,
 * naming its topic and why it waits (this application's relay's last error, or that no relay of this
 * application runs). Events Kafka refused for good are set aside and do not hold the others: they are counted
 * in the details (`setAside`) until an operator retries or discards them (`kafka-eo outbox`).
 *
 * @example
 * check() { return this.health.check([() => this.outboxHealth.isHealthy('outbox')]); }
 */
@Injectable()
export class OutboxHealthIndicator {
  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedOptions,
    private readonly lifecycle: KafkaExactlyOnceLifecycle,
    private readonly outbox: Outbox,
  ) {}

  async isHealthy<const Key extends string>(key: Key, options: HealthCheckOptions = {}): Promise<HealthResult<Key>> {
    const config = this.options.outbox;
    if (!config) return down(key, { message: 'the outbox is not enabled (module option "outbox")' });
    const ms = options.timeoutMs ?? 3000;
    const relay = this.outbox.relayStatus();
    try {
      const details = await withDeadline(this.waiting(ms), ms, 'PostgreSQL');
      const state = relay ? { relay: relay.state, relayedBatch: relay.relayedBatch, ...(relay.lastError ? { lastError: relay.lastError, lastErrorAt: relay.lastErrorAt } : {}) } : { relay: 'elsewhere' };
      const all = { ...details, ...state };
      if (details.oldestAgeMs > config.unhealthyAgeMs) {
        const why = !relay
          ? 'this application runs no relay (outbox.relay is false): is `kafka-eo outbox relay` or another instance running?'
          : relay.state === 'standby'
            ? 'another relay holds the relay lock (see its health and log)'
            : relay.lastError
              ? `the relay's last error: ${relay.lastError}`
              : `the relay is ${relay.state}`;
        return down(key, { ...all, message: `the oldest event waiting in the outbox (topic ${details.oldestTopic}) waits for ${Math.round(details.oldestAgeMs / 1000)} s, over ${config.unhealthyAgeMs / 1000} s: ${why}` });
      }
      return up(key, all);
    } catch (err) {
      return down(key, { message: (err as Error).message });
    }
  }

  private async waiting(ms: number): Promise<{ waiting: number; oldestAgeMs: number; oldestTopic?: string; setAside: number; atLeast?: AtLeast<'waiting' | 'setAside'> }> {
    const dataSource = this.lifecycle.getDatabase();
    const exists = await queryWithin(dataSource, `SELECT to_regclass($1) IS NOT NULL AS present`, [OUTBOX_TABLE], ms);
    if (!exists[0]?.present) return { waiting: 0, oldestAgeMs: 0, setAside: 0 };
    // Rows of batches at or below the relayed one are in Kafka, and about to be deleted. The oldest waiting event
    // is the first by position (the relay's order: the one it sends next), read from the primary key; the counts
    // stop at the cap, so that a backlog of millions costs a health check (and the console's refresh) no more than
    // 10,001 index entries each.
    const [row] = await queryWithin(
      dataSource,
      `WITH r AS (SELECT coalesce((SELECT relayed_batch FROM ${OUTBOX_RELAY_TABLE} WHERE id = 1), 0) AS relayed)
       SELECT ${cappedCount(`${OUTBOX_TABLE} o WHERE o.batch IS NULL`)} + ${cappedCount(`${OUTBOX_TABLE} o, r WHERE o.batch > r.relayed`)} AS waiting,
              extract(epoch FROM clock_timestamp() - first.created_at) * 1000 AS age, first.aggregatetype AS topic,
              ${cappedCount(`${OUTBOX_SET_ASIDE_TABLE} WHERE state = 'set-aside'`)} AS set_aside
       FROM (SELECT 1) AS one
       LEFT JOIN LATERAL (SELECT o.created_at, o.aggregatetype FROM ${OUTBOX_TABLE} o, r WHERE o.batch IS NULL OR o.batch > r.relayed ORDER BY o.position LIMIT 1) AS first ON true`,
      [],
      ms,
    );
    const { values, atLeast } = cappedCounts({ waiting: row.waiting, setAside: row.set_aside });
    return {
      waiting: values.waiting,
      oldestAgeMs: Math.round(Number(row.age ?? 0)),
      ...(row.topic ? { oldestTopic: row.topic } : {}),
      setAside: values.setAside,
      ...(Object.keys(atLeast).length > 0 ? { atLeast } : {}),
    };
  }
}
