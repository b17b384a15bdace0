import { readFileSync } from 'fs';
import { join } from 'path';
import { Registry } from 'prom-client';
import { KafkaExactlyOnceMetrics } from './kafka-exactly-once.metrics';

const ROOT = join(__dirname, '../../../..');

/** The series names a metric exposes: histograms add _bucket, _sum and _count. */
async function registeredSeries(): Promise<Set<string>> {
  const registry = new Registry();
  new KafkaExactlyOnceMetrics({ groupId: 'g', metrics: { registry } });
  const names = new Set<string>();
  for (const metric of await registry.getMetricsAsJSON()) {
    names.add(metric.name);
    if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
  }
  return names;
}

function referenced(text: string): string[] {
  return [...new Set(text.match(/\bkafka_eo_[a-z_]+\b/g) ?? [])];
}

/**
 * The Grafana dashboard, the Prometheus alerts and docs/metrics.md of the Docker path name only metrics the
 * library registers (a renamed metric would leave a panel or an alert silently empty), and every registered
 * metric is documented.
 */
describe('metric names outside the code', () => {
  it('the dashboard and the alert rules query only registered series', async () => {
    const series = await registeredSeries();
    const dashboard = JSON.parse(readFileSync(join(ROOT, 'docker/grafana/dashboards/kafka-exactly-once.json'), 'utf8'));
    const expressions = dashboard.panels.flatMap((p: { targets: Array<{ expr: string }> }) => p.targets.map((t) => t.expr)).join('\n');
    const alerts = readFileSync(join(ROOT, 'docker/prometheus/alerts.yml'), 'utf8');
    for (const text of [expressions, alerts]) {
      const names = referenced(text);
      expect(names.length).toBeGreaterThan(0);
      expect(names.filter((n) => !series.has(n))).toEqual([]);
    }
  });

  it('docs/metrics.md documents every registered metric and no other', async () => {
    const registry = new Registry();
    new KafkaExactlyOnceMetrics({ groupId: 'g', metrics: { registry } });
    const registered = (await registry.getMetricsAsJSON()).map((m) => m.name).sort();
    const documented = referenced(readFileSync(join(ROOT, 'docs/metrics.md'), 'utf8')).sort();
    expect(documented).toEqual(registered);
  });
});
