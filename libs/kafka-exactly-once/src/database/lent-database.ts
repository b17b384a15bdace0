import type { DatabasePort, DatabaseSession, LentDatabase } from './database.port';

/** What each session's handlers were lent (one per unit of work), until the session's connection goes back. */
const lent = new WeakMap<DatabaseSession, LentDatabase>();

/** The data layer bound to a session's transaction: built at the first handler call of its unit, then the same. */
export function lentFor(database: DatabasePort, session: DatabaseSession): LentDatabase {
  let found = lent.get(session);
  if (!found) {
    found = database.lend(session);
    lent.set(session, found);
  }
  return found;
}

/** The session's connection goes back to the pool (or was closed): what its handlers were lent refuses from now on. */
export function endLent(session: DatabaseSession, closed: boolean): void {
  const found = lent.get(session);
  if (!found) return;
  lent.delete(session);
  found.end(closed);
}

/** While set, what the session lent refuses the data layer's own transactions with this error (key lanes). */
export function refuseLentTransactions(session: DatabaseSession, make: (() => Error) | undefined): void {
  lent.get(session)?.transactions?.refuseTransactions(make);
}
