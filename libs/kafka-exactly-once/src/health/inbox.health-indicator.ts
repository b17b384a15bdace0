import { Injectable } from '@nestjs/common';
import { cappedCount, cappedValue } from '../admin/capped-count';
import { queryWithin } from '../engine/clean-release';
import { withDeadline } from '../engine/deadline';
import { PARKED_KEYS_TABLE, REPLAYS_TABLE } from '../kafka-exactly-once.constants';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { down, up, type HealthCheckOptions, type HealthResult } from './health-result';

/**
 * The inbox database's health: up when PostgreSQL answers a query within the timeout. Its details name the
 * consumer group's parked keys (@OrderedEvent): a parked key does not make the service unhealthy (the other
 * keys flow), but an operator must act on it (docs/operations.md). It is down while operator replays stay
 * unsettled for more than a minute (their outputs refused for good, say): every release and replay of the group
 * waits behind them.
 *
 * @example
 * check() { return this.health.check([() => this.inbox.isHealthy('inbox')]); }
 */
@Injectable()
export class InboxHealthIndicator {
  constructor(private readonly lifecycle: KafkaExactlyOnceLifecycle) {}

  async isHealthy<const Key extends string>(key: Key, options: HealthCheckOptions = {}): Promise<HealthResult<Key>> {
    try {
      const ms = options.timeoutMs ?? 3000;
      const details = await withDeadline(this.parkedKeys(ms), ms, 'PostgreSQL');
      if (details.blockedReplays) {
        return down(key, { ...details, message: `operator replay(s) ${(details.blockedReplays as string[]).join(', ')} unsettled for more than a minute: releases and replays of the group wait (see the consumer's log; docs/operations.md)` });
      }
      return up(key, details);
    } catch (err) {
      return down(key, { message: (err as Error).message });
    }
  }

  /** Each statement on a connection of its own, closed when it goes unanswered (never left holding a pooled one). */
  private async parkedKeys(ms: number): Promise<Record<string, unknown>> {
    const dataSource = this.lifecycle.getDatabase();
    const query = (sql: string, params: unknown[] = []) => queryWithin(dataSource, sql, params, ms);
    if (!this.lifecycle.groupId) {
      await query('SELECT 1');
      return {};
    }
    // Before the library's migrations ran (no handler started yet) there is no table: nothing is parked.
    const exists = await query(`SELECT to_regclass($1) IS NOT NULL AS present`, [PARKED_KEYS_TABLE]);
    if (!exists[0]?.present) return {};
    // Counted up to the cap and the first ten read in order from the parked keys' list index: the operator
    // console's overview asks this on every refresh, whatever number of keys an incident parks.
    const [row] = await query(
      `SELECT ${cappedCount(`${PARKED_KEYS_TABLE} WHERE consumer_group = $1`)} AS n,
              (SELECT array_agg(k.name ORDER BY k.parked_at, k.key_digest) FROM (
                 SELECT topic || ' ' || ordering_key AS name, parked_at, key_digest FROM ${PARKED_KEYS_TABLE} WHERE consumer_group = $1 ORDER BY parked_at, key_digest LIMIT 10) AS k) AS keys,
              (SELECT parked_at FROM ${PARKED_KEYS_TABLE} WHERE consumer_group = $1 ORDER BY parked_at, key_digest LIMIT 1) AS oldest`,
      [this.lifecycle.groupId],
    );
    const [blocked] = await query(
      `SELECT (array_agg(seq::text ORDER BY seq))[1:10] AS seqs FROM ${REPLAYS_TABLE} WHERE consumer_group = $1 AND NOT settled AND created_at < now() - interval '1 minute'`,
      [this.lifecycle.groupId],
    );
    const replays = blocked?.seqs?.length ? { blockedReplays: blocked.seqs as string[] } : {};
    const parked = cappedValue(row.n);
    const atLeast = parked.atLeast ? { atLeast: { parkedKeys: true } } : {};
    return parked.value === 0 ? { parkedKeys: 0, ...replays } : { parkedKeys: parked.value, ...atLeast, oldestParkedAt: new Date(row.oldest).toISOString(), parked: row.keys, ...replays };
  }
}
