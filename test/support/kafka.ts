import { randomUUID } from 'crypto';
import { Admin, Consumer, IHeaders, ITopicConfig, Kafka, KafkaMessage, logLevel } from 'kafkajs';
import { createTopicsAndWait } from 'kafka-exactly-once';
import { createKafkaClient, type KafkaClient } from 'kafka-exactly-once/kafkajs';
import { isLibraryClient } from 'kafka-exactly-once/kafkajs/client';
import { kafkaBrokers } from './environment';

/**
 * How many records a topic's partitions hold (the sum of their high watermarks). A broker still taking up its
 * partitions' leadership (just restarted, with the run's thousands of partitions to load) answers "not the
 * leader" for a while: such retriable answers are asked again, for up to 20 s.
 */
export async function topicSize(kafka: Kafka, topic: string): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await withAdmin(kafka, async (admin) => (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0));
    } catch (err) {
      if (!(err as { retriable?: boolean }).retriable || attempt >= 20) throw err;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** A topic name no other suite or run uses. */
export function uniqueTopic(label: string): string {
  return `test.${label}.${Date.now().toString(36)}.${randomUUID().slice(0, 8)}`;
}

/** When a name of uniqueTopic's form (or one derived from it, `.dlq` say) was made, in ms; undefined for another name. */
export function uniqueTopicStamp(name: string): number | undefined {
  const stamp = /^test\..*?\.([0-9a-z]{8,9})\.[0-9a-f]{8}(?:[.-]|$)/.exec(name)?.[1];
  return stamp === undefined ? undefined : parseInt(stamp, 36);
}

/**
 * The suites' Kafka client: one the library builds (src/kafkajs/client.ts), so that the suites' read-committed
 * readers leave out the records of aborted transactions as the library's consumers do (KafkaJS's own client does
 * not: library.aborted-transactions).
 */
export function testKafka(clientId = 'kafka-exactly-once-tests'): KafkaClient {
  return createKafkaClient({ clientId, brokers: kafkaBrokers(), logLevel: logLevel.NOTHING });
}

export async function withAdmin<T>(kafka: Kafka, work: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.disconnect();
  }
}

/**
 * Creates topics (replication factor 1 unless given) and waits for their leaders, retrying while a
 * just-restarted broker is not ready to answer yet. A name takes `numPartitions`; a config gives its own.
 */
export async function createTopics(kafka: Kafka, topics: Array<string | ITopicConfig>, numPartitions = 1): Promise<void> {
  const configs = topics.map((t) => (typeof t === 'string' ? { topic: t, numPartitions } : t)).map((t) => ({ replicationFactor: 1, ...t }));
  for (let attempt = 1; ; attempt++) {
    try {
      await withAdmin(kafka, async (admin) => {
        await createTopicsAndWait(admin, configs);
        const metadata = await admin.fetchTopicMetadata({ topics: configs.map((t) => t.topic) });
        if (metadata.topics.some((t) => t.partitions.length !== (configs.find((c) => c.topic === t.name)?.numPartitions ?? numPartitions))) throw new Error('topics not ready');
      });
      return;
    } catch (err) {
      if (attempt >= 10) throw err;
      await new Promise((r) => setTimeout(r, 500 * attempt));
    }
  }
}

export interface ReadOptions {
  /** Stop once this predicate holds for the records read so far. */
  until: (records: ReadRecord[]) => boolean;
  readUncommitted?: boolean;
  timeoutMs?: number;
  /** Re-check `until` this often even when no record arrives (for conditions on quiet time). */
  pollIdleMs?: number;
  /** Read with a client of KafkaJS's own on purpose (its read-committed filter as KafkaJS 2.2.4 has it). */
  kafkaJsOwnFilter?: boolean;
}

export interface ReadRecord {
  partition: number;
  offset: string;
  key: string | null;
  /** The key's bytes. */
  rawKey: Buffer | null;
  value: Buffer | null;
  /** The first value of each header, as text (lossy for bytes that are not UTF-8). */
  headers: Record<string, string>;
  /** Every header as KafkaJS read it: bytes, repeated names as arrays. */
  rawHeaders: IHeaders;
}

function toRecord(partition: number, message: KafkaMessage): ReadRecord {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? String(value[0]) : String(value);
  }
  return { partition, offset: message.offset, key: message.key?.toString() ?? null, rawKey: message.key, value: message.value, headers, rawHeaders: message.headers ?? {} };
}

/**
 * An `until` for readTopic: at least `count` records read, and no new one for `quietMs` (a duplicate would come
 * late). Use it with `pollIdleMs`.
 */
export function quietAfter(count: number, quietMs: number): (records: unknown[]) => boolean {
  let seen = -1;
  let since = Date.now();
  return (records) => {
    if (records.length !== seen) {
      seen = records.length;
      since = Date.now();
    }
    return records.length >= count && Date.now() - since >= quietMs;
  };
}

/**
 * Reads a topic from the beginning with a fresh consumer group (read committed unless asked otherwise) until
 * `until` holds; rejects with what was read when the time runs out. On a client the library builds (testKafka,
 * clusterKafka), whose read-committed reads leave out the records of aborted transactions: KafkaJS's own do not,
 * and are refused unless `kafkaJsOwnFilter` asks for them.
 */
export async function readTopic(kafka: Kafka, topic: string, options: ReadOptions): Promise<ReadRecord[]> {
  if (!isLibraryClient(kafka) && !options.kafkaJsOwnFilter) {
    throw new Error("readTopic reads with a client the library builds (testKafka, clusterKafka): KafkaJS's own client's read-committed filter hands out records of aborted transactions");
  }
  const consumer: Consumer = kafka.consumer({
    groupId: `reader-${randomUUID()}`,
    readUncommitted: options.readUncommitted ?? false,
    maxWaitTimeInMs: 200,
  });
  const records: ReadRecord[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      let idle: NodeJS.Timeout | undefined;
      const timer = setTimeout(() => {
        if (idle) clearInterval(idle);
        reject(new Error(`read of ${topic} timed out after ${options.timeoutMs ?? 30000} ms with ${records.length} records`));
      }, options.timeoutMs ?? 30000);
      const check = () => {
        if (options.until(records)) {
          clearTimeout(timer);
          if (idle) clearInterval(idle);
          resolve();
        }
      };
      if (options.pollIdleMs) idle = setInterval(check, options.pollIdleMs);
      consumer
        .run({
          autoCommit: false,
          eachMessage: async ({ partition, message }) => {
            records.push(toRecord(partition, message));
            check();
          },
        })
        .catch((err) => {
          clearTimeout(timer);
          if (idle) clearInterval(idle);
          reject(err);
        });
    });
  } finally {
    await consumer.disconnect();
  }
  return records;
}
