import { randomBytes } from 'crypto';
import { DecodeError } from '../../errors/decode.error';
import type { FieldError } from '../../errors/event-validation.error';
import type { JsonLimits } from '../../interfaces/format-options.interface';
import { DEFAULT_JSON_LIMITS } from '../../options/format-defaults';
import { startsAsRegistryFramed } from '../../registry/registry-framing';
import type { FormatCodec } from '../format.codec';

// Decoding is stateless without `stream: true`, so one decoder serves every call. A leading BOM is refused
// before decoding; `ignoreBOM` only keeps the decoder from hiding one if that check is ever moved.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

// How much of a value a message may quote: messages end up in logs and dead-letter headers, where a whole
// payload (perhaps personal data, perhaps megabytes) does not belong.
const QUOTE_CHARS = 24;
const PATH_CHARS = 40;
const PARSER_MESSAGE_CHARS = 120;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MIN_NORMAL = 2.2250738585072014e-308;
// toPrecision's own ceiling; a decimal with more significant digits than this is refused rather than compared.
const MAX_CHECKED_DIGITS = 100;

/**
 * Reads a record value as a JSON object. Throws DecodeError (import { DecodeError } from '../../errors/decode.error') for anything else.
 *
 * Stricter than `JSON.parse` where two readers of one record could disagree (duplicate keys, integers a double
 * rounds, decimals with more digits than a double holds) or where reading costs more than the record is worth
 * (size, nesting): a record read differently by two services is worse than a record dead-lettered.
 *
 * Its time is linear in the value's bytes for every value (it runs on the event loop, and the bytes are anyone's):
 * each pass reads each byte or character a bounded number of times, and no regular expression runs over more than a
 * few characters. bench/json-worst-cases.js lists the values that would show otherwise.
 *
 * @example
 * const event = parseJsonValue(message.value); // { amount: 12.5, currency: 'EUR' }
 * const exact = parseJsonValue(message.value, { ...DEFAULT_JSON_LIMITS, bigIntegers: 'bigint' });
 */
export function parseJsonValue(bytes: Buffer | null | undefined, limits: JsonLimits = DEFAULT_JSON_LIMITS): Record<string, unknown> {
  if (bytes === null || bytes === undefined) throw new DecodeError('record has no value (a tombstone)');
  checkFraming(bytes, limits);
  const scan = scanBytes(bytes, limits.maxDepth);
  const text = decodeUtf8(bytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new DecodeError(`value is not JSON: ${shorten(String((error as Error).message), PARSER_MESSAGE_CHARS)}`, { cause: error });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new DecodeError(`value is not a JSON object: the top level is ${describeTopLevel(value)}`);
  }
  const root = value as Record<string, unknown>;
  if (scan.hasLongNumber) {
    // Long numbers need their text, so this pass reads every token; it checks keys on the way.
    inspect(text, root, limits.bigIntegers, true);
  } else if (!keysAreSound(root, scan.separators)) {
    inspect(text, root, limits.bigIntegers, false);
    // The walk above saw a problem the text pass must find; should they ever disagree, refuse rather than pass.
    throw new DecodeError('value is not JSON: a duplicate or "__proto__" key');
  }
  return root;
}

function checkFraming(bytes: Buffer, limits: JsonLimits): void {
  if (bytes.length === 0) throw new DecodeError('value is empty (0 bytes): a JSON object is at least {}');
  if (bytes.length > limits.maxBytes) {
    throw new DecodeError(`value is ${bytes.length} bytes, more than maxBytes ${limits.maxBytes}: refused before decoding`);
  }
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new DecodeError('value starts with a UTF-8 byte order mark (EF BB BF): JSON on the wire must not carry a byte order mark (RFC 8259 §8.1)');
  }
  if (startsAsRegistryFramed(bytes)) {
    throw new DecodeError(
      `value starts with byte 00, as Schema Registry framing does (00 + 4-byte schema id): JSON has no such framing; ${describeStart(bytes)}`,
    );
  }
}

interface ByteScan {
  /** ':' outside strings: one per key of some object, so more of them than parsed keys means a duplicate. */
  separators: number;
  /** A number token with 16+ digits or an exponent: the only ones a double may not hold exactly. */
  hasLongNumber: boolean;
}

/**
 * One pass over the bytes, before anything is decoded or parsed, so a value nested 100,000 deep costs a linear
 * scan and never a stack. Bytes of multi-byte UTF-8 sequences are all >= 0x80, so the ASCII structure read here
 * is the structure JSON.parse will see. Garbage is not judged here: JSON.parse names it better.
 */
