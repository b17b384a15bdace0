import type { PartitionHealth } from '../engine/partition-progress';

/** What a partition is doing, in an operator's words, and what to do when it does not move. */
export interface PartitionActivityView {
  state: 'consuming' | 'idle' | 'waiting on a retry tier' | 'backing off' | 'stalled' | 'fenced';
  /** Why it waits or stalls (its last error, or the due time it waits for). */
  reason: string | null;
  /** The operator's way out of a stall; null when nothing is to be done. */
  wayOut: string | null;
}

/** How an operator reads a partition's state (docs/console.md, "Overview"). */
export function activityOf(p: PartitionHealth): PartitionActivityView {
  const error = p.lastError?.message ?? null;
  if (p.activity === 'fenced') return { state: 'fenced', reason: error, wayOut: 'another member of the group owns this partition now: nothing to do here (this member stops its work on it)' };
  if (p.stalled) {
    const waited = `records have waited ${Math.round((p.waitingMs ?? 0) / 1000)} s without a commit`;
    switch (p.lastError?.kind) {
      case 'infrastructure':
        return { state: 'stalled', reason: `${waited}: ${error}`, wayOut: 'PostgreSQL or Kafka fails (the error names which): the partition is tried again without end and moves once it answers; nothing to release or replay' };
      case 'outputs-refused':
        return { state: 'stalled', reason: `${waited}: ${error}`, wayOut: "Kafka refuses a handled record's recorded outputs for good: raise the output topic's limit, or divert them to the dead-letter topic (kafka-eo outputs divert, as the error says)" };
      case 'record':
        return { state: 'stalled', reason: `${waited}: ${error}`, wayOut: 'a record fails again and again: after isolation.maxFailures tries it is dead-lettered (or parks its key) and the partition moves on; see its dead letter then' };
      default:
        return { state: 'stalled', reason: error ? `${waited}; last error: ${error}` : waited, wayOut: "a unit of work takes longer than consumer.stallAfterMs: a handler's slow call or a lock it waits for (see the application's log); a handler past its deadline ends dead-lettered" };
    }
  }
  if (p.activity === 'delaying') return { state: 'waiting on a retry tier', reason: p.nextDueAt ? `its next record is due at ${p.nextDueAt}` : null, wayOut: null };
  if (p.activity === 'backing-off') return { state: 'backing off', reason: error, wayOut: null };
  if (p.activity === 'idle') return { state: 'idle', reason: null, wayOut: null };
  return { state: 'consuming', reason: null, wayOut: null };
}
