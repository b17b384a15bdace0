import { belowFloor } from './exactly-once.consumer';
import { PartitionSession } from './partition-session';
import type { PartitionProducer } from '../transaction/partition-producer';

const batch = (...offsets: number[]) => offsets.map((o) => ({ offset: String(o) }));

describe('records fetched again below the committed floor', () => {
  it('skips the prefix below the floor and resolves to the offset before the floor', () => {
    expect(belowFloor(batch(5, 6, 7), 3n)).toEqual({ skipped: 0 });
    expect(belowFloor(batch(0, 1, 2, 3, 4), 3n)).toEqual({ skipped: 3, resolveTo: '2' });
    expect(belowFloor(batch(0, 1, 2), 3n)).toEqual({ skipped: 3, resolveTo: '2' });
  });

  it('a stale batch shorter than what was committed since resolves to the floor, not to its last record', () => {
    // Offsets 0..9 were committed (floor 10); a fetch issued from offset 0 returned only 0..1.
    expect(belowFloor(batch(0, 1), 10n)).toEqual({ skipped: 2, resolveTo: '9' });
  });

  it('a gap of transaction markers: the first record at or above the floor is kept', () => {
    expect(belowFloor(batch(0, 1, 2, 5, 6), 4n)).toEqual({ skipped: 3, resolveTo: '3' });
  });

  it('the floor follows every commit of the session, and never goes down', () => {
    const session = new PartitionSession('t', 0, {} as PartitionProducer);
    session.floor = 3n; // read after InitProducerId
    session.committed(7n);
    expect(session.floor).toBe(7n);
    session.committed(5n);
    expect(session.floor).toBe(7n);
    expect(session.progress.snapshot(0).committedOffset).toBe('7');
  });

  it('a producer recreated in the same session keeps the higher of its floor and the committed offset read', async () => {
    const session = new PartitionSession('t', 0, { start: async () => undefined } as unknown as PartitionProducer);
    await session.start(async () => 3n);
    expect(session.floor).toBe(3n);
    session.committed(9n);
    // The group's offset read lower (moved back by a plain commit outside the protocol): the floor stays.
    await session.start(async () => 4n);
    expect(session.floor).toBe(9n);
    // Another owner committed further meanwhile: the floor follows.
    await session.start(async () => 20n);
    expect(session.floor).toBe(20n);
  });
});
