import { OperatorRequestError } from '../errors/operator-request.error';
import { legacyTransactionalIds, outboxTransactionalId, partitionTransactionalId, publisherTransactionalId, replayTransactionalId } from '../transaction/transactional-ids';
import { abortRefusal, doingOf, ownerOf, trackedByCoordinator } from './transaction-owners';
import { transactionTarget } from './transaction-target';

const ids = { prefix: 'app', groupId: 'pay.group', consumed: ['payments.requested', 'payments.requested.retry.1'] };
const facts = { abortsHanging: true, transactionTimeoutMs: 60000 };

describe('open transactions: whose they are', () => {
  it("name a partition's producer of the group as a unit, with its topic and partition (the escaped group and that of versions before 0.3)", () => {
    expect(ownerOf(partitionTransactionalId('app', 'pay.group', 'payments.requested', 3), ids)).toEqual({ kind: 'unit', topic: 'payments.requested', partition: 3 });
    expect(ownerOf(partitionTransactionalId('app', 'pay.group', 'payments.requested.retry.1', 0), ids)).toEqual({ kind: 'unit', topic: 'payments.requested.retry.1', partition: 0 });
    expect(ownerOf(legacyTransactionalIds.partition('app', 'pay.group', 'payments.requested', 12), ids)).toEqual({ kind: 'unit', topic: 'payments.requested', partition: 12 });
  });

  it('name the relay, the operator replays and a publisher; anything else is another application', () => {
    expect(ownerOf(outboxTransactionalId('app', 'orders.relay', '7f3a'), ids)).toEqual({ kind: 'relay', name: 'orders.relay' });
    expect(ownerOf(replayTransactionalId('app', 'pay.group'), ids)).toEqual({ kind: 'replay' });
    expect(ownerOf(publisherTransactionalId('app', 'host-1'), ids)).toEqual({ kind: 'publisher', instanceId: 'host-1' });
    expect(ownerOf(legacyTransactionalIds.publisher('app', 'host-1'), ids)).toEqual({ kind: 'publisher', instanceId: 'host-1' });
    // A unit's id of this prefix, of a topic the group does not consume or of another group: the library's all the same.
    const processed = partitionTransactionalId('app', 'pay.group', 'payments.processed', 0);
    expect(ownerOf(processed, ids)).toEqual({ kind: 'library', transactionalId: processed });
    const otherGroup = partitionTransactionalId('app', 'other', 'payments.requested', 0);
    expect(ownerOf(otherGroup, ids)).toEqual({ kind: 'library', transactionalId: otherGroup });
    expect(abortRefusal({ producerId: '1', transactionalId: otherGroup, state: 'Empty' }, ownerOf(otherGroup, ids), { abortsHanging: true, transactionTimeoutMs: 60000 })).toContain("this library's own");
    // Another prefix, no id at all.
    expect(ownerOf(partitionTransactionalId('billing', 'pay.group', 'payments.requested', 0), ids)).toEqual({ kind: 'other' });
    expect(ownerOf('app.pay%2Egroup.payments.requested.x', ids)).toEqual({ kind: 'other' });
    expect(ownerOf(null, ids)).toEqual({ kind: 'other' });
    expect(ownerOf('app.%publisher.', ids)).toEqual({ kind: 'other' });
  });
});

