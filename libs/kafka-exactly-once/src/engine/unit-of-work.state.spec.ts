import { IllegalTransitionError, UnitOfWorkStateMachine } from './unit-of-work.state';

describe('UnitOfWorkStateMachine', () => {
  it('walks the happy path: claim, handle, produce, commit PostgreSQL, commit Kafka', () => {
    const sm = new UnitOfWorkStateMachine();
    for (const state of ['claiming', 'handling', 'producing', 'committing-db', 'committing-kafka', 'committed'] as const) {
      sm.transitionTo(state);
      expect(sm.state).toBe(state);
    }
    expect(sm.isTerminal()).toBe(true);
  });

  it('refuses to commit Kafka before PostgreSQL', () => {
    const sm = new UnitOfWorkStateMachine();
    sm.transitionTo('claiming');
    sm.transitionTo('handling');
    sm.transitionTo('producing');
    expect(() => sm.transitionTo('committing-kafka')).toThrow(IllegalTransitionError);
  });

  it('cannot abort once PostgreSQL committed: only an unknown outcome or fencing remain', () => {
    const sm = new UnitOfWorkStateMachine();
    for (const state of ['claiming', 'handling', 'producing', 'committing-db', 'committing-kafka'] as const) sm.transitionTo(state);
    expect(sm.databaseMayHaveCommitted).toBe(true);
    expect(() => sm.transitionTo('aborting')).toThrow(IllegalTransitionError);
    sm.transitionTo('fenced');
    expect(sm.isTerminal()).toBe(true);
  });

  it('aborts from any step before the Kafka commit', () => {
    for (const last of ['claiming', 'handling', 'producing', 'committing-db'] as const) {
      const sm = new UnitOfWorkStateMachine();
      const path = ['claiming', 'handling', 'producing', 'committing-db'] as const;
      for (const state of path.slice(0, path.indexOf(last) + 1)) sm.transitionTo(state);
      sm.transitionTo('aborting');
      sm.transitionTo('aborted');
      expect(sm.state).toBe('aborted');
    }
  });
});
