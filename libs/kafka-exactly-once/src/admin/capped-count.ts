/**
 * The counts the operator tools show on every refresh (the overview's, the outbox summary's, the health details
 * the overview asks for) stop at this many. An exact count reads every row it counts, so that a page opened
 * every 5 s per tab would cost in proportion to a table an incident makes large (a million dead letters); past
 * 10,000 the number tells an operator nothing more than "very many".
 */
export const COUNT_CAP = 10_000;

/**
 * SQL for the rows of `fromWhere` (`<table> WHERE ...`) counted up to one more than the cap: it stops reading
 * there. Read its value with {@link cappedValue}.
 */
export function cappedCount(fromWhere: string): string {
  return `(SELECT count(*)::int FROM (SELECT 1 FROM ${fromWhere} LIMIT ${COUNT_CAP + 1}) AS capped)`;
}

/** A counted value as shown: at most the cap, and whether there were more (then the true count is over 10,000). */
export function cappedValue(counted: number): { value: number; atLeast: boolean } {
  return counted > COUNT_CAP ? { value: COUNT_CAP, atLeast: true } : { value: counted, atLeast: false };
}

/**
 * Which counts of a document reached the cap: each such name is `true` (its number is then 10,000, and there are
 * more). The numbers keep their place and type, so a reader that knows nothing of the cap still reads a number.
 */
export type AtLeast<Name extends string> = Partial<Record<Name, true>>;

/** Reads capped counts into their values and the names of those that reached the cap. */
export function cappedCounts<Name extends string>(counted: Record<Name, number>): { values: Record<Name, number>; atLeast: AtLeast<Name> } {
  const values = {} as Record<Name, number>;
  const atLeast: AtLeast<Name> = {};
  for (const name of Object.keys(counted) as Name[]) {
    const { value, atLeast: more } = cappedValue(counted[name]);
    values[name] = value;
    if (more) atLeast[name] = true;
  }
  return { values, atLeast };
}
