import type { Type } from 'avsc';

/**
 * At most this many array items and map entries, in all, in a value decoded for an operator. A value past it
 * could not be shown whole anyway (its JSON is cut at 65,536 characters), and a hostile block count (an array of
 * `null` claiming 2^31 items costs no byte per item) would otherwise hold the request and its memory.
 */
export const MAX_DECODED_ITEMS = 100_000;

/** Why a value is not decoded: its block counts claim more items than an operator's view decodes. */
export class TooManyItemsError extends Error {
  constructor(claimed: number) {
    super(`its arrays and maps claim ${claimed > Number.MAX_SAFE_INTEGER ? 'more than 2^53' : claimed} items, more than the ${MAX_DECODED_ITEMS} an operator's view decodes (a hostile or corrupt block count?): shown as bytes only`);
    this.name = 'TooManyItemsError';
  }
}

interface Cursor {
  buf: Buffer;
  pos: number;
  /** Items still allowed. */
  budget: number;
}

/** Avro's zig-zag varint, as a number (exact to 2^53, enough to compare with a budget). */
function readLong(c: Cursor): number {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (c.pos >= c.buf.length) throw new Error('the value ends inside a number');
    const byte = c.buf[c.pos++];
    value += (byte & 0x7f) * scale;
    if ((byte & 0x80) === 0) return value % 2 === 0 ? value / 2 : -(value + 1) / 2;
    scale *= 128;
  }
  throw new Error('a number is longer than 10 bytes');
}

function skipBytes(c: Cursor, n: number): void {
  if (n < 0 || c.pos + n > c.buf.length) throw new Error('the value ends inside a string, bytes or fixed');
  c.pos += n;
}

/** Takes `n` items of a block from the budget, before any of them is read. */
function spend(c: Cursor, n: number): void {
  c.budget -= n;
  if (c.budget < 0) throw new TooManyItemsError(MAX_DECODED_ITEMS - c.budget);
}

function walk(type: Type, c: Cursor): void {
  const t = type as Type & { typeName: string; itemsType?: Type; valuesType?: Type; fields?: Array<{ type: Type }>; types?: Type[]; size?: number; underlyingType?: Type };
  const name = t.typeName;
  if (name.startsWith('logical:')) return walk(t.underlyingType!, c);
  switch (name) {
    case 'null':
      return;
    case 'boolean':
      return skipBytes(c, 1);
    case 'int':
    case 'long':
    case 'abstract:long':
    case 'enum':
      readLong(c);
      return;
    case 'float':
      return skipBytes(c, 4);
    case 'double':
      return skipBytes(c, 8);
    case 'bytes':
    case 'string':
      return skipBytes(c, readLong(c));
    case 'fixed':
      return skipBytes(c, t.size!);
    case 'record':
    case 'error':
      for (const field of t.fields!) walk(field.type, c);
      return;
    case 'union:unwrapped':
    case 'union:wrapped': {
      const index = readLong(c);
      if (!Number.isInteger(index) || index < 0 || index >= t.types!.length) throw new Error(`a union branch ${index} out of ${t.types!.length}`);
      return walk(t.types![index], c);
    }
    case 'array':
    case 'map':
      for (;;) {
        let n = readLong(c);
        if (n === 0) return;
        if (n < 0) {
          n = -n;
          readLong(c); // the block's size in bytes
        }
        spend(c, n);
        for (let i = 0; i < n; i++) {
          if (name === 'map') skipBytes(c, readLong(c));
          walk(name === 'map' ? t.valuesType! : t.itemsType!, c);
        }
      }
    default:
      // A type this walk does not know: its items are not counted (avsc decodes it as it is).
      return;
  }
}

/**
 * Checks, before avsc decodes `body` with the writer `type`, that its block counts claim at most
 * MAX_DECODED_ITEMS items in all (avsc allocates and loops over what a count claims, whatever bytes follow).
 * Throws TooManyItemsError, or an error saying where the bytes end too soon.
 */
export function checkBlockCounts(type: Type, body: Buffer): void {
  walk(type, { buf: body, pos: 0, budget: MAX_DECODED_ITEMS });
}
