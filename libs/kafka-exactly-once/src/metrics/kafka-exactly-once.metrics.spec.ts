import { Registry } from 'prom-client';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { resolveOptions } from '../options/resolve-options';
import { KafkaExactlyOnceMetrics } from './kafka-exactly-once.metrics';

const base = { kafka: { clientId: 'spec', brokers: ['127.0.0.1:9092'] }, transactionalIdPrefix: 'spec', schemas: { directory: 'schemas' } };

/** A counter's or gauge's value for the first label set that matches `labels`. */
async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return undefined;
  const { values } = await metric.get();
  const found = values.find((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l));
  return found?.value;
}

describe('KafkaExactlyOnceMetrics', () => {
  it('registers nothing and ignores every call when the option is not set', async () => {
    const metrics = new KafkaExactlyOnceMetrics({ groupId: 'g', metrics: undefined });
    metrics.unitCommitted('t', { handled: 3, replayed: 0, duplicates: 0, deadLettered: 0 }, { unitMs: 1, postgresCommitMs: 1, kafkaCommitMs: 1 });
    expect(metrics.enabled).toBe(false);
    await expect(metrics.scrape()).resolves.toBeUndefined();
  });

  it('counts what units of work report, by group, topic and reason', async () => {
    const registry = new Registry();
    const metrics = new KafkaExactlyOnceMetrics({ groupId: 'g1', metrics: { registry } });
    metrics.unitCommitted('payments', { handled: 5, replayed: 1, duplicates: 2, deadLettered: 1 }, { unitMs: 12, postgresCommitMs: 3, kafkaCommitMs: 4 });
    metrics.unitCommitted('payments', { handled: 1, replayed: 0, duplicates: 0, deadLettered: 0 }, { unitMs: 2, postgresCommitMs: 1, kafkaCommitMs: 1 });
    metrics.deadLetter('payments', 'handler-failed', true);
    metrics.deadLetter('payments', 'key-parked', false);
    metrics.published('payments', 'sent', 3);
    metrics.published('payments', 'spooled');
    expect(await value(registry, 'kafka_eo_records_handled_total', { group: 'g1', topic: 'payments' })).toBe(6);
    expect(await value(registry, 'kafka_eo_duplicates_skipped_total', { topic: 'payments' })).toBe(2);
    expect(await value(registry, 'kafka_eo_outputs_replayed_total', { topic: 'payments' })).toBe(1);
    expect(await value(registry, 'kafka_eo_dead_letters_total', { reason: 'handler-failed' })).toBe(1);
    expect(await value(registry, 'kafka_eo_dead_letters_total', { reason: 'key-parked' })).toBe(1);
    expect(await value(registry, 'kafka_eo_keys_parked_total', { topic: 'payments' })).toBe(1);
    expect(await value(registry, 'kafka_eo_published_total', { status: 'sent' })).toBe(3);
    expect(await value(registry, 'kafka_eo_published_total', { status: 'spooled' })).toBe(1);
    const text = await metrics.scrape();
    expect(text).toMatch(/^kafka_eo_unit_of_work_seconds_count\{group="g1",topic="payments"\} 2$/m);
    expect(text).toMatch(/^kafka_eo_postgres_commit_seconds_sum\{group="g1",topic="payments"\} 0\.004$/m);
  });

  it('reads the gauges from the attached sources at each scrape, for every module sharing the registry', async () => {
    const registry = new Registry();
    const one = new KafkaExactlyOnceMetrics({ groupId: 'g1', metrics: { registry } });
    const two = new KafkaExactlyOnceMetrics({ groupId: 'g2', metrics: { registry } });
    let lag = 7;
    one.attach({ partitions: () => [{ topic: 't', partition: 0, lag, lastCommitAt: new Date(Date.now() - 2000).toISOString() }] });
    two.attach({
      partitions: () => [{ topic: 't', partition: 1, lag: 3, lastCommitAt: null }],
      publisher: () => ({ breaker: 'open', spool: { records: 4, bytes: 100, oldestAgeMs: 10 } }),
    });
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g1', partition: '0' })).toBe(7);
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g2', partition: '1' })).toBe(3);
    expect(await value(registry, 'kafka_eo_seconds_since_last_commit', { group: 'g1' })).toBeGreaterThanOrEqual(2);
    expect(await value(registry, 'kafka_eo_spool_backlog_records')).toBe(4);
    expect(await value(registry, 'kafka_eo_breaker_state')).toBe(2);
    lag = 0;
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g1' })).toBe(0);
    two.detach();
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g2' })).toBeUndefined();
    expect(await value(registry, 'kafka_eo_spool_backlog_records')).toBe(0); // a gauge without labels reads 0 when nothing reports
  });

  it('refuses a registry that is not a prom-client Registry, naming the option', () => {
    expect(() => resolveOptions({ ...base, metrics: { registry: {} } })).toThrow(InvalidOptionsError);
    expect(() => resolveOptions({ ...base, metrics: { registry: {} } })).toThrow(/metrics\.registry/);
    expect(resolveOptions({ ...base, metrics: {} }).metrics).toEqual({ registry: undefined });
    expect(resolveOptions(base).metrics).toBeUndefined();
  });
});
