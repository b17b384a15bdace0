import { Logger } from '@nestjs/common';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { installLineOf, OPTIONAL_PEERS } from '../optional-peers';
import type { ResolvedOptions } from '../options/resolved-options';

/** A unit of work's counts, as the consumer logs them. */
export interface UnitCounts {
  handled: number;
  replayed: number;
  duplicates: number;
  deadLettered: number;
}

/** Where a unit of work spent its time, in milliseconds. */
export interface UnitTimings {
  unitMs: number;
  postgresCommitMs: number;
  kafkaCommitMs: number;
}

/** What the gauges read at each scrape. */
export interface MetricsSources {
  partitions?: () => Array<{ topic: string; partition: number; lag: number | null; lastCommitAt: string | null; waitingMs: number | null }>;
  /** The retry tiers of the consumer's handlers. */
  retryTiers?: () => Array<{ retriesOf: string; tier: number; waiting: number; nextDueAt: string | null }>;
  publisher?: () => { breaker: string; spool: { records: number; bytes: number; oldestAgeMs: number }; quarantined: number };
  /** The outbox as the relay last counted it (undefined until it did). */
  outbox?: () => { waiting: number; oldestAgeMs: number } | undefined;
}

// prom-client is an optional peer: its types are not imported, so that applications without it compile.
interface PromMetric {
  labels(labels: Record<string, string>): { inc(value?: number): void; observe(value: number): void; set(value: number): void };
  inc(value?: number): void;
  reset(): void;
  set(labels: Record<string, string>, value: number): void;
}
interface PromClient {
  register: object;
  Counter: new (config: object) => PromMetric;
  Histogram: new (config: object) => PromMetric;
  Gauge: new (config: object) => PromMetric;
}
interface PromRegistry {
  getSingleMetric(name: string): unknown;
  metrics(): Promise<string>;
}

const SOURCES = Symbol.for('kafka-exactly-once:metric-sources');
interface Attached {
  group: string;
  /** The module's `kafka.clientId`: what tells publishers apart. */
  client: string;
  sources: MetricsSources;
}
type SourcedGauge = PromMetric & { [SOURCES]?: Set<Attached> };

/** Seconds, from 1 ms to 30 s: a unit of work commits in milliseconds; tens of seconds are a problem. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BREAKER = { closed: 0, 'half-open': 1, open: 2, isolated: 3 } as Record<string, number>;

/**
 * The library's Prometheus metrics (`kafka_eo_*`), registered on a prom-client Registry when the module option
 * `metrics` is set, and doing nothing otherwise. Labels are low-cardinality: consumer group, topic, and the
 * dead-letter reason or publish outcome; only the per-partition gauges carry a partition number. Several
 * modules in one process share the metrics and tell themselves apart by `group` (the consumer's) and `client`
 * (the publisher's: `kafka.clientId`). Recording a metric never fails the work it measures: an error is logged
 * once and the metric skipped.
 */
export class KafkaExactlyOnceMetrics {
  private readonly metrics?: Record<string, PromMetric>;
  private readonly registry?: PromRegistry;
  private readonly attached: Attached;
  private readonly gauges: SourcedGauge[] = [];
  private readonly logger = new Logger('KafkaExactlyOnceMetrics');
  private failed = false;