function scanBytes(bytes: Buffer, maxDepth: number): ByteScan {
  const length = bytes.length;
  let depth = 0;
  let separators = 0;
  let hasLongNumber = false;
  for (let i = 0; i < length; i++) {
    const c = bytes[i];
    if (c === 0x22) {
      // A string: skip to its closing quote; an escape covers the next byte, so an escaped quote never ends it.
      for (i++; i < length; i++) {
        const s = bytes[i];
        if (s === 0x22) break;
        if (s === 0x5c) i++;
      }
    } else if (c === 0x3a) {
      separators++;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > maxDepth) {
        throw new DecodeError(`value nests objects and arrays deeper than maxDepth ${maxDepth} (at byte ${i}): refused before parsing`);
      }
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let digits = 0;
      let j = i;
      for (; j < length; j++) {
        const d = bytes[j];
        if (d >= 0x30 && d <= 0x39) digits++;
        else if (d === 0x65 || d === 0x45) hasLongNumber = true;
        else if (d !== 0x2e && d !== 0x2d && d !== 0x2b) break;
      }
      // 15 significant digits always survive a double (DBL_DIG); counting every digit errs towards checking.
      if (digits > 15) hasLongNumber = true;
      i = j - 1;
    }
  }
  return { separators, hasLongNumber };
}

function decodeUtf8(bytes: Buffer): string {
  try {
    return UTF8.decode(bytes);
  } catch (error) {
    const at = firstInvalidUtf8(bytes);
    const shown = bytes.subarray(at, Math.min(at + 4, bytes.length)).toString('hex').replace(/(..)(?=.)/g, '$1 ');
    throw new DecodeError(`value is not UTF-8: an invalid byte sequence at byte ${at} (${shown})`, { cause: error });
  }
}

/**
 * Where UTF-8 decoding fails, for the message only (the decoder says that it failed, not where): the start of the
 * first sequence that is not well-formed UTF-8 (Unicode's table 3-7, what a fatal TextDecoder refuses), read in
 * one pass with no call per character.
 */
function firstInvalidUtf8(bytes: Buffer): number {
  const length = bytes.length;
  for (let i = 0; i < length; ) {
    const c = bytes[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    // The second byte's range is narrower after E0, ED, F0 and F4: no overlong form, no surrogate, nothing past U+10FFFF.
    let size: number;
    let low = 0x80;
    let high = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) size = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      size = 3;
      if (c === 0xe0) low = 0xa0;
      else if (c === 0xed) high = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      size = 4;
      if (c === 0xf0) low = 0x90;
      else if (c === 0xf4) high = 0x8f;
    } else return i;
    if (i + size > length) return i;
    if (bytes[i + 1] < low || bytes[i + 1] > high) return i;
    for (let k = 2; k < size; k++) {
      if (bytes[i + k] < 0x80 || bytes[i + k] > 0xbf) return i;
    }
    i += size;
  }
  return 0;
}

function describeStart(bytes: Buffer): string {
  const hex = bytes.subarray(0, 5).toString('hex').replace(/(..)(?=.)/g, '$1 ');
  return `it starts with ${hex} (${bytes.length} byte${bytes.length === 1 ? '' : 's'})`;
}

function describeTopLevel(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'boolean') return String(value);
  return `a ${typeof value}`;
}

/**
 * Counts own keys of every object under `root` with an explicit stack (no recursion: nesting is bounded only
 * by the caller's maxDepth). False when a key is missing against the separators (JSON.parse kept one of two
 * duplicates) or when a "__proto__" key was read (JSON.parse makes it an own property, harmless here, but a
 * reader that merges or spreads the event may set a prototype with it).
 */
function keysAreSound(root: object, separators: number): boolean {
  // for-in is about three times faster than Object.keys here, but also lists what objects inherit: it counts
  // keys only while Object.prototype has nothing enumerable (someone may have added a property to it).
  const inheritsNothing = enumerablesOf(EMPTY) === 0;
  let count = 0;
  const stack: object[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Record<string, unknown> | unknown[];
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child = node[i];
        if (typeof child === 'object' && child !== null) stack.push(child);
      }
    } else if (inheritsNothing) {
      for (const key in node) {
        count++;
        if (key === '__proto__') return false;
        const child = node[key];
        if (typeof child === 'object' && child !== null) stack.push(child);
      }
    } else {
      const keys = Object.keys(node);
      count += keys.length;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        if (key === '__proto__') return false;
        const child = node[key];
        if (typeof child === 'object' && child !== null) stack.push(child);
      }
    }
  }
  return count === separators;
}

