import { forgottenByCoordinator, type OpenTransaction } from '../client/hanging-transactions';
import { escapeIdPart, legacyTransactionalIds, outboxTransactionalId, partitionTransactionalId, publisherTransactionalId, replayTransactionalId } from '../transaction/transactional-ids';

/**
 * Whose an open transaction is, by its transactional id: a unit of work of this group (the producer of one input
 * partition), the outbox relay, the group's operator replays, a publisher's `publishAll`, or another application.
 */
export type TransactionOwner =
  | { kind: 'unit'; topic: string; partition: number }
  | { kind: 'relay'; name: string }
  | { kind: 'replay' }
  | { kind: 'publisher'; instanceId: string }
  /** The library's id shape under this prefix, of another group (or of this one's topics no longer consumed). */
  | { kind: 'library'; transactionalId: string }
  | { kind: 'other' };

/** What the library's transactional ids are made of, in this application. */
export interface OwnIds {
  prefix: string;
  groupId: string;
  /** The topics the group consumes (handlers' topics and their retry tiers): each partition has its producer. */
  consumed: readonly string[];
}

/** The owner of a transactional id (null or unknown: another application's, or one no coordinator named). */
export function ownerOf(transactionalId: string | null | undefined, ids: OwnIds): TransactionOwner {
  if (!transactionalId) return { kind: 'other' };
  const { prefix, groupId } = ids;
  if (transactionalId === replayTransactionalId(prefix, groupId) || transactionalId === legacyTransactionalIds.replay(prefix, groupId)) return { kind: 'replay' };
  for (const group of new Set([escapeIdPart(groupId), groupId])) {
    const head = `${prefix}.${group}.`;
    if (!transactionalId.startsWith(head)) continue;
    const rest = /^(.+)\.([0-9]{1,10})$/.exec(transactionalId.slice(head.length));
    if (!rest || !ids.consumed.includes(rest[1])) continue;
    const partition = Number(rest[2]);
    // Written back exactly as the library writes it (the escaped group, or the one of versions before 0.3).
    if (transactionalId === partitionTransactionalId(prefix, groupId, rest[1], partition) || transactionalId === legacyTransactionalIds.partition(prefix, groupId, rest[1], partition)) {
      return { kind: 'unit', topic: rest[1], partition };
    }
  }
  const relay = `${prefix}.%outbox.`;
  if (transactionalId.startsWith(relay)) {
    const parts = /^(.+)\.([^.]+)$/.exec(transactionalId.slice(relay.length));
    if (parts) {
      const name = decodeIdPart(parts[1]);
      if (outboxTransactionalId(prefix, name, parts[2]) === transactionalId) return { kind: 'relay', name };
    }
  }
  for (const head of [`${prefix}.%publisher.`, `${prefix}.publisher.`]) {
    if (transactionalId.startsWith(head) && transactionalId.length > head.length) {
      const instanceId = transactionalId.slice(head.length);
      if (publisherTransactionalId(prefix, instanceId) === transactionalId || legacyTransactionalIds.publisher(prefix, instanceId) === transactionalId) return { kind: 'publisher', instanceId };
    }
  }
  // Under this prefix, in the library's shape (a group, a topic, a partition): another group's unit, or this one's of
  // a topic it no longer consumes. Its recovery belongs to the library there, never to an abort from here.
  if (transactionalId.startsWith(`${prefix}.`) && /^[^.]+\..+\.[0-9]{1,10}$/.test(transactionalId.slice(prefix.length + 1))) return { kind: 'library', transactionalId };
  return { kind: 'other' };
}

function decodeIdPart(part: string): string {
  return part.replace(/%2E/g, '.').replace(/%25/g, '%');
}

/** What the library knows of the transaction's coordinator and its own recovery, to say what happens to it. */
export interface TransactionFacts {
  /** The module's `abortHangingTransactions`. */
  abortsHanging: boolean;
  /** The module's transaction timeout (ms): its own producers' transactions are aborted by Kafka past it. */
  transactionTimeoutMs: number;
  /** For a unit's transaction its coordinator no longer ends: whether it also holds the group's offsets (unknown: undefined). */
  holdsGroupOffsets?: boolean;
  /** When the coordinator aborts it (its start + its timeout, from DescribeTransactions), if it still tracks it. */
  timeoutAt?: string | null;
}

/** Whether the transaction's coordinator still ends it: it named it, in a state that writes markers still. */
export function trackedByCoordinator(open: Pick<OpenTransaction, 'transactionalId' | 'state'>): boolean {
  return !!open.transactionalId && open.state !== undefined && !forgottenByCoordinator(open as OpenTransaction);
}

const ENDS_AT = (facts: TransactionFacts) => (facts.timeoutAt ? ` (Kafka aborts it at ${facts.timeoutAt} if it is still open then)` : '');

/**
 * What the library does about a transaction of its own, in an operator's words (null: another application's).
 * Kept true to the consumer's and the relay's recovery (docs/operations.md §8, docs/outbox.md).
 */
