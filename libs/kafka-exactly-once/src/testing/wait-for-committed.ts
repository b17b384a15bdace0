import type { INestApplicationContext } from '@nestjs/common';
import { sleep } from '../engine/sleep';
import { RESOLVED_OPTIONS } from '../kafka-exactly-once.constants';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { probeClient } from '../client/choose-driver';
import { adminOf } from '../kafkajs';
import type { ResolvedOptions } from '../options/resolved-options';

export interface CommittedRecord {
  topic: string;
  partition?: number;
  /** The record's offset: `PublishResult.offset`, or a KafkaJS `RecordMetadata.baseOffset`. */
  offset?: string | number | bigint;
}

/**
 * Resolves once the application's consumer group has committed `record`: its handler ran, and the handler's
 * database writes, outputs and the offset committed together. `app` is the Nest application or testing module
 * that imports KafkaExactlyOnceModule with a `groupId`; `record` is where the record was written
 * (`publisher.publish()` answers `{ partition, offset }` when it was sent, not spooled). Rejects after
 * `timeoutMs` [30000] with the group's committed offset and the consumer's start status.
 */
export async function waitForCommitted(app: Pick<INestApplicationContext, 'get'>, record: CommittedRecord, options: { timeoutMs?: number } = {}): Promise<void> {
  const resolved = app.get<ResolvedOptions>(RESOLVED_OPTIONS, { strict: false });
  if (!resolved.groupId) throw new Error('waitForCommitted: this application has no consumer group (KafkaExactlyOnceModule.forRoot without groupId)');
  if (record.partition === undefined || record.offset === undefined) {
    throw new Error(`waitForCommitted: the record of ${record.topic} has no partition and offset (a publish answered 'spooled' is on disk, not in Kafka yet)`);
  }
  const offset = BigInt(record.offset);
  const timeoutMs = options.timeoutMs ?? 30000;
  const admin = adminOf(probeClient(resolved));
  let committed = -1n;
  try {
    await admin.connect();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [topic] = await admin.fetchOffsets({ groupId: resolved.groupId, topics: [record.topic] });
      committed = BigInt(topic?.partitions.find((p) => p.partition === record.partition)?.offset ?? '-1');
      if (committed > offset) return;
      if (Date.now() >= deadline) break;
      await sleep(100);
    }
  } finally {
    await admin.disconnect();
  }
  const status = app.get(KafkaExactlyOnceLifecycle, { strict: false }).startStatus();
  throw new Error(
    `waitForCommitted: group ${resolved.groupId} has not committed ${record.topic}[${record.partition}] offset ${offset} within ${timeoutMs} ms ` +
      `(committed offset: ${committed < 0n ? 'none' : committed}; consumer: ${status.phase}${status.lastError ? `, last error: ${status.lastError}` : ''})`,
  );
}