  constructor(options: Pick<ResolvedOptions, 'groupId' | 'metrics'> & { kafka?: { clientId?: string } }) {
    this.attached = { group: options.groupId, client: options.kafka?.clientId ?? '', sources: {} };
    if (!options.metrics) return;
    const prom = loadPromClient();
    const registry = (options.metrics.registry ?? prom.register) as PromRegistry;
    this.registry = registry;
    const make = (kind: 'Counter' | 'Histogram' | 'Gauge', name: string, help: string, labelNames: string[], extra: object = {}): PromMetric => {
      const existing = registry.getSingleMetric(name) as (PromMetric & { labelNames?: string[] }) | undefined;
      if (!existing) return new prom[kind]({ name, help, labelNames, registers: [registry], ...extra });
      // Another module of this process registered it: share it. Anything else of that name is a conflict.
      if (!(existing instanceof prom[kind]) || (existing.labelNames ?? []).join() !== labelNames.join()) {
        throw new InvalidOptionsError('metrics', `finds a metric "${name}" in the registry that is not the library's (another type or labels): give the module a registry of its own ({ registry: new Registry() })`);
      }
      return existing;
    };
    const unit = ['group', 'topic'];
    const gauge = (name: string, help: string, labelNames: string[], read: (metric: PromMetric, attached: Attached) => void): PromMetric => {
      const metric = make('Gauge', name, help, labelNames, {
        collect(this: SourcedGauge) {
          this.reset();
          // A source that throws (a module shutting down) leaves its series out of this scrape.
          for (const attached of this[SOURCES] ?? []) {
            try {
              read(this, attached);
            } catch {
              // skipped
            }
          }
        },
      }) as SourcedGauge;
      (metric[SOURCES] ??= new Set()).add(this.attached);
      this.gauges.push(metric);
      return metric;
    };
    this.metrics = {
      unitSeconds: make('Histogram', 'kafka_eo_unit_of_work_seconds', 'Units of work committed: from the claim to the Kafka commit', unit, { buckets: BUCKETS }),
      postgresCommitSeconds: make('Histogram', 'kafka_eo_postgres_commit_seconds', "A unit of work's PostgreSQL COMMIT", unit, { buckets: BUCKETS }),
      kafkaCommitSeconds: make('Histogram', 'kafka_eo_kafka_commit_seconds', "A unit of work's offsets and Kafka transaction commit", unit, { buckets: BUCKETS }),
      handlerSeconds: make('Histogram', 'kafka_eo_handler_seconds', 'A handler call (a record, or a batch), retries included', unit, { buckets: BUCKETS }),
      handled: make('Counter', 'kafka_eo_records_handled_total', 'Records handled and committed', unit),
      duplicates: make('Counter', 'kafka_eo_duplicates_skipped_total', 'Records skipped as duplicates of a message id handled before', unit),
      replayed: make('Counter', 'kafka_eo_outputs_replayed_total', 'Records whose recorded outputs were sent again (a Kafka commit had not happened)', unit),
      deadLetters: make('Counter', 'kafka_eo_dead_letters_total', 'Records dead-lettered, by reason', [...unit, 'reason']),
      retryMoves: make('Counter', 'kafka_eo_retry_moves_total', 'Records moved to a retry topic, by the topic they retry and the tier they moved to', [...unit, 'tier']),
      retryWaiting: gauge('kafka_eo_retry_waiting_records', "Records on a retry topic not committed yet (this member's partitions, at their last fetch)", [...unit, 'tier'], (metric, { sources, group }) => {
        for (const t of sources.retryTiers?.() ?? []) metric.set({ group, topic: t.retriesOf, tier: String(t.tier) }, t.waiting);
      }),
      retryNextDue: gauge('kafka_eo_retry_next_due_seconds', 'Seconds until the next record of a retry topic not handled yet is due (negative: the tier is behind); absent while none waits', [...unit, 'tier'], (metric, { sources, group }) => {
        const now = Date.now();
        for (const t of sources.retryTiers?.() ?? []) if (t.nextDueAt !== null) metric.set({ group, topic: t.retriesOf, tier: String(t.tier) }, (Date.parse(t.nextDueAt) - now) / 1000);
      }),
      parked: make('Counter', 'kafka_eo_keys_parked_total', 'Ordering keys parked (@OrderedEvent)', unit),
      released: make('Counter', 'kafka_eo_keys_released_total', 'Ordering keys released by an operator and replayed', unit),
      recreated: make('Counter', 'kafka_eo_producers_recreated_total', "A partition's transactional producer initialised again (after a fault or a new assignment)", unit),
      fenced: make('Counter', 'kafka_eo_fenced_commits_total', 'Kafka commits refused because another producer epoch took over', unit),
      hangingEnded: make('Counter', 'kafka_eo_hanging_transactions_ended_total', "Hanging transactions of a partition's own producer that the library ended (their coordinator no longer did), by outcome: committed or aborted", [...unit, 'outcome']),
      published: make('Counter', 'kafka_eo_published_total', 'Events EventPublisher acknowledged, by outcome: sent to Kafka or spooled to disk', ['client', 'topic', 'status']),
      drained: make('Counter', 'kafka_eo_spool_drained_total', 'Spooled events delivered to Kafka by the drainer', ['client']),
      outboxRelayed: make('Counter', 'kafka_eo_outbox_relayed_total', 'Outbox events the relay committed to Kafka', ['client', 'topic']),
      outboxSetAside: make('Counter', 'kafka_eo_outbox_set_aside_total', 'Outbox events Kafka refused for good, set aside for an operator', ['client', 'topic']),
      outboxWaiting: gauge('kafka_eo_outbox_waiting_events', 'Events in the outbox not relayed to Kafka yet, as the relay last counted them', ['client'], (metric, { sources, client }) => {
        const status = sources.outbox?.();
        if (status) metric.set({ client }, status.waiting);
      }),
      outboxOldest: gauge('kafka_eo_outbox_oldest_waiting_seconds', 'Age of the oldest event waiting in the outbox (0: none), as the relay last measured it', ['client'], (metric, { sources, client }) => {
        const status = sources.outbox?.();
        if (status) metric.set({ client }, status.oldestAgeMs / 1000);
      }),
      lag: gauge('kafka_eo_partition_lag', 'Records of the partition not committed yet, at its last fetch', [...unit, 'partition'], (metric, { sources, group }) => {
        for (const p of sources.partitions?.() ?? []) if (p.lag !== null) metric.set({ group, topic: p.topic, partition: String(p.partition) }, p.lag);
      }),
      waiting: gauge('kafka_eo_partition_waiting_seconds', 'Seconds the oldest fetched record of the partition has waited without a commit (0: nothing waits); over consumer.stallAfterMs the partition is stalled', [...unit, 'partition'], (metric, { sources, group }) => {
        for (const p of sources.partitions?.() ?? []) metric.set({ group, topic: p.topic, partition: String(p.partition) }, (p.waitingMs ?? 0) / 1000);
      }),
      sinceCommit: gauge('kafka_eo_seconds_since_last_commit', 'Seconds since the partition last committed a unit of work', [...unit, 'partition'], (metric, { sources, group }) => {
        const now = Date.now();
        for (const p of sources.partitions?.() ?? []) {
          if (p.lastCommitAt !== null) metric.set({ group, topic: p.topic, partition: String(p.partition) }, (now - Date.parse(p.lastCommitAt)) / 1000);
        }
      }),
      backlog: gauge('kafka_eo_spool_backlog_records', 'Events waiting in the publisher spool for Kafka', ['client'], (metric, { sources, client }) => {
        const status = sources.publisher?.();
        if (status) metric.set({ client }, status.spool.records);
      }),
      quarantined: gauge('kafka_eo_spool_quarantined_records', "Spooled events set aside because they can never be sent (refused for good, or unsendable), in the spool's quarantine file", ['client'], (metric, { sources, client }) => {
        const status = sources.publisher?.();
        if (status) metric.set({ client }, status.quarantined);
      }),
      breaker: gauge('kafka_eo_breaker_state', "The publisher's circuit breaker: 0 closed, 1 half-open, 2 open, 3 isolated", ['client'], (metric, { sources, client }) => {
        const status = sources.publisher?.();
        if (status) metric.set({ client }, BREAKER[status.breaker] ?? -1);
      }),
    };
  }

