'use strict';
const { check, selfTest } = require('./checker');

describe('verify checker', () => {
  it('passes a clean history and reports every planted anomaly', () => {
    const results = selfTest();
    expect(Object.keys(results)).toHaveLength(15);
    for (const [name, reported] of Object.entries(results)) expect({ name, reported }).toEqual({ name, reported: true });
  });

  it('counts what it finds', () => {
    const pay = (offset, n, amountCents) => ({ partition: 0, offset: String(offset), messageId: `m-${n}`, payment: { paymentId: `p-${n}`, accountId: 'a', amountCents } });
    const inputs = [pay(0, 1, 100n), pay(1, 2, -150n), pay(2, 1, 100n), pay(3, 3, 60n)];
    const result = check({
      inputs,
      planted: new Map(),
      // p-2 applied as if p-3 came first (reordered), p-3 never applied (lost).
      ledger: [
        { paymentId: 'p-1', accountId: 'a', status: 'ACCEPTED', balanceAfter: 100n },
        { paymentId: 'p-2', accountId: 'a', status: 'ACCEPTED', balanceAfter: 10n },
      ],
      accounts: [{ accountId: 'a', balance: 10n }],
      outputs: { kafkajs: [], java: [] },
      deadLetters: [],
      parkedKeys: [],
      expectedParkedKeys: [],
      acknowledged: [],
    });
    expect(result).toMatchObject({ recordsIn: 4, distinct: 3, lost: 1, wrongOutcomes: 1, wrongBalances: 1, missingOutputs: 3, pass: false });
  });
});