const EMPTY = Object.freeze({});

function enumerablesOf(object: object): number {
  let count = 0;
  for (const _ in object) count++;
  return count;
}

interface Frame {
  /** The object or array JSON.parse built for this level, where a converted big integer is put back. */
  container: Record<string, unknown> | unknown[] | undefined;
  isArray: boolean;
  /** The key (objects) or index (arrays) of the value being read. */
  at: string | number;
  expectKey: boolean;
  seen: Set<string> | undefined;
}

/**
 * The slow pass, taken only when the fast checks saw a reason: reads the text token by token (iteratively),
 * with the path of each, to name a duplicate or "__proto__" key, and to check each long number exactly against
 * what JSON.parse made of it. Big integers in 'bigint' or 'string' mode are put into `root` in place: the path
 * is known here, so no marker text is ever written into the value that a producer could forge.
 */
function inspect(text: string, root: Record<string, unknown>, mode: JsonLimits['bigIntegers'], checkNumbers: boolean): void {
  const frames: Frame[] = [];
  const length = text.length;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) {
      const top = frames[frames.length - 1];
      const container = top === undefined ? root : childOf(top);
      const isArray = c === 0x5b;
      frames.push({ container, isArray, at: isArray ? 0 : '', expectKey: !isArray, seen: undefined });
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      frames.pop();
      i++;
    } else if (c === 0x2c) {
      const top = frames[frames.length - 1];
      if (top.isArray) (top.at as number)++;
      else top.expectKey = true;
      i++;
    } else if (c === 0x22) {
      const end = endOfString(text, i);
      const top = frames[frames.length - 1];
      if (top !== undefined && top.expectKey) {
        const raw = text.slice(i + 1, end - 1);
        const key = raw.includes('\\') ? (JSON.parse(text.slice(i, end)) as string) : raw;
        checkKey(frames, top, key);
        top.at = key;
        top.expectKey = false;
      }
      i = end;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const end = endOfNumber(text, i);
      if (checkNumbers) {
        const top = frames[frames.length - 1];
        const converted = checkNumber(text.slice(i, end), mode, frames);
        if (converted !== undefined && top.container !== undefined) (top.container as Record<string | number, unknown>)[top.at] = converted;
      }
      i = end;
    } else {
      i++;
    }
  }
}

/**
 * The container JSON.parse built for the value being read in `frame`. Before a duplicate key is reached, the
 * subtree of its first occurrence is read against the last one's value (the one JSON.parse kept), which may
 * not be a container at all; the duplicate is refused when reached, so that subtree's answer never counts.
 */
function childOf(frame: Frame): Frame['container'] {
  if (frame.container === undefined) return undefined;
  const child = (frame.container as Record<string | number, unknown>)[frame.at];
  return typeof child === 'object' && child !== null ? (child as Frame['container']) : undefined;
}

function checkKey(frames: Frame[], top: Frame, key: string): void {
  if (key === '__proto__') {
    throw new DecodeError(
      `value has a key "__proto__" at ${renderPath(frames, frames.length - 1)}: refused, as a reader that merges or spreads objects would take it for a prototype`,
    );
  }
  top.seen ??= new Set();
  if (top.seen.has(key)) {
    throw new DecodeError(
      `value is not JSON: a duplicate key ${quote(key)} at ${renderPath(frames, frames.length - 1)} (JSON.parse keeps the last, other readers the first)`,
    );
  }
  top.seen.add(key);
}

function endOfString(text: string, start: number): number {
  let i = start + 1;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === 0x22) return i + 1;
    i += c === 0x5c ? 2 : 1;
  }
}

function endOfNumber(text: string, start: number): number {
  let i = start;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2d || c === 0x2b || c === 0x65 || c === 0x45)) break;
  }
  return i;
}

/** A number's text as `±digits × 10^exponent`, digits without leading or trailing zeros ('' for zero). */
interface Decimal {
  negative: boolean;
  digits: string;
  exponent: number;
}

/**
 * Reads a number token (one JSON.parse accepted) by hand, in one pass: a regular expression for its trailing zeros
 * (`/0+$/`) retries from every zero and costs the square of a run of zeros followed by another digit, which a
 * 1 MiB value turns into minutes on the event loop.
 */