export function doingOf(open: Pick<OpenTransaction, 'transactionalId' | 'state'>, owner: TransactionOwner, facts: TransactionFacts): string | null {
  if (owner.kind === 'other') return null;
  const timeout = `${Math.round(facts.transactionTimeoutMs / 1000)} s`;
  if (trackedByCoordinator(open)) {
    switch (owner.kind) {
      case 'unit':
        return `a unit of work of ${owner.topic}[${owner.partition}] in progress: its producer commits it (PostgreSQL first) or aborts it when the unit ends; its coordinator aborts it past the transaction timeout (${timeout})${ENDS_AT(facts)}`;
      case 'relay':
        return `a batch of the outbox relay ${owner.name} in progress: the relay commits it with its checkpoint, or aborts it and sends the batch again; its coordinator aborts it past the transaction timeout (${timeout})${ENDS_AT(facts)}`;
      case 'replay':
        return `an operator's replay or release in progress, carried out by the group's consumer: it commits or aborts it${ENDS_AT(facts)}`;
      case 'publisher':
        return `a publishAll of publisher ${owner.instanceId} in progress: it commits or aborts it${ENDS_AT(facts)}`;
      case 'library':
        return `a unit of work of this library under the same transactional-id prefix (another group, or a topic this group no longer consumes) in progress: its producer ends it${ENDS_AT(facts)}`;
    }
  }
  if (!open.transactionalId || open.state === undefined) return 'no transaction coordinator names it now: the library does not end it';
  switch (owner.kind) {
    case 'unit':
      if (!facts.abortsHanging) return 'hanging (its coordinator no longer ends it), and abortHangingTransactions is false: the library does not end it; the partition waits for an operator (docs/operations.md, "A hanging transaction")';
      if (facts.holdsGroupOffsets === false) {
        return "hanging on this partition but not on the group's offsets: the consumer does not meet it (it holds no offset the partition waits for), so the library does not end it; see docs/console.md, \"Open transactions\"";
      }
      return `hanging: its coordinator no longer ends it. It holds the group's offsets of ${owner.topic}[${owner.partition}], so the partition waits; at its next start (past the transaction timeout and 5 s) the consumer reads what this producer already committed, keeps it in PostgreSQL, and aborts the transaction on every partition it holds, the offsets last; the records come again and the inbox replays their outputs once`;
    case 'relay':
      if (!facts.abortsHanging) return 'hanging (its coordinator no longer ends it), and abortHangingTransactions is false: the relay does not end it; it waits for an operator (docs/outbox.md)';
      return "hanging: its coordinator no longer ends it. When the relay reads its checkpoint (at its start, and past the transaction timeout and 5 s) it takes the events its producer already committed out of the outbox, then aborts it and sends the rest of the batch again";
    case 'replay':
      return 'hanging (its coordinator no longer ends it): the library does not end an operator replay\'s transaction itself';
    case 'publisher':
      return "hanging (its coordinator no longer ends it): the library does not end a publisher's transaction itself";
    case 'library':
      return 'hanging: a unit of work of this library under the same transactional-id prefix (another group, or a topic this group no longer consumes); the consumer of that group ends it at its partition\'s next start, after reading what it committed';
  }
}

/**
 * Why the console refuses to abort this transaction (409), or null when it may: only a hanging transaction (its
 * coordinator named it, in a state that writes no more markers) of another application. A transaction its
 * coordinator still tracks is ended by it (by its producer, or at its timeout): a marker written behind its back
 * would end on one partition what the coordinator may still commit on the others. The library's own are ended by
 * the library's own recovery, which first reads what the producer already committed: an abort from here could
 * discard outputs whose inputs the group already committed.
 */
export function abortRefusal(open: Pick<OpenTransaction, 'producerId' | 'transactionalId' | 'state'>, owner: TransactionOwner, facts: TransactionFacts): string | null {
  if (!open.transactionalId || open.state === undefined) {
    return `no transaction coordinator names producer ${open.producerId} now (a broker did not answer, or its transactional id expired): the console ends only a transaction whose coordinator says it no longer ends it. If it is hanging, end it with kafka-transactions.sh (docs/operations.md, "A hanging transaction")`;
  }
  if (trackedByCoordinator(open)) {
    return `its coordinator still tracks transaction ${open.transactionalId} (state ${open.state}) and ends it itself: its producer commits or aborts it, or Kafka aborts it when its transaction timeout runs out${facts.timeoutAt ? `, at ${facts.timeoutAt}` : ''}. A marker written now would end it behind its coordinator's back`;
  }
  if (owner.kind !== 'other') {
    return `it is this library's own (${owner.kind === 'unit' ? `the producer of ${owner.topic}[${owner.partition}]` : owner.kind === 'relay' ? `the outbox relay ${owner.name}` : owner.kind === 'replay' ? "the group's operator replays" : owner.kind === 'library' ? `another unit of this library (${owner.transactionalId})` : `publisher ${owner.instanceId}`}): ${doingOf(open, owner, facts)}. The console does not abort it: an abort that does not first read what the producer already committed could discard outputs whose inputs are committed`;
  }
  return null;
}
