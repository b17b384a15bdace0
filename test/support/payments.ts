import { randomUUID } from 'crypto';
import { Admin, Kafka, Message, Partitioners } from 'kafkajs';
import { Client } from 'pg';
import { SchemaRegistry } from 'kafka-exactly-once';
import { encodeSingleObject, decodeSingleObject } from 'kafka-exactly-once/testing';
import { join } from 'path';
import { REPO_ROOT } from './environment';
import { ReadRecord, readTopic } from './kafka';
import { prng } from '../../apps/producer-app/src/load/prng';

export { prng };

export const demoSchemas = (): SchemaRegistry => SchemaRegistry.fromDirectory(join(REPO_ROOT, 'schemas'));

export interface Payment {
  paymentId: string;
  accountId: string;
  amountCents: bigint;
  requestedAt: string;
}

/** `count` payments over `accounts` accounts: about 60% deposits, 40% withdrawals, some of them too large. */
export function generatePayments(count: number, accounts: number, seed = 42): Payment[] {
  const random = prng(seed);
  return Array.from({ length: count }, () => {
    const deposit = random() < 0.6;
    const amount = BigInt(Math.floor(random() * 5000) + 100);
    return {
      paymentId: randomUUID(),
      accountId: `acc-${Math.floor(random() * accounts)}`,
      amountCents: deposit ? amount : -amount,
      requestedAt: new Date().toISOString(),
    };
  });
}

/**
 * Good payments over `accounts` accounts, and mid-stream on the first account a deposit over the approval limit
 * (it fails for good until approved) followed by withdrawals only that deposit covers: handled out of order,
 * they would be rejected and the fold would differ.
 */
export function parkingWorkload(count: number, accounts: number, seed: number): { published: PublishedPayment[]; target: string; big: Payment } {
  const payments = generatePayments(count, accounts, seed);
  const target = payments[0].accountId;
  const at = (amountCents: bigint): Payment => ({ paymentId: randomUUID(), accountId: target, amountCents, requestedAt: new Date().toISOString() });
  const big = at(2_000_000n);
  const half = Math.floor(count / 2);
  const all = [...payments.slice(0, half), big, ...payments.slice(half, half + 100), at(-600_000n), ...payments.slice(half + 100, half + 200), at(-700_000n), at(-600_000n), ...payments.slice(half + 200)];
  return { published: all.map((payment) => ({ payment, messageId: randomUUID() })), target, big };
}

export interface PublishedPayment {
  payment: Payment;
  messageId: string;
  /** The message id as bytes, when it is not plain text (NUL, invalid UTF-8, very long). */
  rawMessageId?: Buffer;
  /** More headers to send, as bytes. */
  headers?: Record<string, Buffer>;
}

/**
 * Publishes payments in order with an idempotent producer (acks all), key = accountId, `message-id` header =
 * the payment's message id. `repeat` publishes some of them again with the same message id right after.
 */
export async function publishPayments(
  kafka: Kafka,
  topic: string,
  payments: Payment[],
  options: PublishPaymentsOptions = {},
): Promise<PublishedPayment[]> {
  const published = payments.map((payment) => ({ payment, messageId: randomUUID() }));
  await republish(kafka, topic, published, options);
  return published;
}

export interface PublishPaymentsOptions {
  /** How many more copies (same message id) of the payment at `index` follow it. */
  duplicates?: (index: number) => number;
  /** `avro` (default): single-object encoded; `json`: plain JSON, the amount an integer (consumer-app's EVENT_FORMAT=json). */
  format?: 'avro' | 'json';
}

/** A payment as plain JSON, as consumer-app reads it with EVENT_FORMAT=json (amounts within 2^53). */
export function paymentJson(payment: Payment): Buffer {
  return Buffer.from(JSON.stringify({ ...payment, amountCents: Number(payment.amountCents) }), 'utf8');
}

