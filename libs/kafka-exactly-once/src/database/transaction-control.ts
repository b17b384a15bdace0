/**
 * What a statement a data layer sends on a unit of work's connection does to the unit's transaction, read from its
 * text by a lexer of PostgreSQL's own rules (comments, nested block comments, quoted identifiers, standard and
 * escape strings, dollar quotes), so that neither case, nor a comment before the keyword, nor a second statement
 * after a `;` can carry a COMMIT past it. Linear in the text.
 */
export type StatementEffect =
  /** Anything that stays inside the transaction (reads, writes, DDL, savepoints of the data layer's own). */
  | { kind: 'other' }
  /** BEGIN / START TRANSACTION; `modes`: the characteristics it sets (isolation level, access mode), if any. */
  | { kind: 'begin'; modes: string }
  /** COMMIT / END, without AND CHAIN. */
  | { kind: 'commit' }
  /** ROLLBACK / ABORT, without AND CHAIN or TO SAVEPOINT. */
  | { kind: 'rollback' }
  /** A statement that would end or change the unit's transaction in a way no savepoint stands for. */
  | { kind: 'refused'; why: string };

const OTHER: StatementEffect = Object.freeze({ kind: 'other' });

/** First words that may start a statement touching the transaction (lower case). */
const WATCHED = new Set(['begin', 'start', 'commit', 'end', 'rollback', 'abort', 'prepare', 'savepoint', 'release', 'set', 'reset']);

/** Settings that are the unit's transaction (its characteristics) or its guard against a stalled owner (DESIGN §2.9). */
const UNIT_SETTINGS = new Set([
  'transaction_isolation',
  'transaction_read_only',
  'transaction_deferrable',
  'idle_in_transaction_session_timeout',
  'session_characteristics',
]);

/** Savepoints of the library's own (a record's attempt, an ORM transaction made a savepoint): not the data layer's to touch. */
const OWN_SAVEPOINT = /^kafka_eo_/i;

/**
 * The effect of a statement text. A text of several statements (`SELECT 1; COMMIT`) is refused when any of them
 * touches the transaction, as is a BEGIN, COMMIT or ROLLBACK that is not alone in its text (only a statement alone
 * can stand for a savepoint). Where a string's end depends on `standard_conforming_strings` (a backslash before a
 * quote), the text is read both ways and the stricter answer wins.
 */
export function statementEffect(text: string): StatementEffect {
  // The common case, without lexing the whole text: one statement (no ';' at all) whose first word is none of
  // those that can touch a transaction.
  if (text.indexOf(';') < 0) {
    const first = firstWord(text);
    if (first === undefined || !WATCHED.has(first)) return OTHER;
  }
  const strict = effectOf(statements(text, false));
  if (strict.kind === 'refused' || text.indexOf('\\') < 0) return strict;
  const escaped = effectOf(statements(text, true));
  if (escaped.kind === 'refused') return escaped;
  return strict.kind === escaped.kind ? strict : { kind: 'refused', why: 'its text reads as different statements depending on standard_conforming_strings; send transaction control alone' };
}

/** The first word of the text after whitespace and comments, lower case; undefined when none. */
function firstWord(text: string): string | undefined {
  const length = text.length;
  let i = skipSpaceAndComments(text, 0);
  const start = i;
  while (i < length && isWordChar(text.charCodeAt(i))) i++;
  return i > start ? text.slice(start, i).toLowerCase() : undefined;
}

function effectOf(list: string[][]): StatementEffect {
  if (list.length === 0) return OTHER;
  const effects = list.map(classify);
  if (effects.length === 1) return effects[0];
  const touching = effects.find((e) => e.kind !== 'other');
  if (!touching) return OTHER;
  if (touching.kind === 'refused') return touching;
  return { kind: 'refused', why: `a ${touching.kind.toUpperCase()} among ${list.length} statements of one text: send transaction control alone, as a statement of its own` };
}

