import { Logger } from '@nestjs/common';
import { withDeadline } from '../engine/deadline';
import { FaultInjector } from '../engine/fault-injector';
import { wakeableSleep } from '../engine/sleep';
import { OutboxRelayError } from '../errors/outbox-relay.error';
import { ProduceIncompleteError } from '../errors/produce-incomplete.error';
import { OUTBOX_CHANNEL, OUTBOX_RELAY_LOCK, OUTBOX_RELAY_TABLE, OUTBOX_SET_ASIDE_TABLE, OUTBOX_TABLE } from '../kafka-exactly-once.constants';
import type { KafkaExactlyOnceMetrics } from '../metrics/kafka-exactly-once.metrics';
import type { ResolvedOptions } from '../options/resolved-options';
import type { CommittedRecords } from '../client/hanging-transactions';
import { CheckedProducer, type KafkaClient, type Message, messageDigest, type RetryOptions, takeCommitted } from '../kafkajs';
import { describeRefusal, refusedForGood } from '../publishing/send-refusal';
import { transactionalRetry } from '../transaction/partition-producer';
import { outboxTransactionalId } from '../transaction/transactional-ids';
import { OutboxCheckpoints } from './outbox-checkpoints';
import { OUTBOX_COLUMNS, outboxMessage, type OutboxRow } from './outbox-event';
import type { RelayBatchTimes } from './relay-steps';


/**
 * Settings of the relay's own session. The next batch is the first waiting events in position order: read in the
 * order of the waiting index, that is a batch's rows (and one more) whatever the backlog. PostgreSQL's planner chooses by its
 * statistics, and an outbox's are rarely current (the table swings from empty to a backlog, after a Kafka outage
 * say, faster than autovacuum analyzes it): believing the table small, it read and sorted every waiting event for
 * each batch (an external sort on disk past some 40,000), and catching up on a backlog took time quadratic in it.
 * No statement of the relay needs a sort (it orders its rows itself), so the session has none.
 */
export const RELAY_SESSION_SETTINGS = ['SET enable_sort = off'];

/**
 * Gives the next batch number to the first waiting events in position order, up to $1 events and $2 bytes (the
 * first event always), taking the number from the relay row, in one statement (one snapshot); returns the rows
 * with the number. Read by the waiting index in position order under RELAY_SESSION_SETTINGS.
 */
export const MARK_STATEMENT = `WITH picked AS (
         SELECT position, row_number() OVER w AS n, sum(octet_length(payload) + octet_length(headers) + octet_length(aggregateid)) OVER w AS total
         FROM ${OUTBOX_TABLE} WHERE batch IS NULL WINDOW w AS (ORDER BY position) ORDER BY position LIMIT $1),
       numbered AS (
         UPDATE ${OUTBOX_RELAY_TABLE} SET last_batch = last_batch + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM picked) RETURNING last_batch)
       UPDATE ${OUTBOX_TABLE} o SET batch = numbered.last_batch FROM picked p, numbered
       WHERE o.position = p.position AND (p.n = 1 OR p.total <= $2)
       RETURNING ${OUTBOX_COLUMNS.split(', ').map((c) => `o.${c}`).join(', ')}, numbered.last_batch::text AS batch_number`;