/** Publishes already-published payments again, with their message ids (duplicate publishes). */
export async function republish(
  kafka: Kafka,
  topic: string,
  published: PublishedPayment[],
  options: PublishPaymentsOptions = {},
): Promise<void> {
  const schema = demoSchemas().current('com.example.PaymentRequested');
  const json = options.format === 'json';
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    let batch: Message[] = [];
    for (const [index, { payment, messageId }] of published.entries()) {
      const message: Message = {
        key: payment.accountId,
        value: json ? paymentJson(payment) : encodeSingleObject(schema, payment),
        headers: { ...published[index].headers, 'message-id': published[index].rawMessageId ?? messageId, 'event-type': json ? 'json' : schema.name },
      };
      for (let copy = 0; copy <= (options.duplicates?.(index) ?? 0); copy++) batch.push(message);
      if (batch.length >= 500) {
        await producer.send({ topic, messages: batch, acks: -1 });
        batch = [];
      }
    }
    if (batch.length > 0) await producer.send({ topic, messages: batch, acks: -1 });
  } finally {
    await producer.disconnect();
  }
}

/** Records of `topic` the group has not committed yet. */
export async function groupLag(kafka: Kafka | Admin, groupId: string, topic: string): Promise<bigint> {
  // An admin client the caller keeps connected makes a probe a few milliseconds (tests that poll the lag closely);
  // otherwise one is connected for this call.
  if (!('admin' in kafka)) return lagOf(kafka, groupId, topic);
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await lagOf(admin, groupId, topic);
  } finally {
    await admin.disconnect();
  }
}

async function lagOf(admin: Admin, groupId: string, topic: string): Promise<bigint> {
  const ends = await admin.fetchTopicOffsets(topic);
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  let lag = 0n;
  for (const end of ends) {
    const done = BigInt(committed.partitions.find((p) => p.partition === end.partition)?.offset ?? '-1');
    lag += BigInt(end.high) - (done < 0n ? 0n : done);
  }
  return lag;
}

/** Polls `condition` until it holds; rejects after `timeoutMs`. */
export async function waitUntil(condition: () => Promise<boolean>, timeoutMs: number, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until the group has committed offsets up to the end of every partition of `topic`. */
export async function waitForGroupCaughtUp(kafka: Kafka, groupId: string, topic: string, timeoutMs = 120000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lag = -1n;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      lag = await groupLag(kafka, groupId, topic);
      if (lag === 0n) return;
    } catch (err) {
      // A leader moving while the offsets are asked for (NOT_LEADER_FOR_PARTITION): asked again at the next poll.
      if (!(err as { retriable?: boolean })?.retriable) throw err;
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`group ${groupId} still lags ${lag} records behind ${topic} after ${timeoutMs} ms${lastError ? ` (last: ${(lastError as Error).message})` : ''}`);
}

export interface ProcessedRecord {
  partition: number;
  offset: string;
  key: string | null;
  headers: Record<string, string>;
  rawCausationId?: Buffer;
  event: { paymentId: string; accountId: string; amountCents: bigint; status: string; balanceAfterCents: bigint };
}

/** Every PaymentProcessed visible to a read-committed reader (read until the topic has been quiet a while). */
export async function readProcessed(kafka: Kafka, topic: string, atLeast: number): Promise<ProcessedRecord[]> {
  const registry = demoSchemas();
  const schema = registry.current('com.example.PaymentProcessed');
  let lastGrowth = Date.now();
  let seen = 0;
  const records: ReadRecord[] = await readTopic(kafka, topic, {
    timeoutMs: 120000,
    until: (r) => {
      if (r.length !== seen) {
        seen = r.length;
        lastGrowth = Date.now();
      }
      return r.length >= atLeast && Date.now() - lastGrowth > 2000;
    },
    pollIdleMs: 250,
  });
  return records.map((r) => ({
    partition: r.partition,
    offset: r.offset,
    key: r.key,
    headers: r.headers,
    rawCausationId: [r.rawHeaders['causation-id']].flat()[0] as Buffer | undefined,
    event: decodeSingleObject(registry, schema, r.value) as ProcessedRecord['event'],
  }));
}

export interface Expected {
  status: Map<string, { status: string; balanceAfterCents: bigint }>;
  balances: Map<string, bigint>;
  orderByAccount: Map<string, string[]>;
}

