import { Counter, Registry } from 'prom-client';
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
    new KafkaExactlyOnceMetrics({ groupId: '', metrics: { registry }, kafka: { clientId: 'other-app' } }).published('payments', 'sent');
    expect(await value(registry, 'kafka_eo_records_handled_total', { group: 'g1', topic: 'payments' })).toBe(6);
    expect(await value(registry, 'kafka_eo_duplicates_skipped_total', { topic: 'payments' })).toBe(2);
    expect(await value(registry, 'kafka_eo_outputs_replayed_total', { topic: 'payments' })).toBe(1);
    expect(await value(registry, 'kafka_eo_dead_letters_total', { reason: 'handler-failed' })).toBe(1);
    expect(await value(registry, 'kafka_eo_dead_letters_total', { reason: 'key-parked' })).toBe(1);
    expect(await value(registry, 'kafka_eo_keys_parked_total', { topic: 'payments' })).toBe(1);
    expect(await value(registry, 'kafka_eo_published_total', { client: '', status: 'sent' })).toBe(3);
    expect(await value(registry, 'kafka_eo_published_total', { client: 'other-app', status: 'sent' })).toBe(1);
    expect(await value(registry, 'kafka_eo_published_total', { status: 'spooled' })).toBe(1);
    const text = await metrics.scrape();
    expect(text).toMatch(/^kafka_eo_unit_of_work_seconds_count\{group="g1",topic="payments"\} 2$/m);
    expect(text).toMatch(/^kafka_eo_postgres_commit_seconds_sum\{group="g1",topic="payments"\} 0\.004$/m);
  });

  it('reads the gauges from the attached sources at each scrape, for every module sharing the registry', async () => {
    const registry = new Registry();
    const one = new KafkaExactlyOnceMetrics({ groupId: 'g1', metrics: { registry }, kafka: { clientId: 'app-1' } });
    const two = new KafkaExactlyOnceMetrics({ groupId: 'g2', metrics: { registry }, kafka: { clientId: 'app-2' } });
    let lag = 7;
    one.attach({
      partitions: () => [{ topic: 't', partition: 0, lag, lastCommitAt: new Date(Date.now() - 2000).toISOString(), waitingMs: 1500 }],
      publisher: () => ({ breaker: 'closed', spool: { records: 0, bytes: 0, oldestAgeMs: 0 }, quarantined: 0 }),
    });
    two.attach({
      partitions: () => [{ topic: 't', partition: 1, lag: 3, lastCommitAt: null, waitingMs: null }],
      publisher: () => ({ breaker: 'open', spool: { records: 4, bytes: 100, oldestAgeMs: 10 }, quarantined: 2 }),
    });
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g1', partition: '0' })).toBe(7);
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g2', partition: '1' })).toBe(3);
    expect(await value(registry, 'kafka_eo_seconds_since_last_commit', { group: 'g1' })).toBeGreaterThanOrEqual(2);
    // A partition stuck since its assignment has no last commit, but its waiting time shows it.
    expect(await value(registry, 'kafka_eo_seconds_since_last_commit', { group: 'g2' })).toBeUndefined();
    expect(await value(registry, 'kafka_eo_partition_waiting_seconds', { group: 'g1' })).toBe(1.5);
    expect(await value(registry, 'kafka_eo_partition_waiting_seconds', { group: 'g2' })).toBe(0);
    // Two publishers in one process: each its own series.
    expect(await value(registry, 'kafka_eo_spool_backlog_records', { client: 'app-1' })).toBe(0);
    expect(await value(registry, 'kafka_eo_spool_backlog_records', { client: 'app-2' })).toBe(4);
    expect(await value(registry, 'kafka_eo_breaker_state', { client: 'app-2' })).toBe(2);
    expect(await value(registry, 'kafka_eo_spool_quarantined_records', { client: 'app-2' })).toBe(2);
    lag = 0;
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g1' })).toBe(0);
    two.detach();
    expect(await value(registry, 'kafka_eo_partition_lag', { group: 'g2' })).toBeUndefined();
    expect(await value(registry, 'kafka_eo_spool_backlog_records', { client: 'app-2' })).toBeUndefined();
  });

  it('refuses a metric of the same name that is not the library\'s, and never lets recording fail the work', async () => {
    const registry = new Registry();
    new Counter({ name: 'kafka_eo_records_handled_total', help: 'mine', labelNames: ['app'], registers: [registry] });
    expect(() => new KafkaExactlyOnceMetrics({ groupId: 'g', metrics: { registry } })).toThrow(/finds a metric "kafka_eo_records_handled_total" in the registry that is not the library's/);

    const metrics = new KafkaExactlyOnceMetrics({ groupId: 'g', metrics: { registry: new Registry() } });
    const broken = (metrics as unknown as { metrics: Record<string, { labels: () => never }> }).metrics;
    broken.handled.labels = () => {
      throw new Error('registry in a strange state');
    };
    expect(() => metrics.unitCommitted('t', { handled: 1, replayed: 0, duplicates: 0, deadLettered: 0 }, { unitMs: 1, postgresCommitMs: 1, kafkaCommitMs: 1 })).not.toThrow();
  });

  it('refuses a registry that is not a prom-client Registry, naming the option', () => {
    expect(() => resolveOptions({ ...base, metrics: { registry: {} } })).toThrow(InvalidOptionsError);
    expect(() => resolveOptions({ ...base, metrics: { registry: {} } })).toThrow(/metrics\.registry/);
    expect(resolveOptions({ ...base, metrics: {} }).metrics).toEqual({ registry: undefined });
    expect(resolveOptions(base).metrics).toBeUndefined();
  });
});
