/**
 * The lifecycle of a unit of work, as a table of legal transitions (after kafkajs's transaction state
 * machine). PostgreSQL commits before Kafka: once `committing-kafka` is reached the database work is durable,
 * so a failure there can only end in `outcome-unknown` or `fenced`, never in a plain abort.
 */
export type UnitOfWorkState =
  | 'new'
  | 'claiming'
  | 'handling'
  | 'producing'
  | 'committing-db'
  | 'committing-kafka'
  | 'committed'
  | 'aborting'
  | 'aborted'
  | 'outcome-unknown'
  | 'fenced';

const TRANSITIONS: Record<UnitOfWorkState, readonly UnitOfWorkState[]> = {
  new: ['claiming', 'aborting'],
  claiming: ['handling', 'aborting'],
  handling: ['producing', 'aborting'],
  producing: ['committing-db', 'aborting'],
  'committing-db': ['committing-kafka', 'aborting'],
  'committing-kafka': ['committed', 'outcome-unknown', 'fenced'],
  aborting: ['aborted', 'outcome-unknown', 'fenced'],
  committed: [],
  aborted: [],
  'outcome-unknown': [],
  fenced: [],
};

export class IllegalTransitionError extends Error {
  constructor(from: UnitOfWorkState, to: UnitOfWorkState) {
    super(`unit of work cannot go from "${from}" to "${to}"`);
    this.name = 'IllegalTransitionError';
  }
}

export class UnitOfWorkStateMachine {
  private current: UnitOfWorkState = 'new';

  get state(): UnitOfWorkState {
    return this.current;
  }

  transitionTo(next: UnitOfWorkState): void {
    if (!TRANSITIONS[this.current].includes(next)) throw new IllegalTransitionError(this.current, next);
    this.current = next;
  }

  /** Whether PostgreSQL may already hold this unit's work (its commit was at least attempted). */
  get databaseMayHaveCommitted(): boolean {
    return this.current === 'committing-kafka' || this.current === 'committed';
  }

  isTerminal(): boolean {
    return TRANSITIONS[this.current].length === 0;
  }
}
