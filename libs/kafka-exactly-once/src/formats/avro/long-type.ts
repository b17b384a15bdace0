import * as avro from 'avsc';

/**
 * Avro `long` as a JavaScript bigint on read, so amounts in cents never lose precision past 2^53.
 * Writes accept a bigint or a safe integer number.
 */
export const BigIntLongType = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => buf.readBigInt64LE(),
  toBuffer: (n: bigint | number) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(BigInt(n));
    return buf;
  },
  fromJSON: (n: unknown) => BigInt(n as string | number),
  toJSON: (n: bigint) => (n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n.toString()),
  isValid: (n: unknown) =>
    (typeof n === 'bigint' && n >= -(2n ** 63n) && n < 2n ** 63n) || (typeof n === 'number' && Number.isSafeInteger(n)),
  compare: (a: bigint, b: bigint) => (a === b ? 0 : a < b ? -1 : 1),
});