  get enabled(): boolean {
    return this.metrics !== undefined;
  }

  /** Every metric of the registry (the application's own too), in Prometheus's text format; undefined when off. */
  async scrape(): Promise<string | undefined> {
    return this.registry?.metrics();
  }

  /** What the lifecycle, the publisher and the relay attached (the instance's reports read them too). */
  get sources(): MetricsSources {
    return this.attached.sources;
  }

  /** The gauges read these at each scrape; the lifecycle and the publisher attach theirs. */
  attach(sources: MetricsSources): void {
    Object.assign(this.attached.sources, sources);
  }

  /** Stops this module's gauges from reporting (module shutdown); counters keep their totals. */
  detach(): void {
    for (const gauge of this.gauges) gauge[SOURCES]?.delete(this.attached);
  }

  unitCommitted(topic: string, counts: UnitCounts, timings: UnitTimings): void {
    this.record((m) => {
      const labels = { group: this.attached.group, topic };
      m.unitSeconds.labels(labels).observe(timings.unitMs / 1000);
      m.postgresCommitSeconds.labels(labels).observe(timings.postgresCommitMs / 1000);
      m.kafkaCommitSeconds.labels(labels).observe(timings.kafkaCommitMs / 1000);
      // Dead letters are counted by reason, as they are reported (deadLetter).
      if (counts.handled > 0) m.handled.labels(labels).inc(counts.handled);
      if (counts.duplicates > 0) m.duplicates.labels(labels).inc(counts.duplicates);
      if (counts.replayed > 0) m.replayed.labels(labels).inc(counts.replayed);
    });
  }