describe('open transactions: what is done about them, and whether the console aborts them', () => {
  const unit = { kind: 'unit' as const, topic: 'payments.requested', partition: 3 };
  const other = { kind: 'other' as const };

  it('leave a transaction its coordinator tracks to it, naming when Kafka aborts it', () => {
    const open = { producerId: '9', transactionalId: 'billing-1', state: 'Ongoing' };
    expect(trackedByCoordinator(open)).toBe(true);
    expect(abortRefusal(open, other, { ...facts, timeoutAt: '2026-01-01T00:01:00.000Z' })).toMatch(/coordinator still tracks transaction billing-1 \(state Ongoing\).*at 2026-01-01T00:01:00.000Z/);
    expect(abortRefusal({ ...open, state: 'PrepareCommit' }, other, facts)).toMatch(/still tracks/);
    // Two brokers naming it differently: not known to be forgotten.
    expect(abortRefusal({ ...open, state: 'Empty or Ongoing' }, other, facts)).toMatch(/still tracks/);
    expect(doingOf(open, other, facts)).toBeNull();
    expect(doingOf(open, unit, facts)).toMatch(/unit of work of payments.requested\[3\] in progress.*60 s/);
  });

  it('refuse one no coordinator names', () => {
    expect(abortRefusal({ producerId: '9' }, other, facts)).toMatch(/no transaction coordinator names producer 9/);
  });

  it("abort another application's hanging transaction, never the library's own", () => {
    for (const state of ['Empty', 'CompleteCommit', 'CompleteAbort', 'Dead']) {
      expect(abortRefusal({ producerId: '9', transactionalId: 'billing-1', state }, other, facts)).toBeNull();
    }
    const hanging = { producerId: '9', transactionalId: 'app.pay%2Egroup.payments.requested.3', state: 'Empty' };
    expect(abortRefusal(hanging, unit, { ...facts, holdsGroupOffsets: true })).toMatch(/this library's own \(the producer of payments.requested\[3\]\).*consumer reads what this producer already committed/);
    expect(abortRefusal(hanging, { kind: 'relay', name: 'r' }, facts)).toMatch(/the outbox relay r.*takes the events its producer already committed out of the outbox/);
  });

  it("say what the library does about its own hanging transactions, as its options have it", () => {
    const hanging = { transactionalId: 'x', state: 'CompleteAbort' };
    expect(doingOf(hanging, unit, { ...facts, holdsGroupOffsets: true })).toMatch(/holds the group's offsets of payments.requested\[3\].*aborts the transaction on every partition it holds, the offsets last/);
    expect(doingOf(hanging, unit, { ...facts, holdsGroupOffsets: false })).toMatch(/does not end it/);
    expect(doingOf(hanging, unit, { ...facts, abortsHanging: false })).toMatch(/abortHangingTransactions is false/);
    expect(doingOf(hanging, { kind: 'replay' }, facts)).toMatch(/does not end/);
  });
});

describe('open transactions: the abort request', () => {
  it('take a topic, a partition and a producer id, as text or numbers', () => {
    expect(transactionTarget({ topic: 't', partition: 0, producerId: '4096', startOffset: '17' })).toEqual({ topic: 't', partition: 0, producerId: '4096', startOffset: '17' });
    expect(transactionTarget({ topic: 't', partition: '2', producerId: 4096, startOffset: 0 })).toEqual({ topic: 't', partition: 2, producerId: '4096', startOffset: '0' });
    expect(transactionTarget({ topic: 't', partition: 1, producerId: '9223372036854775807', startOffset: '5' }).producerId).toBe('9223372036854775807');
  });

  it('refuse anything else with the field that is wrong', () => {
    const field = (body: Record<string, unknown>) => {
      try {
        transactionTarget(body);
      } catch (err) {
        return (err as OperatorRequestError).field;
      }
      return undefined;
    };
    expect(field({ partition: 0, producerId: '1', startOffset: '0' })).toBe('topic');
    expect(field({ topic: 't', partition: 0, producerId: '1' })).toBe('startOffset');
    expect(field({ topic: 't', partition: 0, producerId: '1', startOffset: '-3' })).toBe('startOffset');
    expect(field({ topic: 't', partition: -1, producerId: '1' })).toBe('partition');
    expect(field({ topic: 't', partition: 1.5, producerId: '1' })).toBe('partition');
    expect(field({ topic: 't', partition: 0, producerId: '9223372036854775808' })).toBe('producerId');
    expect(field({ topic: 't', partition: 0, producerId: '-1' })).toBe('producerId');
    expect(field({ topic: 't', partition: 0 })).toBe('producerId');
  });
});
