import { randomBytes, randomUUID } from 'crypto';
import { IHeaders, Kafka, Message, Partitioners } from 'kafkajs';
import { DEAD_LETTER_HEADERS } from 'kafka-exactly-once';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { createConsumerAppScope, startConsumerApp } from './support/consumer-app';
import { AppProcess } from './support/processes';
import { readTopic } from './support/kafka';
import { processSuite } from './support/suite';
import {
  checkPaymentInvariants,
  demoSchemas,
  generatePayments,
  groupLag,
  Payment,
  PublishedPayment,
  republish,
  waitForGroupCaughtUp,
  waitUntil,
} from './support/payments';

interface BadRecord {
  kind: string;
  reason: string;
  message: Message & { headers: IHeaders };
  messageId: Buffer;
}

const hex = (b: Buffer | null | undefined) => (b ? b.toString('hex') : null);

function headerValues(headers: IHeaders | undefined, name: string): string[] {
  const value = headers?.[name];
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).map((v) => hex(Buffer.isBuffer(v) ? v : Buffer.from(String(v))) as string);
}

/** Twelve kinds of records a consumer must survive, three of each, each on a key of its own. */
function badRecords(): BadRecord[] {
  const schema = demoSchemas().current('com.example.PaymentRequested');
  const payment = (accountId: string, paymentId: string, amountCents = 100n) =>
    encodeSingleObject(schema, { paymentId, accountId, amountCents, requestedAt: new Date().toISOString() });
  const out: BadRecord[] = [];
  for (let i = 0; i < 3; i++) {
    const add = (kind: string, reason: string, key: Buffer | string, value: Buffer | null, messageId: Buffer = Buffer.from(`bad-${kind}-${i}`), headers: IHeaders = {}) =>
      out.push({ kind, reason, messageId, message: { key, value, headers: { ...headers, 'message-id': messageId } } });
    add('null-value', 'decode-failed', `bad-null-${i}`, null);
    add('json', 'decode-failed', `bad-json-${i}`, Buffer.from(JSON.stringify({ paymentId: randomUUID(), amountCents: 5 })));
    add('truncated', 'decode-failed', `bad-truncated-${i}`, payment(`bad-truncated-${i}`, randomUUID()).subarray(0, 20));
    add('unknown-schema', 'unknown-schema', `bad-schema-${i}`, Buffer.concat([Buffer.from([0xc3, 0x01]), randomBytes(8), Buffer.from('body')]));
    add('not-a-uuid', 'handler-failed', `bad-uuid-${i}`, payment(`bad-uuid-${i}`, `not-a-uuid-${i}`));
    add('nul-in-account', 'handler-failed', `bad\u0000nul-${i}`, payment(`bad\u0000nul-${i}`, randomUUID()));
    // A good deposit on this account comes first (among the good payments): the sum overflows bigint.
    add('overflow', 'handler-failed', `acc-overflow-${i}`, payment(`acc-overflow-${i}`, randomUUID(), 9223372036854775807n));
    add('binary-key', 'decode-failed', Buffer.from([0xff, 0xfe, 0x00, i]), randomBytes(64));
    add('huge-value', 'decode-failed', `bad-huge-${i}`, randomBytes(900 * 1024));
    add('hostile-headers', 'handler-failed', `bad-headers-${i}`, payment(`bad-headers-${i}`, `nope-${i}`), Buffer.from(`bad-headers-${i}`), {
      trace: Buffer.from([0x00, 0xff, 0xc3, 0x28, i]),
      repeated: [Buffer.from('first'), Buffer.from([0x00, 0x01])],
    });
    add('nul-message-id', 'decode-failed', `bad-nul-id-${i}`, null, Buffer.from(`bad\u0000id-${i}`));
    add('huge-message-id', 'decode-failed', `bad-huge-id-${i}`, Buffer.from('x'), Buffer.concat([Buffer.alloc(100 * 1024, 0x69), Buffer.from([i])]));
  }
  return out;
}

/** Good payments, some of them with message ids and headers that text cannot hold. */
function goodPayments(): PublishedPayment[] {
  const overflowSeeds: Payment[] = [0, 1, 2].map((i) => ({ paymentId: randomUUID(), accountId: `acc-overflow-${i}`, amountCents: 1000n, requestedAt: new Date().toISOString() }));
  return [...overflowSeeds, ...generatePayments(10000, 200, 11)].map((payment, i) => {
    const published: PublishedPayment = { payment, messageId: randomUUID() };
    if (i % 97 === 5) published.rawMessageId = Buffer.from(`nul\u0000${published.messageId}`);
    if (i % 101 === 7) published.rawMessageId = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(published.messageId)]);
    if (i % 499 === 11) published.rawMessageId = Buffer.concat([Buffer.alloc(20 * 1024, 0x6c), Buffer.from(published.messageId)]);
    if (i % 89 === 3) published.headers = { trace: Buffer.from([0x00, 0xc3, 0x28, 0xff]) };
    return published;
  });
}

