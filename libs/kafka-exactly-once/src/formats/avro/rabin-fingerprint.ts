/**
 * CRC-64-AVRO, the 64-bit Rabin fingerprint of the Avro specification ("Schema Fingerprints"), computed over
 * a schema's Parsing Canonical Form. Returned as a signed 64-bit bigint, the value Java's
 * `SchemaNormalization.parsingFingerprint64` returns.
 */
const EMPTY = 0xc15d213aa4d7a795n;
const MASK = 0xffffffffffffffffn;

const TABLE: bigint[] = (() => {
  const table: bigint[] = [];
  for (let i = 0; i < 256; i++) {
    let fp = BigInt(i);
    for (let j = 0; j < 8; j++) {
      fp = (fp >> 1n) ^ (EMPTY & -(fp & 1n));
    }
    table.push(fp & MASK);
  }
  return table;
})();

export function rabinFingerprint64(bytes: Uint8Array): bigint {
  let fp = EMPTY;
  for (const byte of bytes) {
    fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(byte)) & 0xffn)];
  }
  return BigInt.asIntN(64, fp);
}

/** The fingerprint as the 8 little-endian bytes that follow the `C3 01` marker of single-object encoding. */
export function fingerprintBytes(fingerprint: bigint): Buffer {
  const buf = Buffer.alloc(8);
  buf.writeBigInt64LE(BigInt.asIntN(64, fingerprint));
  return buf;
}