  handlerTime(topic: string, ms: number): void {
    this.record((m) => m.handlerSeconds.labels({ group: this.attached.group, topic }).observe(ms / 1000));
  }

  deadLetter(topic: string, reason: string, parkedNow: boolean): void {
    this.record((m) => {
      m.deadLetters.labels({ group: this.attached.group, topic, reason }).inc();
      if (parkedNow) m.parked.labels({ group: this.attached.group, topic }).inc();
    });
  }

  /** A record of `topic` moved to its retry tier `tier`. */
  retryMoved(topic: string, tier: number): void {
    this.record((m) => m.retryMoves.labels({ group: this.attached.group, topic, tier: String(tier) }).inc());
  }

  keyReleased(topic: string): void {
    this.record((m) => m.released.labels({ group: this.attached.group, topic }).inc());
  }

  producerRecreated(topic: string): void {
    this.record((m) => m.recreated.labels({ group: this.attached.group, topic }).inc());
  }

  fencedCommit(topic: string): void {
    this.record((m) => m.fenced.labels({ group: this.attached.group, topic }).inc());
  }

  hangingTransactionEnded(topic: string, outcome: 'committed' | 'aborted'): void {
    this.record((m) => m.hangingEnded.labels({ group: this.attached.group, topic, outcome }).inc());
  }

  published(topic: string, status: 'sent' | 'spooled', count = 1): void {
    this.record((m) => m.published.labels({ client: this.attached.client, topic, status }).inc(count));
  }

  drained(count: number): void {
    this.record((m) => m.drained.labels({ client: this.attached.client }).inc(count));
  }

  outboxRelayed(topic: string, count: number): void {
    this.record((m) => m.outboxRelayed.labels({ client: this.attached.client, topic }).inc(count));
  }

  outboxSetAside(topic: string, count: number): void {
    this.record((m) => m.outboxSetAside.labels({ client: this.attached.client, topic }).inc(count));
  }

  /** Records a metric; an error (prom-client's, or a registry in a strange state) is logged once, never thrown. */
  private record(update: (metrics: Record<string, PromMetric>) => void): void {
    if (!this.metrics) return;
    try {
      update(this.metrics);
    } catch (err) {
      if (this.failed) return;
      this.failed = true;
      this.logger.warn(`a metric could not be recorded (${(err as Error).message}); the work it measures is not affected, and further errors are not logged`);
    }
  }
}

function loadPromClient(): PromClient {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('prom-client') as PromClient;
  } catch (err) {
    if ((err as { code?: string }).code !== 'MODULE_NOT_FOUND') throw err;
    throw new InvalidOptionsError('metrics', `needs the package prom-client (${OPTIONAL_PEERS['prom-client']}, an optional peer dependency of kafka-exactly-once): ${installLineOf('prom-client')}`);
  }
}
