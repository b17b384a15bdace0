import type { LogRecord } from '../client/log-requests';
import type { DigestHeader } from '../kafkajs/record-digest';
import type { FetchAnswerPartition, PlatformaticKafka } from './load';

/** One record handed to the engine: the shape of a record KafkaJS 2.2.4's fetch decoder returns, which the engine reads. */
export interface DecodedRecord {
  magicByte: number;
  attributes: number;
  timestamp: string;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer | null | Array<Buffer | null>>;
  isControlRecord: false;
  batchContext: { firstOffset: string; producerId: string; producerEpoch: number; inTransaction: boolean };
}

/** A partition's fetched records: those to hand over, and the last offset of the fetched range (handed over or not). */
export interface FetchedRecords {
  messages: DecodedRecord[];
  lastOffset: bigint;
}

const IS_TRANSACTIONAL = 0x10;
const IS_CONTROL = 0x20;
const LOG_APPEND_TIME = 0x08;

/** An abort marker: a control batch whose record key is version 0, type 0. */
const isAbortMarker = (batch: PlatformaticKafka.RecordsBatch) => {
  const key = batch.records[0]?.key;
  return !!key && key.length >= 4 && key.readInt16BE(2) === 0;
};

/**
 * The records of one partition of a read-committed Fetch answer, from `position` on: control records and records of
 * aborted transactions left out, as Kafka's Java client does (clients/.../consumer/internals/CompletedFetch.java):
 * the partition's aborted transactions ordered by first offset, a producer's record skipped when that producer has
 * one that began at or before it and whose abort marker is still to come. The client's own filter (run before this
 * on read-committed fetches) keeps one aborted transaction per producer and lets through those whose marker the
 * answer does not reach; this one does not depend on it. Headers as KafkaJS gives them (a key seen twice: an array),
 * each key an own property (`__proto__` too).
 */
export function decodeFetchedPartition(partition: Pick<FetchAnswerPartition, 'records' | 'abortedTransactions' | 'highWatermark'>, position: bigint): FetchedRecords {
  const skipped = abortedTransactions(partition);
  const messages: DecodedRecord[] = [];
  let lastOffset = position - 1n;
  for (const batch of partition.records ?? []) {
    const batchLast = batch.firstOffset + BigInt(batch.lastOffsetDelta);
    if (batchLast > lastOffset) lastOffset = batchLast;
    if (skipped(batch)) continue;
    const batchContext = { firstOffset: String(batch.firstOffset), producerId: String(batch.producerId), producerEpoch: batch.producerEpoch, inTransaction: (batch.attributes & IS_TRANSACTIONAL) !== 0 };
    for (const record of batch.records) {
      const offset = batch.firstOffset + BigInt(record.offsetDelta);
      if (offset < position) continue;
      messages.push({
        magicByte: batch.magic,
        attributes: record.attributes,
        timestamp: timestampOf(batch, record),
        offset: String(offset),
        key: record.key,
        value: record.value,
        headers: headersOf(record.headers),
        isControlRecord: false,
        batchContext,
      });
    }
  }
  return { messages, lastOffset };
}

/**
 * Every record of one partition of a Fetch answer, as the library's own partition reads take them
 * (client/log-requests.ts): markers, and in a read committed the records of aborted transactions (the same filter
 * as above), as control records.
 */
export function loggedRecords(partition: Pick<FetchAnswerPartition, 'records' | 'abortedTransactions'>): LogRecord[] {
  const skipped = abortedTransactions(partition);
  const records: LogRecord[] = [];
  for (const batch of partition.records ?? []) {
    const isControlRecord = skipped(batch) !== false;
    const producerId = String(batch.producerId);
    const inTransaction = (batch.attributes & IS_TRANSACTIONAL) !== 0;
    for (const record of batch.records) {
      const headers = record.headers.map(([name, value]) => [name === null ? 'null' : name.toString('utf8'), value] as DigestHeader);
      records.push({ offset: String(batch.firstOffset + BigInt(record.offsetDelta)), timestamp: timestampOf(batch, record), key: record.key, value: record.value, headers, isControlRecord, producerId, inTransaction });
    }
  }
  return records;
}

/**
 * What of a fetched partition's batches, taken in log order, is not data: a control batch ('control'), or a batch of
 * an aborted transaction ('aborted'): its producer has one that began at or before the batch (the partition's aborted
 * transactions, ordered by first offset) and whose abort marker is still to come.
 */
function abortedTransactions(partition: Pick<FetchAnswerPartition, 'abortedTransactions'>): (batch: PlatformaticKafka.RecordsBatch) => 'control' | 'aborted' | false {
  const pending = [...(partition.abortedTransactions ?? [])].sort((a, b) => (a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0));
  const aborted = new Set<bigint>();
  return (batch) => {
    const batchLast = batch.firstOffset + BigInt(batch.lastOffsetDelta);
    while (pending.length > 0 && pending[0].firstOffset <= batchLast) aborted.add(pending.shift()!.producerId);
    if (batch.attributes & IS_CONTROL) {
      if (isAbortMarker(batch)) aborted.delete(batch.producerId);
      return 'control';
    }
    return (batch.attributes & IS_TRANSACTIONAL) !== 0 && aborted.has(batch.producerId) ? 'aborted' : false;
  };
}

/** A record's timestamp: the log's append time for the whole batch, or the batch's first timestamp and the record's delta. */
function timestampOf(batch: PlatformaticKafka.RecordsBatch, record: PlatformaticKafka.RecordsBatch['records'][number]): string {
  return String(batch.attributes & LOG_APPEND_TIME ? batch.maxTimestamp : batch.firstTimestamp + record.timestampDelta);
}

/** A record's headers as KafkaJS decodes them: by key (its UTF-8 text; a null key reads "null"), repeated keys as arrays. */
function headersOf(pairs: Array<[Buffer | null, Buffer | null]>): DecodedRecord['headers'] {
  const headers: DecodedRecord['headers'] = {};
  for (const [rawKey, value] of pairs) {
    const name = rawKey === null ? 'null' : rawKey.toString('utf8');
    const seen = Object.prototype.hasOwnProperty.call(headers, name) ? headers[name] : undefined;
    const next = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
    Object.defineProperty(headers, name, { value: next, enumerable: true, writable: true, configurable: true });
  }
  return headers;
}
