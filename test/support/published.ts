import { randomUUID } from 'crypto';
import { Kafka } from 'kafkajs';
import { readTopic } from './kafka';
import { getJson, postJson } from './producer-app';

/** A publish the publisher acknowledged (sent or spooled), in the order the caller saw the acknowledgements. */
export interface Acknowledged {
  messageId: string;
  key: string;
}

/** Waits until producer-app's health shows an empty spool and a closed breaker. */
export async function waitForEmptySpool(baseUrl: string, timeoutMs = 90000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const health = await getJson(`${baseUrl}/health`).catch(() => undefined);
    const publisher = health?.body?.details?.publisher;
    if (publisher?.spool?.records === 0 && publisher?.breaker === 'closed') return publisher;
    if (Date.now() > deadline) throw new Error(`spool not drained: ${JSON.stringify(health?.body)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Every acknowledged message id is on the topic (read committed), and for each key the FIRST copies arrive in
 * acknowledgement order (a replay after a failure may add later duplicates, which consumers drop by message
 * id). Returns what was read, for further checks.
 */
export async function expectDeliveredInOrder(kafka: Kafka, topic: string, acknowledged: Acknowledged[], eventType = 'com.example.PaymentRequested') {
  const wanted = new Set(acknowledged.map((s) => s.messageId));
  // Checked after every record read: count incrementally (a scan of all records read so far each time made the
  // read of a 15,000-record soak quadratic, slow enough to run out of its time on a busy machine).
  const found = new Set<string>();
  let scanned = 0;
  const records = await readTopic(kafka, topic, {
    timeoutMs: 90000,
    until: (r) => {
      for (; scanned < r.length; scanned++) {
        const id = r[scanned].headers['message-id'];
        if (wanted.has(id)) found.add(id);
      }
      return found.size === wanted.size;
    },
  });
  const firstSeen: string[] = [];
  const seen = new Set<string>();
  for (const r of [...records].sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)))) {
    const id = r.headers['message-id'];
    if (!seen.has(id)) firstSeen.push(id);
    seen.add(id);
  }
  const keyOf = new Map(acknowledged.map((s) => [s.messageId, s.key]));
  const byKey = (ids: string[]) => {
    const out = new Map<string, string[]>();
    for (const id of ids.filter((i) => keyOf.has(i))) out.set(keyOf.get(id) as string, [...(out.get(keyOf.get(id) as string) ?? []), id]);
    return out;
  };
  expect(byKey(firstSeen)).toEqual(byKey(acknowledged.map((s) => s.messageId)));
  for (const r of records) expect(r.headers['event-type']).toBe(eventType);
  return records;
}

/** Load from one sequential HTTP client per account: its next publish starts when the previous was answered. */
export interface SteadyLoad {
  acknowledged: Acknowledged[];
  notAcknowledged: Array<{ status: number; body: unknown }>;
  /** Stops the clients and waits for the publishes in flight. */
  stop(): Promise<void>;
}

/**
 * Posts payments to producer-app at `perAccountRate` per second for each of `accounts` accounts, each with an
 * Idempotency-Key (the message id producer-app answers is scoped from it). An account's acknowledgement order is
 * the order its events must keep.
 */
export function steadyLoad(baseUrl: string, options: { accounts: number; perAccountRate: number }): SteadyLoad {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const acknowledged: Acknowledged[] = [];
  const notAcknowledged: SteadyLoad['notAcknowledged'] = [];
  let loading = true;
  const clients = Array.from({ length: options.accounts }, async (_, i) => {
    const accountId = `acc-${i}`;
    await sleep((i * 1000) / (options.accounts * options.perAccountRate));
    for (let n = 0; loading; n++) {
      const started = Date.now();
      const key = `${accountId}-${n}-${randomUUID().slice(0, 8)}`;
      const res = await postJson(`${baseUrl}/payments`, { paymentId: randomUUID(), accountId, amountCents: 100 + n }, { 'Idempotency-Key': key }).catch(
        (err: Error) => ({ status: 0, body: err.message as any }),
      );
      if (res.status === 202 && (res.body?.status === 'sent' || res.body?.status === 'spooled') && typeof res.body.messageId === 'string') {
        acknowledged.push({ messageId: res.body.messageId, key: accountId });
      } else {
        notAcknowledged.push(res);
      }
      await sleep(Math.max(0, 1000 / options.perAccountRate - (Date.now() - started)));
    }
  });
  return {
    acknowledged,
    notAcknowledged,
    stop: async () => {
      loading = false;
      await Promise.all(clients);
    },
  };
}