function readDecimal(token: string): Decimal {
  const length = token.length;
  const negative = token.charCodeAt(0) === 0x2d;
  let i = negative ? 1 : 0;
  const integerStart = i;
  while (i < length && isDigit(token.charCodeAt(i))) i++;
  const integerEnd = i;
  let fractionStart = i;
  let fractionEnd = i;
  if (i < length && token.charCodeAt(i) === 0x2e) {
    fractionStart = ++i;
    while (i < length && isDigit(token.charCodeAt(i))) i++;
    fractionEnd = i;
  }
  let exponent = 0;
  if (i < length && (token.charCodeAt(i) === 0x65 || token.charCodeAt(i) === 0x45)) {
    exponent = Number(token.slice(i + 1));
    i = length;
  }
  if (i !== length || integerEnd === integerStart || Number.isNaN(exponent)) throw new Error(`not a number token: ${quoteNumber(token)}`);
  const all = token.slice(integerStart, integerEnd) + token.slice(fractionStart, fractionEnd);
  let first = 0;
  while (first < all.length && all.charCodeAt(first) === 0x30) first++;
  if (first === all.length) return { negative, digits: '', exponent: 0 };
  let end = all.length;
  while (all.charCodeAt(end - 1) === 0x30) end--;
  return { negative, digits: all.slice(first, end), exponent: exponent - (fractionEnd - fractionStart) + (all.length - end) };
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/**
 * Checks one long number token against the double JSON.parse made of it. Returns the value to put in its
 * place (a bigint or a string of digits), or undefined when the double is exact; throws when it is not and the
 * mode does not allow reading it otherwise.
 */
function checkNumber(token: string, mode: JsonLimits['bigIntegers'], frames: Frame[]): bigint | string | undefined {
  // No exponent and at most 15 characters: at most 15 digits, and no smaller than 1e-13, far from subnormals.
  if (token.length <= 15 && !/[eE]/.test(token)) return undefined;
  const value = Number(token);
  const where = () => renderPath(frames, frames.length);
  if (!Number.isFinite(value)) {
    throw new DecodeError(`value has a number beyond a double's range at ${where()}: ${quoteNumber(token)}`);
  }
  const decimal = readDecimal(token);
  if (decimal.digits === '') return undefined;
  if (decimal.exponent >= 0) {
    const width = decimal.digits.length + decimal.exponent;
    if (width <= 15) return undefined;
    // Finite as a double, so at most 309 digits. No BigInt is parsed or printed for them: a 6-byte `1e300` stands
    // for 301 digits, and 200,000 of them would cost seconds of BigInt work where a few strings do.
    if (width === 16 && BigInt(decimal.digits) * powerOfTen(decimal.exponent) <= MAX_SAFE) return undefined;
    if (mode === 'bigint') {
      const magnitude = BigInt(decimal.digits) * powerOfTen(decimal.exponent);
      return decimal.negative ? -magnitude : magnitude;
    }
    const text = `${decimal.negative ? '-' : ''}${decimal.digits}${'0'.repeat(decimal.exponent)}`;
    if (mode === 'string') return text;
    throw new DecodeError(
      `value has an integer beyond ±(2^53-1) at ${where()}: ${quoteNumber(text)} (a double would round it; bigIntegers 'bigint' or 'string' reads it exactly)`,
    );
  }
  const significant = decimal.digits.length;
  if (significant <= 15 && Math.abs(value) >= MIN_NORMAL) return undefined;
  if (significant <= MAX_CHECKED_DIGITS) {
    // The text survives when the double, written back with as many significant digits, gives the same digits.
    const back = readDecimal(value.toPrecision(significant));
    if (back.digits === decimal.digits && back.exponent === decimal.exponent) return undefined;
  }
  throw new DecodeError(
    `value has a number at ${where()} that a double cannot hold: ${quoteNumber(token)} would read as ${String(value)} (a double would round it: send such a number as a string)`,
  );
}

const POWERS_OF_TEN: bigint[] = [1n];

/** 10^n as a bigint, n at most 308 here (a finite double's exponent): each computed once for the process. */
function powerOfTen(n: number): bigint {
  for (let k = POWERS_OF_TEN.length; k <= n; k++) POWERS_OF_TEN.push(POWERS_OF_TEN[k - 1] * 10n);
  return POWERS_OF_TEN[n];
}

/** The JSON path of the value read at frame `upTo` (exclusive): `$`, `.key`, `["odd key"]`, `[3]`. */
function renderPath(frames: Frame[], upTo: number): string {
  const segment = (i: number): string => {
    const at = frames[i].at;
    if (typeof at === 'number') return `[${at}]`;
    if (at.length <= QUOTE_CHARS && /^[A-Za-z_$][\w$]*$/.test(at)) return `.${at}`;
    return `[${quote(at)}]`;
  };
  let head = '$';
  let i = 0;
  for (; i < upTo && head.length <= PATH_CHARS; i++) head += segment(i);
  if (i === upTo && head.length <= PATH_CHARS) return head;
  // Too long to quote whole (it may be 100,000 levels): its start, and its innermost end, where the problem is.
  let tail = '';
  for (let j = upTo - 1; j >= 0 && tail.length < PATH_CHARS; j--) tail = segment(j) + tail;
  const headChars = Math.floor(PATH_CHARS / 3);
  return `${head.slice(0, headChars)}…${tail.slice(tail.length - (PATH_CHARS - headChars))}`;
}

function quote(text: string): string {
  return JSON.stringify(shorten(text, QUOTE_CHARS));
}

function quoteNumber(digits: string): string {
  return digits.length <= QUOTE_CHARS ? digits : `${digits.slice(0, QUOTE_CHARS)}… (${digits.length} characters)`;
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

/**
 * The bytes of an event written as JSON: UTF-8, no BOM; a bigint as a JSON number of its exact digits; a Date as its ISO 8601 string (toJSON); undefined properties left out as JSON.stringify does. Throws TypeError for a top level that is not a plain object (arrays, strings, numbers, null), for a cycle, and for a non-finite number (NaN, Infinity: JSON.stringify would write null silently).
 *
 * @example
 * encodeJsonValue({ amount: 2n ** 63n, at: new Date(0) }); // {"amount":9223372036854775808,"at":"1970-01-01T00:00:00.000Z"}
 */
export function encodeJsonValue(value: unknown): Buffer {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`event cannot be written as a JSON object: it is ${describeTopLevel(value)}`);
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    // A bigint or a cycle: the careful pass below writes the first and names the second.
    text = undefined;
  }
  // NaN and Infinity come out as null; an output without "null" anywhere had none, so most events stop here.
  if (text === undefined || text.includes('null')) text = stringifyCarefully(value);
  if (text === undefined || text.charCodeAt(0) !== 0x7b) {
    throw new TypeError(`event cannot be written as a JSON object: it would be written as ${text === undefined ? 'nothing' : describeTopLevel(JSON.parse(text))}`);
  }
  return Buffer.from(text, 'utf8');
}