/**
 * consumer-app as a real process: 10,003 good payments over 200 accounts with 36 hostile records of twelve
 * kinds mixed in on keys of their own, and two SIGKILLs of the consumer during the run. Every good payment
 * is applied exactly once (balances equal the in-order fold), every bad record is on the dead-letter topic
 * exactly once with its original bytes, and no unit of work ever failed because of one (no partition waited).
 */
describe('consumer-app: hostile input mixed into the payments', () => {
  const { processes, kafka: client } = processSuite();
  let kafka: Kafka;

  beforeAll(() => {
    kafka = client();
  });

  it('applies every good payment once and dead-letters every bad record once, through two SIGKILLs', async () => {
    const scope = await createConsumerAppScope('hostile');
    const topic = scope.topic('payments.requested');
    const apps: AppProcess[] = [await startConsumerApp(processes, scope)];
    const good = goodPayments();
    const bad = badRecords();

    // Interleaved: a slice of good payments, then some of the bad records, ten times over.
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    try {
      const slices = 10;
      for (let s = 0; s < slices; s++) {
        await republish(kafka, topic, good.slice(Math.floor((s * good.length) / slices), Math.floor(((s + 1) * good.length) / slices)));
        const mine = bad.filter((_, i) => i % slices === s);
        for (const record of mine) await producer.send({ topic, acks: -1, messages: [record.message] });
      }
    } finally {
      await producer.disconnect();
    }

    let lag = await groupLag(kafka, scope.groupId, topic);
    for (const target of [0.7, 0.35]) {
      const below = BigInt(Math.floor((good.length + bad.length) * target));
      await waitUntil(async () => (lag = await groupLag(kafka, scope.groupId, topic)) <= below, 180000, `lag below ${below}`);
      await apps[apps.length - 1].kill();
      apps.push(await startConsumerApp(processes, scope));
    }
    await waitForGroupCaughtUp(kafka, scope.groupId, topic, 300000);

    const summary = await checkPaymentInvariants(kafka, scope.databaseUrl, scope.topic('payments.processed'), good);
    expect(summary).toMatchObject({ ledgerRows: good.length, outputs: good.length });

    const dlq = await readTopic(kafka, `${topic}.dlq`, { until: (r) => r.length >= bad.length, timeoutMs: 60000, pollIdleMs: 500 });
    // Exactly once each (read committed), no good payment among them.
    expect(dlq).toHaveLength(bad.length);
    const letters = new Map(dlq.map((r) => [headerValues(r.rawHeaders, 'message-id')[0], r]));
    expect(letters.size).toBe(bad.length);
    for (const record of bad) {
      const letter = letters.get(hex(record.messageId) as string);
      expect({ kind: record.kind, found: letter !== undefined }).toEqual({ kind: record.kind, found: true });
      if (!letter) continue;
      expect({ kind: record.kind, reason: letter.headers[DEAD_LETTER_HEADERS.reason] }).toEqual({ kind: record.kind, reason: record.reason });
      expect({ kind: record.kind, key: hex(letter.rawKey), value: hex(letter.value) }).toEqual({
        kind: record.kind,
        key: hex(Buffer.from(record.message.key as Buffer | string)),
        value: hex(record.message.value as Buffer | null),
      });
      for (const name of Object.keys(record.message.headers)) {
        expect({ kind: record.kind, name, bytes: headerValues(letter.rawHeaders, name) }).toEqual({ kind: record.kind, name, bytes: headerValues(record.message.headers, name) });
      }
    }

    // Nothing waited behind a bad record: no unit of work failed, so nothing was isolated or retried as a whole.
    const logs = apps.map((a) => a.logs()).join('\n');
    expect(logs.match(/failed alone|re-running them one per unit of work|infrastructure fault/g) ?? []).toEqual([]);
    // Each dead letter is logged after its commit, so a SIGKILL can fall between the two and drop a line: the exact
    // count is the dead-letter topic's (above). The lines that were written name a bad record's reason, never a good one.
    const logged = [...logs.matchAll(/dead letter (\{.*\})/g)].map((m) => (JSON.parse(m[1]) as { reason: string }).reason);
    expect(logged.length).toBeGreaterThan(0);
    expect([...new Set(logged)].filter((reason) => !bad.some((record) => record.reason === reason))).toEqual([]);
    process.stdout.write(`hostile: ${good.length} good payments, ${bad.length} bad records, lag ${lag} at the second kill; ${summary.accepted} accepted, ${summary.rejected} rejected\n`);
  }, 600000);
});
