/**
 * An event a unit of work sends, as bytes: what `ctx.emit` encoded, a dead letter, a retry tier's record. The
 * inbox keeps it either in the unit's outputs (a binary blob per unit of work, see encodeUnitOutputs) or, for the
 * rarer outcomes (dead letters, retries, records run more than once), on the record's own row as RecordedOutput.
 */
export interface OutputRecord {
  topic: string;
  key: Buffer | null;
  value: Buffer | null;
  /** [name, value] in order (a name may repeat); value null for a null header. */
  headers: Array<[string, Buffer | null]>;
}

/**
 * An event recorded on an inbox row: exactly the bytes sent, so that a replay re-sends the same record. Every
 * byte string is base64 (header names and values too): jsonb cannot hold a NUL, and headers are bytes.
 */
export interface RecordedOutput {
  topic: string;
  /** base64, or null */
  key: string | null;
  /** base64, or null */
  value: string | null;
  /** [name, value] pairs, both base64 (value null for a null header), in order (a name may repeat). */
  h?: Array<[string, string | null]>;
  /** Rows written before 0.2: text headers. Read for replays, never written. */
  headers?: Record<string, string>;
}

const b64 = (bytes: Buffer) => bytes.toString('base64');

/** As an inbox row's JSON holds it (base64: jsonb cannot hold a NUL, and headers are bytes). */
export function toRecordedOutput(output: OutputRecord): RecordedOutput {
  return {
    topic: output.topic,
    key: output.key === null ? null : b64(output.key),
    value: output.value === null ? null : b64(output.value),
    h: output.headers.map(([name, value]) => [b64(Buffer.from(name, 'utf8')), value === null ? null : b64(value)]),
  };
}

/** From an inbox row's JSON (also the text headers of rows written before 0.2). */
export function fromRecordedOutput(recorded: RecordedOutput): OutputRecord {
  const headers: Array<[string, Buffer | null]> = recorded.h
    ? recorded.h.map(([name64, value64]) => [Buffer.from(name64, 'base64').toString('utf8'), value64 === null ? null : Buffer.from(value64, 'base64')])
    : Object.entries(recorded.headers ?? {}).map(([name, value]) => [name, Buffer.from(value, 'utf8')]);
  return {
    topic: recorded.topic,
    key: recorded.key === null ? null : Buffer.from(recorded.key, 'base64'),
    value: recorded.value === null ? null : Buffer.from(recorded.value, 'base64'),
    headers,
  };
}

/** Bytes an output takes in a record batch, framing included (an upper estimate). */
export function outputRecordSize(output: OutputRecord): number {
  let size = 64 + (output.key?.length ?? 0) + (output.value?.length ?? 0);
  for (const [name, value] of output.headers) size += 10 + Buffer.byteLength(name) + (value?.length ?? 0);
  return size;
}

/** Format of a unit's outputs blob: this byte, then each output (see encodeUnitOutputs). */
const UNIT_OUTPUTS_V1 = 1;

/**
 * The outputs of a unit of work's records in one blob, in the order they are sent: per output, the offset of the
 * record that emitted it (int64), its topic, key, value and headers, lengths first (-1 for null). Written once per
 * unit of work (one row) instead of once per record (a row update each), and read back only to replay a unit whose
 * Kafka transaction did not commit.
 */
export function encodeUnitOutputs(records: ReadonlyArray<{ offset: string; outputs: readonly OutputRecord[] }>): Buffer {
  let size = 1;
  for (const { outputs } of records) {
    for (const o of outputs) {
      size += 8 + 2 + Buffer.byteLength(o.topic) + 4 + (o.key?.length ?? 0) + 4 + (o.value?.length ?? 0) + 2;
      for (const [name, value] of o.headers) size += 2 + Buffer.byteLength(name) + 4 + (value?.length ?? 0);
    }
  }
  const blob = Buffer.allocUnsafe(size);
  let at = blob.writeUInt8(UNIT_OUTPUTS_V1, 0);
  const bytes = (value: Buffer | null) => {
    at = blob.writeInt32BE(value === null ? -1 : value.length, at);
    if (value !== null) at += value.copy(blob, at);
  };
  const text = (value: string) => {
    const length = blob.write(value, at + 2, 'utf8');
    if (length > 0xffff) throw new RangeError(`a topic or header name of ${length} bytes cannot be recorded`);
    blob.writeUInt16BE(length, at);
    at += 2 + length;
  };
  for (const { offset, outputs } of records) {
    for (const o of outputs) {
      at = blob.writeBigInt64BE(BigInt(offset), at);
      text(o.topic);
      bytes(o.key);
      bytes(o.value);
      if (o.headers.length > 0xffff) throw new RangeError(`an output with ${o.headers.length} headers cannot be recorded`);
      at = blob.writeUInt16BE(o.headers.length, at);
      for (const [name, value] of o.headers) {
        text(name);
        bytes(value);
      }
    }
  }
  if (at !== size) throw new Error(`unit outputs: wrote ${at} of ${size} bytes`);
  return blob;
}

/** A unit's outputs blob read back: each record's outputs by its offset, in order. Throws on a blob it cannot read whole. */
export function decodeUnitOutputs(blob: Buffer): Map<string, OutputRecord[]> {
  if (blob.length < 1 || blob[0] !== UNIT_OUTPUTS_V1) throw new Error(`unit outputs: unknown format ${blob[0]}`);
  const byOffset = new Map<string, OutputRecord[]>();
  let at = 1;
  const need = (n: number) => {
    if (at + n > blob.length) throw new Error(`unit outputs: truncated at byte ${at} of ${blob.length}`);
  };
  const bytes = (): Buffer | null => {
    need(4);
    const length = blob.readInt32BE(at);
    at += 4;
    if (length < 0) return null;
    need(length);
    // A copy: the blob may be a slice of a larger buffer of the driver's.
    const value = Buffer.from(blob.subarray(at, at + length));
    at += length;
    return value;
  };
  const text = (): string => {
    need(2);
    const length = blob.readUInt16BE(at);
    at += 2;
    need(length);
    const value = blob.toString('utf8', at, at + length);
    at += length;
    return value;
  };
  while (at < blob.length) {
    need(8);
    const offset = blob.readBigInt64BE(at).toString();
    at += 8;
    const topic = text();
    const key = bytes();
    const value = bytes();
    need(2);
    const count = blob.readUInt16BE(at);
    at += 2;
    const headers: Array<[string, Buffer | null]> = [];
    for (let i = 0; i < count; i++) headers.push([text(), bytes()]);
    const list = byOffset.get(offset);
    const output = { topic, key, value, headers };
    if (list) list.push(output);
    else byOffset.set(offset, [output]);
  }
  return byOffset;
}
