/** Caps of one spool drain request. */
export interface DrainBatchLimits {
  maxRecords: number;
  /** Estimated bytes of the whole request. */
  maxBytes: number;
  /** The topic's `max.message.bytes` when known: a partition's records travel as one batch the broker measures. */
  topicLimit?: (topic: string) => number | undefined;
}

/** A spooled record as the batching sees it: its topic and its estimated size as a Kafka record. */
export interface SizedRecord {
  topic: string;
  bytes: number;
}

/**
 * How many of the oldest records go in the next drain request: as many as fit under the count cap, the byte
 * cap and, per topic, the topic's limit (all of a topic's records are counted as if they shared one
 * partition, which can only overestimate). Always at least one, so that a record larger than the caps is still
 * tried alone (and, if the broker refuses it, quarantined alone).
 */
export function drainBatchSize(records: SizedRecord[], limits: DrainBatchLimits): number {
  let total = 0;
  const perTopic = new Map<string, number>();
  let n = 0;
  for (const record of records) {
    if (n >= limits.maxRecords) break;
    const topicTotal = (perTopic.get(record.topic) ?? 0) + record.bytes;
    const topicLimit = limits.topicLimit?.(record.topic);
    if (n > 0 && (total + record.bytes > limits.maxBytes || (topicLimit !== undefined && topicTotal > topicLimit))) break;
    total += record.bytes;
    perTopic.set(record.topic, topicTotal);
    n++;
  }
  return n;
}
