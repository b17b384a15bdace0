import { COMMITTED_READS_BEFORE_ABORT, HangingAbortPolicy } from './hanging-abort-policy';

describe('when a hanging transaction of its own producer is aborted', () => {
  it('at once after a whole read', () => {
    expect(new HangingAbortPolicy().afterRead('p0', 't1', true)).toEqual({ action: 'abort' });
  });

  it(`after a read that was not whole: not yet, read again; the ${COMMITTED_READS_BEFORE_ABORT}th such read in a row aborts anyway`, () => {
    const policy = new HangingAbortPolicy();
    const actions = Array.from({ length: COMMITTED_READS_BEFORE_ABORT }, () => policy.afterRead('p0', 't1', false));
    expect(actions.slice(0, -1).map((a) => a.action)).toEqual(Array(COMMITTED_READS_BEFORE_ABORT - 1).fill('read-again'));
    expect(actions[0]).toEqual({ action: 'read-again', reads: 1, of: COMMITTED_READS_BEFORE_ABORT });
    expect(actions.at(-1)).toEqual({ action: 'abort-anyway', reads: COMMITTED_READS_BEFORE_ABORT });
    // The abort failed (the transaction still there): the next read that is not whole aborts anyway again.
    expect(policy.afterRead('p0', 't1', false).action).toBe('abort-anyway');
  });

  it('counts reads in a row per place and transaction: a whole read, another transaction or an ended one starts again', () => {
    const policy = new HangingAbortPolicy(2);
    expect(policy.afterRead('p0', 't1', false).action).toBe('read-again');
    expect(policy.afterRead('p1', 't9', false).action).toBe('read-again'); // another partition's own count
    expect(policy.afterRead('p0', 't2', false).action).toBe('read-again'); // another transaction at p0
    expect(policy.afterRead('p0', 't2', true).action).toBe('abort');
    expect(policy.afterRead('p0', 't2', false).action).toBe('read-again'); // a whole read ended the row
    policy.ended('p0');
    expect(policy.afterRead('p0', 't2', false).action).toBe('read-again');
    expect(policy.afterRead('p0', 't2', false).action).toBe('abort-anyway');
    expect(policy.afterRead('p1', 't9', false).action).toBe('abort-anyway');
  });

  it('reads a transaction again only once `spacingMs` have passed since its last read that was not whole', () => {
    const policy = new HangingAbortPolicy();
    expect(policy.mayRead('relay', 't1', 10000, 0)).toBe(true);
    policy.afterRead('relay', 't1', false, 1000);
    expect(policy.mayRead('relay', 't1', 10000, 10999)).toBe(false);
    expect(policy.mayRead('relay', 't2', 10000, 10999)).toBe(true); // another transaction: at once
    expect(policy.mayRead('relay', 't1', 10000, 11000)).toBe(true);
  });
});
