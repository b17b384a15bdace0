import { randomUUID } from 'crypto';
import type { Kafka } from 'kafkajs';
import { consumerAppPort, createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { sendRaw } from './support/library';
import { waitForGroupCaughtUp, waitUntil } from './support/payments';
import { newSpoolDirectory, postJson, startProducerApp } from './support/producer-app';
import { processSuite } from './support/suite';

/** One sample of a Prometheus text exposition: the metric's name, its labels and its value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

async function scrape(baseUrl: string): Promise<Sample[]> {
  const response = await fetch(`${baseUrl}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain;.*version=0\.0\.4/);
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('kafka_eo_'))
    .map((line) => {
      const match = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not a Prometheus sample: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
      return { name: match[1], labels, value: Number(match[3]) };
    });
}

/** The sum of a metric's samples whose labels include `labels`. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((sum, s) => sum + s.value, 0);
}

/**
 * Both apps serve `GET /metrics`. Payments go through producer-app (some of them twice with the same
 * Idempotency-Key) to consumer-app, with one undecodable record; scraped during the run and at the end, the
 * counters must equal the work done: publishes acknowledged, payments handled once, duplicates skipped, the
 * dead letter by its reason, and no lag left.
 */
describe('apps: Prometheus metrics match the work done', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('counts publishes, handled records, duplicates, dead letters and lag', async () => {
    const scope = await createConsumerAppScope('metrics');
    const consumer = await startConsumerApp(processes, scope);
    const consumerUrl = `http://127.0.0.1:${consumerAppPort(consumer)}`;
    const producer = await startProducerApp(processes, { topicPrefix: scope.topicPrefix, spoolDir: newSpoolDirectory(), label: scope.label });
    const requested = scope.topic('payments.requested');
    const labels = { group: scope.groupId, topic: requested };

    const payments = Array.from({ length: 150 }, (_, i) => ({ paymentId: randomUUID(), accountId: `acct-${i % 12}`, amountCents: 1000 - (i % 5) * 400 }));
    const handledDuringRun: number[] = [];
    let sent = 0;
    for (const [i, payment] of payments.entries()) {
      const copies = i % 10 === 0 ? 2 : 1; // a client retrying with the same Idempotency-Key
      for (let copy = 0; copy < copies; copy++) {
        const response = await postJson(`${producer.baseUrl}/payments`, payment, { 'idempotency-key': `metrics-${payment.paymentId}` });
        expect(response.status).toBe(202);
        expect(response.body.status).toBe('sent');
        sent++;
      }
      if (i % 50 === 25) handledDuringRun.push(total(await scrape(consumerUrl), 'kafka_eo_records_handled_total', labels));
    }
    await sendRaw(kafka, requested, [{ key: 'acct-0', value: Buffer.from('not avro'), headers: { 'message-id': 'metrics-undecodable' } }]);
    await waitForGroupCaughtUp(kafka, scope.groupId, requested, 120000);

    // producer-app: every acknowledged publish, by outcome.
    const published = await scrape(producer.baseUrl);
    expect(total(published, 'kafka_eo_published_total', { topic: requested, status: 'sent' })).toBe(sent);
    expect(total(published, 'kafka_eo_published_total', { status: 'spooled' })).toBe(0);
    expect(total(published, 'kafka_eo_breaker_state')).toBe(0);
    expect(total(published, 'kafka_eo_spool_backlog_records')).toBe(0);

    // consumer-app: the counters reach the work done (a unit's counters move once it has committed, so the
    // caught-up group's last unit may take a moment to show).
    await waitUntil(async () => total(await scrape(consumerUrl), 'kafka_eo_records_handled_total', labels) === payments.length, 10000, 'handled = payments');
    const samples = await scrape(consumerUrl);
    expect(total(samples, 'kafka_eo_records_handled_total', labels)).toBe(payments.length);
    expect(total(samples, 'kafka_eo_duplicates_skipped_total', labels)).toBe(sent - payments.length);
    expect(total(samples, 'kafka_eo_outputs_replayed_total', labels)).toBe(0);
    expect(total(samples, 'kafka_eo_dead_letters_total', { ...labels, reason: 'decode-failed' })).toBe(1);
    expect(total(samples, 'kafka_eo_dead_letters_total', labels)).toBe(1);
    // The payments handler is an @OrderedEvent handler: the record that cannot be decoded parks its key.
    expect(total(samples, 'kafka_eo_keys_parked_total', labels)).toBe(1);
    expect(total(samples, 'kafka_eo_fenced_commits_total', labels)).toBe(0);
    // Every unit of work that committed was timed, and the handler was called (a batch handler: once per unit).
    const units = total(samples, 'kafka_eo_unit_of_work_seconds_count', labels);
    expect(units).toBeGreaterThan(0);
    expect(total(samples, 'kafka_eo_postgres_commit_seconds_count', labels)).toBe(units);
    expect(total(samples, 'kafka_eo_kafka_commit_seconds_count', labels)).toBe(units);
    expect(total(samples, 'kafka_eo_handler_seconds_count', labels)).toBeGreaterThan(0);
    // One lag sample per partition of the topic this member fetched from, all at 0 now.
    const lag = samples.filter((s) => s.name === 'kafka_eo_partition_lag' && s.labels.topic === requested);
    expect(lag.length).toBeGreaterThan(0);
    expect(lag.map((s) => s.value)).toEqual(lag.map(() => 0));
    expect(samples.some((s) => s.name === 'kafka_eo_seconds_since_last_commit' && s.labels.topic === requested)).toBe(true);

    // Scraped during the run: never more than the final count, never going back.
    expect(handledDuringRun.length).toBe(3);
    expect([...handledDuringRun, payments.length]).toEqual([...handledDuringRun, payments.length].sort((a, b) => a - b));
  });
});
