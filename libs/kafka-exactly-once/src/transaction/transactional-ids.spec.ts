import { escapeIdPart, partitionTransactionalId, publisherTransactionalId, replayTransactionalId } from './transactional-ids';

describe('transactional ids', () => {
  it('never gives two groups, or a group and a publisher, the same id', () => {
    // Ambiguous once written with dots: group "a.b" with topic "c", and group "a" with topic "b.c".
    expect(partitionTransactionalId('app', 'a.b', 'c', 0)).not.toBe(partitionTransactionalId('app', 'a', 'b.c', 0));
    expect(partitionTransactionalId('app', 'a%2Eb', 'c', 0)).not.toBe(partitionTransactionalId('app', 'a.b', 'c', 0));
    expect(publisherTransactionalId('app', 'x.0')).not.toBe(partitionTransactionalId('app', 'publisher', 'x', 0));
    expect(replayTransactionalId('app', 'g')).not.toBe(partitionTransactionalId('app', 'g', 'kafka-eo-replays', 0));
  });

  it('keeps the prefix as given (PREFIXED ACLs on it still match), reads as before for groups without dots, and escapes reversibly', () => {
    expect(partitionTransactionalId('com.acme', 'orders.v2', 'payments', 0)).toBe('com.acme.orders%2Ev2.payments.0');
    expect(partitionTransactionalId('consumer-app', 'consumer-app', 'payments.requested', 3)).toBe('consumer-app.consumer-app.payments.requested.3');
    expect(escapeIdPart('orders.v2%')).toBe('orders%2Ev2%25');
    expect(decodeURIComponent(escapeIdPart('a.b%c'))).toBe('a.b%c');
  });
});