/** One statement's effect from its words (lower case; a quoted identifier keeps its quotes). */
function classify(words: string[]): StatementEffect {
  const [first, second, third] = words;
  const chained = words.includes('chain') && words.includes('and') && !words.includes('no');
  switch (first) {
    case 'begin':
    case 'start': {
      if (first === 'start' && second !== 'transaction') return OTHER;
      const rest = words.slice(first === 'start' ? 2 : second === 'work' || second === 'transaction' ? 2 : 1);
      return { kind: 'begin', modes: rest.join(' ') };
    }
    case 'commit':
    case 'end':
      if (first === 'commit' && second === 'prepared') return { kind: 'refused', why: 'COMMIT PREPARED ends a prepared transaction' };
      if (chained) return { kind: 'refused', why: `${first.toUpperCase()} AND CHAIN would commit the unit's transaction and open another` };
      return { kind: 'commit' };
    case 'rollback':
    case 'abort':
      if (first === 'rollback' && second === 'prepared') return { kind: 'refused', why: 'ROLLBACK PREPARED ends a prepared transaction' };
      if (first === 'rollback') {
        // ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name: a savepoint's, not the transaction's.
        const to = second === 'work' || second === 'transaction' ? 2 : 1;
        if (words[to] === 'to') return savepoint(words.slice(words[to + 1] === 'savepoint' ? to + 2 : to + 1), 'ROLLBACK TO');
      }
      if (chained) return { kind: 'refused', why: `${first.toUpperCase()} AND CHAIN would roll back the unit's transaction and open another` };
      return { kind: 'rollback' };
    case 'prepare':
      return second === 'transaction' ? { kind: 'refused', why: "PREPARE TRANSACTION would end the unit's transaction as a prepared one" } : OTHER;
    case 'savepoint':
      return savepoint(words.slice(1), 'SAVEPOINT');
    case 'release':
      return savepoint(words.slice(second === 'savepoint' ? 2 : 1), 'RELEASE');
    case 'set': {
      const name = second === 'session' || second === 'local' ? third : second;
      if (name === 'transaction' || (second === 'session' && third === 'characteristics')) {
        return { kind: 'refused', why: "SET TRANSACTION / SET SESSION CHARACTERISTICS would change the unit's transaction: set the isolation level for the whole unit (inbox.isolationLevel)" };
      }
      return name !== undefined && UNIT_SETTINGS.has(unquoted(name)) ? { kind: 'refused', why: `SET ${name} would change the unit's transaction or its guard against a stalled owner` } : OTHER;
    }
    case 'reset':
      if (second === 'all') return { kind: 'refused', why: "RESET ALL would undo the unit's own settings, its guard against a stalled owner (idle_in_transaction_session_timeout) among them" };
      return second !== undefined && UNIT_SETTINGS.has(unquoted(second)) ? { kind: 'refused', why: `RESET ${second} would change the unit's transaction or its guard against a stalled owner` } : OTHER;
    default:
      return OTHER;
  }
}

/** An identifier as PostgreSQL compares it: a quoted one without its quotes (the words are lower case already). */
function unquoted(word: string): string {
  return word.length >= 2 && word.startsWith('"') && word.endsWith('"') ? word.slice(1, -1).replace(/""/g, '"') : word;
}

/** A savepoint statement whose name starts at `words[0]`: refused when it names one of the library's own. */
function savepoint(words: string[], command: string): StatementEffect {
  const [name, next] = words;
  // U&"..." spells a name in Unicode escapes, which could spell the library's own: not a data layer's way.
  if (name === 'u' && next === '&') return { kind: 'refused', why: `${command} of a savepoint named with Unicode escapes (U&"...")` };
  if (name !== undefined && OWN_SAVEPOINT.test(unquoted(name))) {
    return { kind: 'refused', why: `${command} of the library's own savepoint ${name}` };
  }
  return OTHER;
}

/**
 * The statements of a text, each as the words it is made of (lower case), up to a few: enough to classify it.
 * `backslashEscapes`: read backslashes in plain strings as escapes (standard_conforming_strings off).
 */
