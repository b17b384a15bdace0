const FILTERED = Symbol('kafka-exactly-once:aborted-transactions-filtered');

/** One record as KafkaJS's fetch decoder returns it (src/protocol/recordBatch/record/v0/decoder.js). */
export interface FetchedRecord {
  offset: string;
  key: Buffer | null;
  isControlRecord: boolean;
  batchContext: { producerId: string; inTransaction: boolean };
}

/** One partition of a decoded Fetch response. */
export interface FetchedPartition {
  abortedTransactions?: Array<{ producerId: string; firstOffset: string }>;
  messages: FetchedRecord[];
}

/** A control record's key: version 0, type 0 (abort) or 1 (commit). */
const isAbortMarker = (record: FetchedRecord) => record.isControlRecord && !!record.key && record.key.length >= 4 && record.key.readInt16BE(2) === 0;

/**
 * Takes the records of aborted transactions out of what a read-committed consumer is given, as Kafka's Java
 * client does: the aborted transactions of the fetched range, ordered by their first offset; a record belongs to
 * an aborted transaction when its producer has one that began at or before it and whose abort marker is still
 * to come. Such a record is marked as a control record: KafkaJS then hands it to nobody, yet counts its offset
 * (the fetch position moves past it, as past the markers). Returns how many were taken out.
 */
export function dropAbortedRecords(partition: FetchedPartition): number {
  const pending = [...(partition.abortedTransactions ?? [])].sort((a, b) => compare(a.firstOffset, b.firstOffset));
  partition.abortedTransactions = [];
  if (pending.length === 0) return 0;
  const aborted = new Set<string>();
  let dropped = 0;
  for (const record of partition.messages) {
    while (pending.length > 0 && compare(pending[0].firstOffset, record.offset) <= 0) aborted.add(String(pending.shift()!.producerId));
    const producer = String(record.batchContext?.producerId);
    if (record.isControlRecord) {
      if (isAbortMarker(record)) aborted.delete(producer);
      continue;
    }
    if (record.batchContext?.inTransaction && aborted.has(producer)) {
      record.isControlRecord = true;
      dropped++;
    }
  }
  return dropped;
}

function compare(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** What the correction reads and changes of one KafkaJS Broker (src/broker/index.js). */
export interface FetchingBroker {
  fetch(request: object): Promise<unknown>;
  [FILTERED]?: true;
}

/**
 * NOTE: KafkaJS 2.2.4 (src/consumer/filterAbortedMessages.js) hands read-committed consumers records of aborted
 * transactions. It takes the fetch response's aborted transactions in the order the broker lists them (by abort
 * marker, not by first offset) and looks only at the first one left at each record: when two producers' aborted
 * transactions overlap on a partition and the one that began first aborted last, its records are delivered (two
 * transactional producers, A then B writing, B then A aborting, is enough; `library.aborted-transactions` shows
 * it). Every handler of the library would then take rolled-back events for real ones. No upstream issue found;
 * Kafka's own client orders them by first offset (clients/.../consumer/internals/CompletedFetch.java). This
 * filters each Fetch answer of `broker` before KafkaJS's consumer group reads it (dropAbortedRecords), and leaves
 * KafkaJS's filter nothing to do. Set on the broker itself (an own property), for the brokers of the clusters the
 * library builds (cluster.ts): KafkaJS's modules, and the application's own clients, are left as they are.
 */
export function filterAbortedTransactions(broker: FetchingBroker): void {
  if (broker[FILTERED]) return;
  const fetch = broker.fetch;
  broker.fetch = async function (this: FetchingBroker, request: object) {
    const data = (await fetch.call(this, request)) as { responses?: Array<{ partitions?: FetchedPartition[] }> };
    for (const topic of data?.responses ?? []) for (const partition of topic.partitions ?? []) dropAbortedRecords(partition);
    return data;
  };
  broker[FILTERED] = true;
}

/** Whether `broker` carries the correction (the boot's check, corrections-in-force.ts). */
export const filtersAbortedTransactions = (broker: unknown): boolean => typeof broker === 'object' && broker !== null && (broker as FetchingBroker)[FILTERED] === true;
