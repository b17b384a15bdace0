import { closeSync, openSync, writeSync } from 'fs';
import { randomUUID } from 'crypto';
import { EventPublisher } from 'kafka-exactly-once';
import { PaymentRequested, TOPICS, UserSignedUp, paymentForWire } from '../demo-events';
import type { LoadOptions } from './load-options';
import { prng } from './prng';

export interface LoadSummary {
  kind: LoadOptions['kind'];
  topic: string;
  /** distinct events */
  events: number;
  /** publishes that repeated an earlier event's message id */
  duplicatePublishes: number;
  sent: number;
  spooled: number;
  elapsedMs: number;
  /** When the last publish was answered (ms since the epoch). */
  finishedAt: number;
  /** When the last publish answered `spooled` was answered (ms since the epoch): every later one went out live. */
  lastSpooledAt?: number;
  /**
   * When the publisher's spool last became empty after holding records (ms since the epoch), sampled every 100 ms;
   * unset while it still holds records when the last publish is answered (the load command waits for them).
   */
  spoolEmptyAt?: number;
  /** The most records the spool held at once, sampled every 100 ms. */
  spoolPeak: number;
}

interface Publish {
  topic: string;
  event: UserSignedUp | PaymentRequested;
  messageId: string;
}

/** Generates the workload and publishes it with at most `concurrency` publishes in flight, paced by `rate`. */
export async function runLoad(publisher: EventPublisher, options: LoadOptions, onProgress: (done: number, total: number) => void, format: 'avro' | 'json' = 'avro'): Promise<LoadSummary> {
  const random = prng(options.seed);
  const recent: Publish[] = [];
  const plan: Publish[] = [];
  for (let i = 0; i < options.count; i++) {
    const publish: Publish =
      options.kind === 'payments'
        ? {
            topic: TOPICS.paymentsRequested,
            messageId: randomUUID(),
            event: {
              paymentId: randomUUID(),
              accountId: `${options.accountPrefix}${Math.floor(random() * options.accounts)}`,
              amountCents: BigInt(Math.floor(random() * 5000) + 100) * (random() < 0.6 ? 1n : -1n),
              requestedAt: new Date().toISOString(),
            },
          }
        : {
            topic: TOPICS.usersSignedUp,
            messageId: randomUUID(),
            event: { userId: options.userIdStart + i, userEmail: `user${options.userIdStart + i}@example.com`, timestamp: new Date().toISOString() },
          };
    plan.push(publish);
    recent.push(publish);
    if (recent.length > 100) recent.shift();
    if (random() < options.duplicates) plan.push(recent[Math.floor(random() * recent.length)]);
  }

  const ackLog = options.ackLog ? openSync(options.ackLog, 'a') : undefined;
  const started = Date.now();
  let sent = 0;
  let spooled = 0;
  let lastSpooledAt: number | undefined;
  // The spool's backlog, for the catch-up after an outage: its peak, and when it last emptied.
  let spoolPeak = 0;
  let spoolEmptyAt: number | undefined;
  const sampleSpool = () => {
    const records = publisher.status().spool.records;
    if (records > spoolPeak) spoolPeak = records;
    if (records > 0) spoolEmptyAt = undefined;
    else if (spoolPeak > 0 && spoolEmptyAt === undefined) spoolEmptyAt = Date.now();
  };
  const sampler = setInterval(sampleSpool, 100);
  let done = 0;
  let next = 0;
  const worker = async () => {
    while (next < plan.length) {
      const index = next++;
      if (options.rate > 0) {
        const due = started + (index * 1000) / options.rate;
        if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
      }
      const { topic, event, messageId } = plan[index];
      const result = await publisher.publish(topic, topic === TOPICS.paymentsRequested ? paymentForWire(event as PaymentRequested, format) : event, { messageId });
      // Written before anything else happens: a verifier checks that every acknowledged publish reaches Kafka,
      // also when this process is killed right after.
      if (ackLog !== undefined) writeSync(ackLog, `${result.messageId} ${result.status}\n`);
      if (result.status === 'sent') sent++;
      else {
        spooled++;
        lastSpooledAt = Date.now();
      }
      done++;
      onProgress(done, plan.length);
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, worker));
    sampleSpool();
  } finally {
    clearInterval(sampler);
    if (ackLog !== undefined) closeSync(ackLog);
  }
  return {
    kind: options.kind,
    topic: plan[0]?.topic ?? '',
    events: options.count,
    duplicatePublishes: plan.length - options.count,
    sent,
    spooled,
    elapsedMs: Date.now() - started,
    finishedAt: Date.now(),
    lastSpooledAt,
    spoolEmptyAt,
    spoolPeak,
  };
}