/**
 * The codec of plain JSON (no schema; Nest's Kafka transport and most Node services write it): a body is read with
 * parseJsonValue within the reader's limits; an event is valid when it can be written as a JSON object, which
 * encodeJsonValue does.
 */
export const JSON_CODEC: FormatCodec = Object.freeze({
  format: 'json',
  describe: 'JSON',
  validatesDecoded: false,
  decode: (body: Buffer, limits: JsonLimits) => ({ value: parseJsonValue(body, limits) }),
  validate(value: unknown): FieldError[] {
    try {
      encodeJsonValue(value);
      return [];
    } catch (err) {
      return [{ path: '', problem: (err as Error).message }];
    }
  },
  encode: (value: unknown) => encodeJsonValue(value),
});

/** JSON.stringify with a replacer that writes bigints exactly and refuses non-finite numbers. */
function stringifyCarefully(value: object): string | undefined {
  // Bigints are written as a string carrying a random marker, then unquoted. The marker is drawn per call, and
  // the replacements are counted against the bigints written, so no string of the event can pass for one.
  let marker: string;
  let bigints = 0;
  const replacer = function (this: unknown, key: string, item: unknown): unknown {
    if (typeof item === 'bigint') {
      bigints++;
      return `${marker}${item.toString()}`;
    }
    if (typeof item === 'number' && !Number.isFinite(item)) {
      throw new TypeError(`event cannot be written as JSON: ${item} at key ${quote(key)} (JSON has no such number; JSON.stringify would write null)`);
    }
    return item;
  };
  for (;;) {
    marker = `\u0000${randomBytes(12).toString('hex')}:`;
    let text: string | undefined;
    try {
      text = JSON.stringify(value, replacer);
    } catch (error) {
      if (error instanceof TypeError && /circular/i.test(error.message)) {
        throw new TypeError(`event cannot be written as JSON: it has a cycle (${shorten(error.message.replace(/\s+/g, ' '), 160)})`, { cause: error });
      }
      throw error;
    }
    if (text === undefined || bigints === 0) return text;
    const written = JSON.stringify(marker).slice(1, -1);
    const pattern = new RegExp(`"${escapeRegExp(written)}(-?\\d+)"`, 'g');
    let replaced = 0;
    const result = text.replace(pattern, (_, digits: string) => {
      replaced++;
      return digits;
    });
    // Should a string of the event ever carry this very marker, counts differ: draw another and write again.
    if (replaced === bigints) return result;
    bigints = 0;
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
