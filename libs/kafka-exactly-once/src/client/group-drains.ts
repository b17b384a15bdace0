/**
 * What the engine tells the consumer group of its client, whichever driver runs it: a partition busy in its worker
 * (markBusy), and the drains a join, a rejoin or a leave of a member waits for (registerDrain). Module-level, by
 * group id: a group's consumers in this process read them.
 */

/** Partitions of each group (`topic`, NUL, partition) paused while a worker runs their batch, in this process (see markBusy). */
const busy = new Map<string, Map<string, number>>();

/** A partition of `groupId` paused while its worker runs a batch (+1), or resumed after it (-1). */
export function markBusy(groupId: string, topic: string, partition: number, delta: 1 | -1): void {
  let partitions = busy.get(groupId);
  if (!partitions) busy.set(groupId, (partitions = new Map()));
  const key = `${topic}\u0000${partition}`;
  const n = (partitions.get(key) ?? 0) + delta;
  if (n > 0) partitions.set(key, n);
  else partitions.delete(key);
  if (partitions.size === 0) busy.delete(groupId);
}

/** Whether a worker of `groupId` in this process runs a batch of `topic` `partition` (see markBusy). */
export function isBusy(groupId: string, topic: string, partition: number): boolean {
  return busy.get(groupId)?.has(`${topic}\u0000${partition}`) ?? false;
}

/**
 * A drain (see registerDrain): called with `leaving`, the member id of the consumer of its group that is about to
 * leave the group; without it, a consumer of its group is about to join or rejoin.
 */
export type Drain = (leaving?: string) => Promise<void>;

/** What each group's consumers in this process wait for before they (re)join or leave the group (see registerDrain). */
const drains = new Map<string, Set<Drain>>();

/**
 * `drain` runs, and is awaited, each time a consumer of `groupId` in this process is about to join or rejoin the
 * group, and each time one is about to leave it (`leaving`: its member id; the drain of another member has
 * nothing to do): the partitions' workers end their units of work first. Returns the undo.
 */
export function registerDrain(groupId: string, drain: Drain): () => void {
  let set = drains.get(groupId);
  if (!set) drains.set(groupId, (set = new Set()));
  set.add(drain);
  return () => {
    set.delete(drain);
    if (set.size === 0 && drains.get(groupId) === set) drains.delete(groupId);
  };
}

/** Runs the drains registered for `groupId` (see registerDrain): before a join or rejoin, or before `leaving` leaves. */
export async function runDrains(groupId: string, leaving?: string): Promise<void> {
  const waiting = drains.get(groupId);
  if (waiting) await Promise.all([...waiting].map((drain) => drain(leaving)));
}
