'use strict';
/**
 * The verifier's own Avro single-object codec (avsc and the Avro specification, not the library under test):
 * `C3 01`, the CRC-64-AVRO fingerprint of the writer schema's canonical form (little-endian), the binary body.
 */
const avsc = require('avsc');
const { readFileSync, readdirSync } = require('fs');
const { join } = require('path');

const EMPTY = 0xc15d213aa4d7a795n;
const TABLE = Array.from({ length: 256 }, (_, i) => {
  let fp = BigInt(i);
  for (let j = 0; j < 8; j++) fp = (fp >> 1n) ^ (EMPTY & -(fp & 1n));
  return fp & 0xffffffffffffffffn;
});

function fingerprint(text) {
  let fp = EMPTY;
  for (const byte of Buffer.from(text, 'utf8')) fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(byte)) & 0xffn)];
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE(fp);
  return out;
}

/** Avro long as bigint (a balance may exceed 2^53). */
const LONG = avsc.types.LongType.__with({
  fromBuffer: (buf) => buf.readBigInt64LE(),
  toBuffer: (n) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(BigInt(n));
    return buf;
  },
  fromJSON: (n) => BigInt(n),
  toJSON: (n) => Number(n),
  isValid: (n) => typeof n === 'bigint',
  compare: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
});

/** The schemas of a directory, by full name: { type, fingerprint }. */
function loadSchemas(directory) {
  const schemas = new Map();
  for (const file of readdirSync(directory).filter((f) => f.endsWith('.avsc')).sort()) {
    const type = avsc.Type.forSchema(JSON.parse(readFileSync(join(directory, file), 'utf8')), { wrapUnions: false, registry: { long: LONG } });
    schemas.set(type.name, { type, fingerprint: fingerprint(JSON.stringify(type.getSchema())) });
  }
  return schemas;
}

function encode(schema, event) {
  return Buffer.concat([Buffer.from([0xc3, 0x01]), schema.fingerprint, schema.type.toBuffer(event)]);
}

/** The event, or null when the bytes are not this schema's single-object encoding. */
function decode(schema, bytes) {
  if (!bytes || bytes.length < 10 || bytes[0] !== 0xc3 || bytes[1] !== 0x01 || !bytes.subarray(2, 10).equals(schema.fingerprint)) return null;
  try {
    return schema.type.fromBuffer(bytes.subarray(10));
  } catch {
    return null;
  }
}

module.exports = { loadSchemas, encode, decode, fingerprint };