/** The independent in-order fold of docs/demo.md: what the final state must be if every payment applied once, in order. */
export function foldPayments(payments: Payment[]): Expected {
  const balances = new Map<string, bigint>();
  const status = new Map<string, { status: string; balanceAfterCents: bigint }>();
  const orderByAccount = new Map<string, string[]>();
  for (const p of payments) {
    const balance = balances.get(p.accountId) ?? 0n;
    const accepted = balance + p.amountCents >= 0n;
    const after = accepted ? balance + p.amountCents : balance;
    balances.set(p.accountId, after);
    status.set(p.paymentId, { status: accepted ? 'ACCEPTED' : 'REJECTED_INSUFFICIENT_FUNDS', balanceAfterCents: after });
    orderByAccount.set(p.accountId, [...(orderByAccount.get(p.accountId) ?? []), p.paymentId]);
  }
  return { status, balances, orderByAccount };
}

/**
 * Checks the exactly-once and order invariants for a payment workload: one ledger row and one PaymentProcessed
 * per payment, outcomes and balances equal to the in-order fold, outputs of each account in input order, and
 * output headers that name their cause. Returns a summary for the test's own assertions.
 */
export async function checkPaymentInvariants(
  kafka: Kafka,
  databaseUrl: string,
  processedTopic: string,
  published: PublishedPayment[],
): Promise<{ ledgerRows: number; outputs: number; accepted: number; rejected: number }> {
  const payments = published.map((p) => p.payment);
  const expected = foldPayments(payments);
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  let ledger: Array<{ payment_id: string; status: string; balance_after_cents: string }>;
  let accounts: Array<{ account_id: string; balance_cents: string }>;
  try {
    ledger = (await db.query('SELECT payment_id, status, balance_after_cents::text FROM ledger_entries')).rows;
    accounts = (await db.query('SELECT account_id, balance_cents::text FROM accounts')).rows;
  } finally {
    await db.end();
  }

  // One ledger row per payment, with the outcome of the in-order fold.
  expect(ledger.length).toBe(payments.length);
  for (const row of ledger) {
    const want = expected.status.get(row.payment_id);
    expect({ paymentId: row.payment_id, status: row.status, balanceAfter: BigInt(row.balance_after_cents) }).toEqual({
      paymentId: row.payment_id,
      status: want?.status,
      balanceAfter: want?.balanceAfterCents,
    });
  }
  // Final balances equal the fold.
  expect(new Map(accounts.map((a) => [a.account_id, BigInt(a.balance_cents)]))).toEqual(expected.balances);

  // Exactly one PaymentProcessed per payment, read committed.
  const processed = await readProcessed(kafka, processedTopic, payments.length);
  const perPayment = new Map<string, number>();
  for (const r of processed) perPayment.set(r.event.paymentId, (perPayment.get(r.event.paymentId) ?? 0) + 1);
  const duplicated = [...perPayment].filter(([, n]) => n > 1);
  expect(duplicated).toEqual([]);
  expect(processed.length).toBe(payments.length);
  expect(new Set(perPayment.keys())).toEqual(new Set(payments.map((p) => p.paymentId)));

  // Per-account order of outputs equals input order (outputs of one key share a partition, read in offset order).
  const outputOrder = new Map<string, string[]>();
  for (const r of [...processed].sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)))) {
    outputOrder.set(r.event.accountId, [...(outputOrder.get(r.event.accountId) ?? []), r.event.paymentId]);
  }
  expect(outputOrder).toEqual(expected.orderByAccount);

  // Outputs name their cause and carry deterministic ids.
  const byPayment = new Map(published.map((p) => [p.payment.paymentId, p]));
  for (const r of processed) {
    const input = byPayment.get(r.event.paymentId) as PublishedPayment;
    const raw = input.rawMessageId ?? Buffer.from(input.messageId);
    // The input's message id byte for byte, or its sha256: form when it is longer than 256 bytes.
    if (raw.length <= 256) expect(r.rawCausationId?.toString('hex')).toBe(raw.toString('hex'));
    else expect(r.headers['causation-id']).toMatch(/^sha256:/);
  }
  expect(new Set(processed.map((r) => r.headers['message-id'])).size).toBe(processed.length);

  const accepted = ledger.filter((r) => r.status === 'ACCEPTED').length;
  return { ledgerRows: ledger.length, outputs: processed.length, accepted, rejected: ledger.length - accepted };
}
