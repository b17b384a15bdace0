/**
 * The library's transactional ids, one per producer role, written so that two groups (or a group and a publisher)
 * of an application can never share one: `{prefix}.{group}.{topic}.{partition}` read ambiguously once dots are in
 * the names (group `a.b` with topic `c` and group `a` with topic `b.c`). Here the group is escaped (`%` as `%25`,
 * `.` as `%2E`), so that the dot after it always ends it; topics (letters, digits, `.`, `_`, `-`) and partition
 * numbers are written as they are, and the publisher's role is `%publisher`, which no escaped group can be. The
 * prefix stays as given (unique per application; ACLs on transactional ids are usually PREFIXED on it). Ids of
 * groups without dots or `%` read as before.
 */
export function escapeIdPart(part: string): string {
  return part.replace(/%/g, '%25').replace(/\./g, '%2E');
}

/** The transactional producer of one input partition of a group. */
export function partitionTransactionalId(prefix: string, group: string, topic: string, partition: number): string {
  return `${prefix}.${escapeIdPart(group)}.${topic}.${partition}`;
}

/** The producer of a group's operator replays and releases. */
export function replayTransactionalId(prefix: string, group: string): string {
  return `${prefix}.${escapeIdPart(group)}.kafka-eo-replays`;
}

/** The producer of a publisher instance's publishAll transactions. */
export function publisherTransactionalId(prefix: string, instanceId: string): string {
  return `${prefix}.%publisher.${instanceId}`;
}

/**
 * The producer of a database's outbox relay: one id per database (its outbox id), held by the one active relay (a
 * stalled earlier one is fenced).
 */
export function outboxTransactionalId(prefix: string, name: string, outboxId: string): string {
  return `${prefix}.%outbox.${escapeIdPart(name)}.${outboxId}`;
}

/**
 * The ids of versions before 0.3, for the same roles: an instance of an earlier version (a stalled one, during a
 * rolling upgrade) holds them, and a new owner fences them too (one InitProducerId) before it works.
 */
export const legacyTransactionalIds = {
  partition: (prefix: string, group: string, topic: string, partition: number) => `${prefix}.${group}.${topic}.${partition}`,
  replay: (prefix: string, group: string) => `${prefix}.${group}.kafka-eo-replays`,
  publisher: (prefix: string, instanceId: string) => `${prefix}.publisher.${instanceId}`,
};