function statements(text: string, backslashEscapes: boolean): string[][] {
  const list: string[][] = [];
  let words: string[] = [];
  const length = text.length;
  let i = 0;
  while (i < length) {
    i = skipSpaceAndComments(text, i);
    if (i >= length) break;
    const c = text.charCodeAt(i);
    if (c === 0x3b /* ; */) {
      if (words.length > 0) list.push(words);
      words = [];
      i++;
    } else if (c === 0x27 /* ' */) {
      const escapes = backslashEscapes || isEscapePrefix(text, i);
      i = endOfQuoted(text, i, 0x27, escapes);
      if (words.length < 8) words.push("'");
    } else if (c === 0x22 /* " */) {
      const end = endOfQuoted(text, i, 0x22, false);
      if (words.length < 8) words.push(text.slice(i, end).toLowerCase());
      i = end;
    } else if (c === 0x24 /* $ */) {
      i = endOfDollar(text, i);
      if (words.length < 8) words.push('$');
    } else if (isWordChar(c)) {
      const start = i;
      while (i < length && isWordChar(text.charCodeAt(i))) i++;
      if (words.length < 8) words.push(text.slice(start, i).toLowerCase());
    } else {
      // An operator or punctuation: a word of its own (so that `rollback to` is told from `rollback (to)`).
      if (words.length < 8) words.push(text[i]);
      i++;
    }
  }
  if (words.length > 0) list.push(words);
  return list;
}

function isWordChar(c: number): boolean {
  // Letters, digits, _ and $ (PostgreSQL identifiers may hold $ after their first character), and any non-ASCII.
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x24 || c >= 0x80;
}

/** Whether the quote at `i` opens an escape string (E'...'): an E or e right before it, not ending a longer word. */
function isEscapePrefix(text: string, i: number): boolean {
  const e = text.charCodeAt(i - 1);
  if (e !== 0x45 && e !== 0x65) return false;
  return i < 2 || !isWordChar(text.charCodeAt(i - 2));
}

function skipSpaceAndComments(text: string, from: number): number {
  const length = text.length;
  let i = from;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0c || c === 0x0b) {
      i++;
    } else if (c === 0x2d && text.charCodeAt(i + 1) === 0x2d) {
      // A line comment ends at a line feed or a carriage return, as PostgreSQL's scanner reads it.
      i += 2;
      while (i < length && text.charCodeAt(i) !== 0x0a && text.charCodeAt(i) !== 0x0d) i++;
    } else if (c === 0x2f && text.charCodeAt(i + 1) === 0x2a) {
      // Block comments nest in PostgreSQL.
      let depth = 1;
      i += 2;
      while (i < length && depth > 0) {
        const d = text.charCodeAt(i);
        if (d === 0x2f && text.charCodeAt(i + 1) === 0x2a) {
          depth++;
          i += 2;
        } else if (d === 0x2a && text.charCodeAt(i + 1) === 0x2f) {
          depth--;
          i += 2;
        } else i++;
      }
    } else break;
  }
  return i;
}

/** The index after a quoted string or identifier opened at `start` (a doubled quote stays inside; unterminated: the end). */
function endOfQuoted(text: string, start: number, quote: number, backslashEscapes: boolean): number {
  const length = text.length;
  let i = start + 1;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (backslashEscapes && c === 0x5c) {
      i += 2;
    } else if (c === quote) {
      if (text.charCodeAt(i + 1) === quote) i += 2;
      else return i + 1;
    } else i++;
  }
  return length;
}

/**
 * The index after a dollar-quoted string opened at `start` ($$...$$ or $tag$...$tag$), or after a lone `$` (a
 * parameter such as $1 is read as a word by the caller's next step).
 */
function endOfDollar(text: string, start: number): number {
  const length = text.length;
  let i = start + 1;
  // A tag is an identifier that does not start with a digit.
  const first = text.charCodeAt(i);
  if (first >= 0x30 && first <= 0x39) {
    while (i < length && isWordChar(text.charCodeAt(i)) && text.charCodeAt(i) !== 0x24) i++;
    return i;
  }
  while (i < length && isWordChar(text.charCodeAt(i)) && text.charCodeAt(i) !== 0x24) i++;
  if (text.charCodeAt(i) !== 0x24) return i;
  const tag = text.slice(start, i + 1);
  const end = text.indexOf(tag, i + 1);
  return end < 0 ? length : end + tag.length;
}