/** Rows in position order (positions are the text of non-negative integers: shorter is smaller). */
function inPositionOrder<T extends { position: string }>(rows: T[]): T[] {
  return rows.sort((a, b) => a.position.length - b.position.length || (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
}

/** A batch given out: its number, its rows in position order, and when the statement that gave it out ran. */
interface GivenBatch {
  batch: bigint;
  rows: OutboxRow[];
  markedFrom: number;
  markedAt: number;
}

/** A standby relay asks for the lock this often. */
const STANDBY_RETRY_MS = 2000;
/** How often the relay counts the events waiting (for health and metrics). */
const COUNT_EVERY_MS = 5000;

export type OutboxRelayConfig = NonNullable<ResolvedOptions['outbox']> & {
  transactionalIdPrefix: string;
  transactionTimeoutMs: number;
  abortHangingTransactions: boolean;
  /** The application's `kafka.retry`, if any (a transactional producer's first wait is 20 ms unless it sets one). */
  retry?: RetryOptions;
  /** The module's declared topics (with its prefix), where the relay's transactions write. */
  declaredTopics?: string[];
};

/** The node-postgres client the relay holds (its own type, so that the library's types need no @types/pg). */
export interface PoolClient {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'notification', listener: (message: unknown) => void): unknown;
  off(event: 'error' | 'notification', listener: (...args: any[]) => void): unknown;
  release(err?: Error | boolean): void;
}

/** Where the relay's PostgreSQL connections come from: node-postgres's pool (the DataSource's, or the CLI's own). */
export interface PgPool {
  connect(): Promise<PoolClient>;
}

export interface OutboxRelayStatus {
  /** `active`: holds the relay lock and relays; `standby`: another relay holds it; `failing`: retrying after `lastError`. */
  state: 'starting' | 'active' | 'standby' | 'failing' | 'stopped';
  /** The last batch known committed in Kafka. */
  relayedBatch: string;
  /** Events relayed by this relay since it started. */
  relayed: number;
  setAside: number;
  /** Events waiting and the age of the oldest, as last counted (every 5 s while active). */
  waiting?: { events: number; oldestAgeMs: number; oldestTopic?: string; countedAt: number };
  lastError?: string;
  lastErrorAt?: string;
}

/**
 * Moves the outbox's committed events to Kafka exactly once (docs/outbox.md). One relay is active per database:
 * it holds a PostgreSQL advisory lock on a connection of its own, on which it also LISTENs for writers' commits
 * (and polls, as a fallback). Its transactional id is fixed, so that its InitProducerId fences an earlier relay
 * that stalled and settles the transaction it left open; only then does it read its checkpoint.
 *
 * A batch is a set of waiting events given a batch number in PostgreSQL (in position order, so in commit order
 * per key) before anything is sent. The batch's events and its checkpoint record go in one Kafka transaction;
 * its rows are deleted only once that transaction committed. After a crash anywhere, the checkpoint read back
 * says which batch is the last in Kafka: rows of batches at or below it are deleted without being sent again,
 * and the first batch above it is sent, with exactly the rows it was given.
 */
export class OutboxRelay {
  private readonly logger = new Logger(OutboxRelay.name);
  private readonly checkpoints: OutboxCheckpoints;
  private readonly faults = new FaultInjector();
  private running = false;
  private loop?: Promise<void>;
  private wakeUp?: () => void;
  private notified = false;
  private client?: PoolClient;
  private clientError?: Error;
  /** Whether the session's connection holds the relay lock. */
  private locked = false;
  private producer?: CheckedProducer;
  /** After a refused batch: batches of one event until past this position, to find the event Kafka refuses. */
  private isolateUntil?: bigint;
  private lastCount = 0;
  private readonly current: OutboxRelayStatus = { state: 'stopped', relayedBatch: '0', relayed: 0, setAside: 0 };

  constructor(
    private readonly kafka: KafkaClient,
    private readonly pool: PgPool,
    private readonly config: OutboxRelayConfig,
    private readonly metrics?: KafkaExactlyOnceMetrics,
    /** Told when each batch's steps ran, once it committed (a breakdown of the relay's latency: bench/variants/outbox.js). */
    private readonly observe?: (times: RelayBatchTimes) => void,
  ) {
    this.checkpoints = new OutboxCheckpoints(
      kafka,
      config.checkpointTopic,
      (message) => this.logger.warn(`outbox relay ${config.name}: ${message}`),
      this.faults,
      (message) => this.logger.error(`outbox relay ${config.name}: ${message}`),
    );
    metrics?.attach({ outbox: () => (this.current.waiting ? { waiting: this.current.waiting.events, oldestAgeMs: this.current.waiting.oldestAgeMs } : undefined) });
  }

  private readonly onClientError = (err: Error) => {
    this.clientError = err;
    this.wakeUp?.();
  };

  private readonly onNotification = () => {
    this.notified = true;
    this.wakeUp?.();
  };

  status(): OutboxRelayStatus {
    return { ...this.current, waiting: this.current.waiting && { ...this.current.waiting } };
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.current.state = 'starting';
    this.loop = this.run();
  }

  /** Stops after the batch in progress (a batch cut short is sent again by the next relay: nothing is lost or doubled). */
  async stop(): Promise<void> {
    this.running = false;
    this.wakeUp?.();
    await this.loop;
    await this.checkpoints.disconnect();
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      try {
        await this.session();
        failures = 0;
      } catch (err) {
        failures++;
        const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        if (this.current.lastError !== message || failures % 20 === 1) this.logger.warn(`outbox relay ${this.config.name}: ${message}; trying again`);
        Object.assign(this.current, { state: 'failing', lastError: message, lastErrorAt: new Date().toISOString() });
        await this.endSession(true);
        await this.idle(err instanceof OutboxRelayError ? 60000 : Math.min(10000, 250 * 2 ** Math.min(failures, 6)));
        continue;
      }
      const standby = this.current.state === 'standby';
      await this.endSession(false);
      if (standby) await this.idle(STANDBY_RETRY_MS);
    }
    this.current.state = 'stopped';
  }

  /** Holds the relay lock and relays until stopped or until something fails (the caller starts over). */
  private async session(): Promise<void> {
    const connecting = this.pool.connect();
    const client = await withDeadline(connecting, this.config.sendTimeoutMs, 'PostgreSQL').catch((err) => {
      void connecting.then((late) => late.release(true), () => undefined); // never left checked out of the pool
      throw err;
    });
    this.client = client;
    this.clientError = undefined;
    client.on('error', this.onClientError);
    const [{ locked }] = await this.sql<{ locked: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS locked', [OUTBOX_RELAY_LOCK]);
    if (!locked) {
      this.current.state = 'standby';
      return; // the connection goes back to the pool as it came; the run loop waits and asks again
    }
    this.locked = true;
    // Settings of this session only: the connection is closed, not pooled, when the session ends.
    await this.sql(`SET statement_timeout = ${Math.min(this.config.sendTimeoutMs, 60000)}`);
    await this.sql(`SET application_name = 'kafka-eo outbox relay'`);
    for (const setting of RELAY_SESSION_SETTINGS) await this.sql(setting);
    client.on('notification', this.onNotification);
    await this.sql(`LISTEN ${OUTBOX_CHANNEL}`);
    const { knownRelayed, lastBatch, key, outboxId } = await this.claimName();
    await this.checkpoints.ensureTopic(this.config.sendTimeoutMs);
    // The database's outbox id in the transactional id too: two databases relayed under one name (shards, or
    // two environments on one cluster) do not fence each other.
    const transactionalId = outboxTransactionalId(this.config.transactionalIdPrefix, this.config.name, outboxId);
    // The next batch's first request comes right after a commit, often before the coordinator has written the
    // markers (CONCURRENT_TRANSACTIONS): retried from 20 ms, not KafkaJS's 300.
    this.producer = new CheckedProducer(this.kafka, { transactionalId, transactionTimeout: this.config.transactionTimeoutMs, retry: transactionalRetry(this.config.retry) });
    // InitProducerId first: it fences an earlier relay and settles its open transaction, so that the checkpoint
    // read next is the last word until another relay's InitProducerId (which would fence this one in turn).
    await withDeadline(this.producer.connect(), this.config.sendTimeoutMs, 'Kafka');
    // The topics a hanging transaction of this relay may hold besides the checkpoint: those declared to the module
    // (the kafka-eo command knows none) and those of the events still waiting in the table.
    const topics = async () => [
      ...new Set([...(this.config.declaredTopics ?? []), ...(await this.sql<{ topic: string }>(`SELECT DISTINCT aggregatetype AS topic FROM ${OUTBOX_TABLE}`)).map((r) => r.topic)]),
    ];
    const own = this.config.abortHangingTransactions
      ? {
          transactionalId,
          abortAfterMs: this.config.transactionTimeoutMs + 5000,
          key,
          knownRelayed,
          topics,
          delivered: (committed: CommittedRecords) => this.dropDelivered(committed),
          running: () => this.running,
          // Health shows why the relay waits (the session goes on, it has not failed).
          waiting: (why: string) => Object.assign(this.current, { lastError: why, lastErrorAt: new Date().toISOString() }),
        }
      : undefined;
    let relayed = (await this.checkpoints.last(key, this.config.sendTimeoutMs, own)).batch;
    if (relayed < knownRelayed) {
      throw new OutboxRelayError(
        'checkpoint-behind',
        `the outbox relay's checkpoint in ${this.config.checkpointTopic} says batch ${relayed}, but the database knows batch ${knownRelayed} was relayed: the topic was deleted or recreated, or this relay points at another Kafka cluster. Relaying now could send events again; see docs/outbox.md, "Operations"`,
      );
    }
    if (relayed > lastBatch) {
      throw new OutboxRelayError(
        'checkpoint-ahead',
        `the outbox relay's checkpoint in ${this.config.checkpointTopic} says batch ${relayed} is in Kafka, but this database gave out batches up to ${lastBatch} only: the database was restored from an earlier backup (or the checkpoint is of another one). Relaying now could delete events that were never sent; see docs/outbox.md, "Operations"`,
      );
    }
    this.current.state = 'active';
    this.current.relayedBatch = relayed.toString();
    this.logger.log(`outbox relay ${this.config.name} active (transactional id ${transactionalId}); batch ${relayed} is the last in Kafka`);
    let cleaned = -1n;
    const cleanUpTo = async (batch: bigint) => {
      if (cleaned >= batch) return;
      await this.cleanUp(batch);
      cleaned = batch;
      this.faults.reach('outbox-after-cleanup');
    };
    const tidy = async (upTo: bigint) => {
      await cleanUpTo(upTo);
      await this.count();
    };
    // Batches given out and not in Kafka (a crash left them) go first, as they are. Only this session marks
    // batches from now on (every statement of the relay runs on the connection that holds the lock).
    let pending = await this.lowestPending(relayed);
    // The next batch, given out in PostgreSQL while Kafka takes the current one (a crash leaves it given out and
    // not in Kafka: it goes first when the relay starts again, as it is).
    let next: Promise<GivenBatch | undefined> | undefined;
    try {
      while (this.running) {
        if (this.clientError) throw this.clientError;
        let given: Omit<GivenBatch, 'markedFrom' | 'markedAt'> & Partial<GivenBatch>;
        if (pending !== undefined) {
          await tidy(relayed);
          given = { batch: pending, rows: inPositionOrder(await this.sql<OutboxRow>(`SELECT ${OUTBOX_COLUMNS} FROM ${OUTBOX_TABLE} WHERE batch = $1`, [pending.toString()])) };
          pending = await this.lowestPending(pending);
        } else {
          const early = next;
          next = undefined;
          const marked = await (early ?? tidy(relayed).then(() => this.mark()));
          if (marked === undefined) {
            await cleanUpTo(relayed);
            await this.idle(this.config.pollIntervalMs);
            continue;
          }
          given = marked;
        }
        const { batch, rows } = given;
        // While Kafka takes this batch: the rows of batches already in Kafka go at once, and the next batch is given
        // out once this one's records are in, while its commit (EndTxn) is on its way: an event committed meanwhile
        // goes in the next transaction, not in the one after it (given out as this one began, the next batch would
        // leave out every event committed during this transaction). Not while a refused event is looked for: those
        // batches are of one event, given out one at a time.
        const giveNext = pending === undefined && this.isolateUntil === undefined && this.running;
        const tidied = giveNext ? tidy(relayed) : undefined;
        tidied?.catch(() => undefined); // awaited below
        const sending = this.send(key, given, () => {
          if (!tidied || !this.running) return;
          next = tidied.then(() => this.mark());
          next.catch(() => undefined); // awaited below, or before the session ends
        });
        let refusal: { topic: string; reason: string } | undefined;
        try {
          refusal = await sending;
        } finally {
          // Never a statement left running on the connection: the clean-up, when no batch was given out after it.
          if (!next) await tidied;
        }
        if (refusal) {
          // Kafka refused an event for good: once the next batch (if any) is given out, every batch not in Kafka
          // is given back, and the relay starts again from its checkpoint.
          await next?.catch(() => undefined);
          next = undefined;
          await this.refused(batch, rows, relayed, refusal.topic, refusal.reason);
          return;
        }
        relayed = batch;
        this.current.relayedBatch = relayed.toString();
        this.faults.reach('outbox-after-kafka-commit');
      }
    } finally {
      // Never leave a statement running on the connection the session ends with.
      await next?.catch(() => undefined);
    }
  }

  /**
   * The relay's row: taken by the first relay of the database; a relay of another name is refused. Returns the
   * last batch the database knows relayed, and the key of its checkpoints: the name and the database's outbox
   * id, so that a database made again (or another one under the same name) never takes an old checkpoint for its own.
   */
  private async claimName(): Promise<{ knownRelayed: bigint; lastBatch: bigint; key: string; outboxId: string }> {
    await this.sql(`INSERT INTO ${OUTBOX_RELAY_TABLE} (id, name) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, [this.config.name]);
    const [row] = await this.sql<{ name: string; relayed_batch: string; last_batch: string; outbox_id: string }>(`SELECT name, relayed_batch::text, last_batch::text, outbox_id::text FROM ${OUTBOX_RELAY_TABLE} WHERE id = 1`);
    if (row.name !== this.config.name) {
      throw new OutboxRelayError(
        'name-mismatch',
        `this database's outbox is relayed under the name "${row.name}" (its checkpoint is kept under that key), and this relay is "${this.config.name}": set outbox.name to "${row.name}" (a relay of another name would send the waiting events again)`,
      );
    }
    return { knownRelayed: BigInt(row.relayed_batch), lastBatch: BigInt(row.last_batch), key: `${this.config.name}:${row.outbox_id}`, outboxId: row.outbox_id };
  }

  /** Deletes the rows of batches at or below the checkpoint: they are in Kafka. */
  private async cleanUp(relayed: bigint): Promise<void> {
    await this.sql(
      `WITH gone AS (DELETE FROM ${OUTBOX_TABLE} WHERE batch IS NOT NULL AND batch <= $1 RETURNING 1)
       UPDATE ${OUTBOX_RELAY_TABLE} SET relayed_batch = GREATEST(relayed_batch, $1), relayed = relayed + (SELECT count(*) FROM gone) WHERE id = 1`,
      [relayed.toString()],
    );
  }

  /**
   * Before the relay aborts a hanging transaction of its own producer (OutboxCheckpoints): the events given out in
   * batches that Kafka already holds committed from that producer (`committed`: counts of record digests) are
   * deleted from the outbox as relayed, in one statement, so that the batch sent again after the abort (by this
   * relay or the next) leaves them out. An event matches only a committed record of its very bytes (topic, key,
   * value and headers, its message id among them), each committed record one event. Returns how many went.
   */
  private async dropDelivered(committed: CommittedRecords): Promise<number> {
    if (committed.size === 0) return 0;
    const given = await this.sql<OutboxRow>(`SELECT ${OUTBOX_COLUMNS} FROM ${OUTBOX_TABLE} WHERE batch IS NOT NULL`);
    const left = new Map(committed);
    const delivered = given.filter((row) => {
      let digest: string;
      try {
        digest = messageDigest(row.aggregatetype, outboxMessage(row));
      } catch {
        return false; // headers of no form Kafka takes: never sent
      }
      return takeCommitted(left, [digest]).length > 0;
    });
    if (delivered.length === 0) return 0;
    const [row] = await this.sql<{ n: number }>(
      `WITH gone AS (DELETE FROM ${OUTBOX_TABLE} WHERE position = ANY($1::bigint[]) AND batch IS NOT NULL RETURNING 1)
       UPDATE ${OUTBOX_RELAY_TABLE} SET relayed = relayed + (SELECT count(*) FROM gone) WHERE id = 1 RETURNING (SELECT count(*)::int FROM gone) AS n`,
      [delivered.map((r) => r.position)],
    );
    return row?.n ?? 0;
  }

  /** The lowest batch given out but not in Kafka yet (a crash, or an earlier relay, left it): it goes first, as it is. */
  private async lowestPending(relayed: bigint): Promise<bigint | undefined> {
    const [row] = await this.sql<{ batch: string | null }>(`SELECT min(batch)::text AS batch FROM ${OUTBOX_TABLE} WHERE batch > $1`, [relayed.toString()]);
    return row.batch === null ? undefined : BigInt(row.batch);
  }

  /**
   * Gives the next batch number to the first waiting events in position order (within the batch caps), in one
   * statement (one snapshot) that also takes the number from the relay row: batch numbers follow positions, so
   * a key's events reach Kafka in order. Returns the batch and its rows in position order, or undefined when
   * nothing waits (no number is taken then).
   */
  private async mark(): Promise<GivenBatch | undefined> {
    this.notified = false;
    let limit = this.config.batchMaxRecords;
    if (this.isolateUntil !== undefined) {
      const [first] = await this.sql<{ position: string | null }>(`SELECT min(position)::text AS position FROM ${OUTBOX_TABLE} WHERE batch IS NULL`);
      if (first.position !== null && BigInt(first.position) <= this.isolateUntil) limit = 1;
      else this.isolateUntil = undefined;
    }
    const markedFrom = Date.now();
    const rows = await this.sql<OutboxRow & { batch_number: string }>(MARK_STATEMENT, [limit, this.config.batchMaxBytes]);
    if (rows.length === 0) return undefined;
    return { batch: BigInt(rows[0].batch_number), rows: inPositionOrder(rows), markedFrom, markedAt: Date.now() };
  }

  /**
   * Sends a batch and its checkpoint in one Kafka transaction; `beforeCommit` is called once its records are in
   * Kafka, as its commit is sent. Undefined: committed. Otherwise Kafka refused an event of the returned topic for
   * good; the caller sets it aside (or splits the batch to find it) and the relay starts again from its checkpoint.
   * Anything else throws, and the relay starts again from its checkpoint too (a commit whose answer was lost may
   * have happened: the checkpoint says).
   */
  private async send(key: string, given: Omit<GivenBatch, 'markedFrom' | 'markedAt'> & Partial<GivenBatch>, beforeCommit: () => void): Promise<{ topic: string; reason: string } | undefined> {
    const { batch, rows } = given;
    const producer = this.producer as CheckedProducer;
    const sendFrom = Date.now();
    let sentAt = sendFrom;
    const byTopic = new Map<string, Message[]>();
    for (const row of rows) {
      const messages = byTopic.get(row.aggregatetype) ?? [];
      messages.push(outboxMessage(row));
      byTopic.set(row.aggregatetype, messages);
    }
    const transaction = await withDeadline(producer.transaction(), this.config.sendTimeoutMs, 'Kafka');
    try {
      await withDeadline(transaction.send([...[...byTopic].map(([topic, messages]) => ({ topic, messages })), this.checkpoints.record(key, batch, rows.length)]), this.config.sendTimeoutMs, 'Kafka');
      sentAt = Date.now();
      this.faults.reach('outbox-before-kafka-commit');
      const committing = withDeadline(transaction.commit(), this.config.sendTimeoutMs, 'Kafka');
      beforeCommit();
      await committing;
    } catch (err) {
      // Aborted by the next epoch (InitProducerId), never under this one: a Produce given up at its deadline may
      // still land, and an abort marker before it would leave it in a transaction of its own.
      producer.endFailed();
      if (transaction.isActive()) await transaction.abort().catch(() => undefined);
      const refusal = refusedForGood(err);
      const refused = err instanceof ProduceIncompleteError ? err.refused : undefined;
      if (!refusal || !refused || refused.topic === this.config.checkpointTopic) throw err;
      return { topic: refused.topic, reason: describeRefusal(refusal, err) };
    }
    for (const [topic, messages] of byTopic) this.metrics?.outboxRelayed(topic, messages.length);
    this.current.relayed += rows.length;
    this.observe?.({ batch, messageIds: rows.map((r) => r.id), markedFrom: given.markedFrom, markedAt: given.markedAt, sendFrom, sentAt, committedAt: Date.now() });
    return undefined;
  }

  /**
   * Kafka refused a record of `topic` for good. A batch of one event: that event is set aside with the reason,
   * and the others move. A larger batch: every batch not in Kafka is given back (their events wait again, in the
   * same positions), and the events up to the last of `topic` in this batch go one per batch until the refused
   * one is found.
   */
  private async refused(batch: bigint, rows: OutboxRow[], relayed: bigint, topic: string, reason: string): Promise<void> {
    const suspects = rows.filter((r) => r.aggregatetype === topic);
    if (rows.length === 1 && suspects.length === 1) {
      await this.sql('BEGIN');
      try {
        await this.sql(
          `WITH moved AS (DELETE FROM ${OUTBOX_TABLE} WHERE position = $1 RETURNING ${OUTBOX_COLUMNS})
           INSERT INTO ${OUTBOX_SET_ASIDE_TABLE} (${OUTBOX_COLUMNS}, reason) SELECT ${OUTBOX_COLUMNS}, $2 FROM moved`,
          [suspects[0].position, reason.slice(0, 2000)],
        );
        await this.sql('COMMIT');
      } catch (err) {
        await this.sql('ROLLBACK').catch(() => undefined);
        throw err;
      }
      this.current.setAside += 1;
      this.metrics?.outboxSetAside(topic, 1);
      this.logger.error(`outbox relay ${this.config.name}: Kafka refused event ${suspects[0].id} (position ${suspects[0].position}) for topic ${topic} for good (${reason}); it is set aside in ${OUTBOX_SET_ASIDE_TABLE}, the others move on (kafka-eo outbox list | retry | discard)`);
      return;
    }
    this.isolateUntil = suspects.reduce((max, r) => (BigInt(r.position) > max ? BigInt(r.position) : max), 0n);
    await this.sql(`UPDATE ${OUTBOX_TABLE} SET batch = NULL WHERE batch > $1`, [relayed.toString()]);
    this.logger.warn(`outbox relay ${this.config.name}: Kafka refused a record of batch ${batch} for topic ${topic} for good (${reason}); sending its events one per batch to find it`);
  }

  /** Counts the waiting events now and then, for health and metrics. */
  private async count(): Promise<void> {
    if (Date.now() - this.lastCount < COUNT_EVERY_MS) return;
    this.lastCount = Date.now();
    try {
      const [row] = await this.sql<{ events: number; oldest: Date | null; topic: string | null }>(
        `SELECT (SELECT count(*)::int FROM ${OUTBOX_TABLE}) AS events, first.created_at AS oldest, first.aggregatetype AS topic
         FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT created_at, aggregatetype FROM ${OUTBOX_TABLE} ORDER BY position LIMIT 1) AS first ON true`,
      );
      this.current.waiting = { events: row.events, oldestAgeMs: row.oldest ? Math.max(0, Date.now() - new Date(row.oldest).getTime()) : 0, oldestTopic: row.topic ?? undefined, countedAt: Date.now() };
    } catch (err) {
      // Health and metrics only: a count that fails (a statement timeout on a huge backlog) stops no relaying.
      if (this.clientError) throw err;
    }
  }

  private async sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
    if (this.clientError) throw this.clientError;
    const client = this.client as PoolClient;
    return (await withDeadline(client.query(text, params), Math.min(this.config.sendTimeoutMs, 60000) + 1000, 'PostgreSQL')).rows as T[];
  }

  /** Waits `ms`, or less when a writer's commit is notified or the relay is stopped. */
  private idle(ms: number): Promise<void> {
    if (!this.running) return Promise.resolve();
    if (this.notified && this.current.state === 'active') {
      this.notified = false;
      return Promise.resolve();
    }
    return wakeableSleep(ms, (wake) => (this.wakeUp = wake));
  }

  /** Lets go of the producer and the connection (closed after a failure: the lock goes with it). */
  private async endSession(failed: boolean): Promise<void> {
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect().catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    if (!failed && !this.clientError && this.locked) {
      // Let go of the lock at once (a standby takes over in its next round), before the connection is closed.
      await withDeadline(client.query('SELECT pg_advisory_unlock_all()'), 5000, 'PostgreSQL').catch(() => (failed = true));
    }
    client.off('notification', this.onNotification);
    client.off('error', this.onClientError);
    // A session that held the lock (LISTEN, its settings) is closed; one that only asked for the lock is pooled again.
    const locked = this.locked;
    this.locked = false;
    client.release(failed || this.clientError || locked ? new Error('outbox relay session ended') : undefined);
  }
}
