import { recordDigest } from '../kafkajs/record-digest';
import { committedIn, forgottenByCoordinator, offsetsPartitionOf } from './hanging-transactions';
import type { LogRecord } from './log-requests';

describe('hanging transactions: which the library may abort, what a producer committed', () => {
  it('calls a transaction forgotten only when a coordinator names it in a state that writes no more markers', () => {
    const open = { producerId: '7', producerEpoch: 3, startOffset: '10' };
    for (const state of ['Empty', 'CompleteCommit', 'CompleteAbort', 'Dead']) expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state })).toBe(true);
    for (const state of ['Ongoing', 'PrepareCommit', 'PrepareAbort', 'PrepareEpochFence']) expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state })).toBe(false);
    // Unnamed (no coordinator knows the producer id): nobody can tell whose it is.
    expect(forgottenByCoordinator(open)).toBe(false);
    expect(forgottenByCoordinator({ ...open, state: 'Empty' })).toBe(false);
    // Named differently by two brokers while its coordination moves, or a state this code does not know.
    expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state: 'Empty or PrepareCommit' })).toBe(false);
    expect(forgottenByCoordinator({ ...open, transactionalId: 'a', state: 'SomethingNew' })).toBe(false);
  });

  it("places a group on __consumer_offsets as Kafka does (Java's String.hashCode)", () => {
    expect(offsetsPartitionOf('consumer-app', 50)).toBe(Math.abs(javaHashOf('consumer-app')) % 50);
    expect(offsetsPartitionOf('', 50)).toBe(0);
  });

  it("counts a producer's records committed once its commit marker follows them, across reads; an abort or another producer's marker does not", () => {
    let offset = 0;
    const data = (producerId: string, value: string, inTransaction = true): LogRecord => ({
      offset: String(offset++),
      timestamp: '0',
      key: null,
      value: Buffer.from(value),
      headers: [['message-id', Buffer.from(value)]],
      isControlRecord: false,
      producerId,
      inTransaction,
    });
    const marker = (producerId: string, type: 0 | 1): LogRecord => {
      const key = Buffer.alloc(4);
      key.writeInt16BE(type, 2);
      return { offset: String(offset++), timestamp: '0', key, value: null, headers: [], isControlRecord: true, producerId, inTransaction: true };
    };
    const digest = (value: string) => recordDigest('out', null, Buffer.from(value), [['message-id', Buffer.from(value)]]);
    const open = new Map<string, string[]>();
    const committed = new Map<string, number>();
    const mine = new Set(['7']);
    // a aborted; b committed by a marker in the next read; c's "commit" is another producer's marker; d never ended.
    committedIn('out', [data('7', 'a'), marker('7', 0), data('7', 'b'), data('8', 'x')], mine, open, committed);
    expect([...committed]).toEqual([]);
    committedIn('out', [marker('8', 1), marker('7', 1), data('7', 'c'), marker('8', 1), data('7', 'not-transactional', false), data('7', 'd')], mine, open, committed);
    expect([...committed]).toEqual([[digest('b'), 1]]);
    expect(open.get('7')).toEqual([digest('c'), digest('d')]);
    // The same bytes committed twice count twice.
    committedIn('out', [marker('7', 1), data('7', 'b'), marker('7', 1)], mine, open, committed);
    expect(committed).toEqual(new Map([[digest('b'), 2], [digest('c'), 1], [digest('d'), 1]]));
  });
});

function javaHashOf(text: string): number {
  let h = 0;
  for (const c of text) h = (Math.imul(31, h) + c.charCodeAt(0)) | 0;
  return h;
}
