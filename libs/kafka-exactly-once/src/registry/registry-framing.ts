/**
 * Confluent's Schema Registry framing of a record value, whatever its format: the magic byte 00, the schema id (4
 * bytes, big-endian), then the body as the format writes it (an Avro body, JSON text, Protobuf's message indexes
 * and message). The only code that writes or reads these five bytes.
 */
const MAGIC_BYTE = 0x00;
/** The magic byte and the schema id. */
const HEADER_BYTES = 5;

/** Whether a value starts as the registry's framing does (its first byte is 00), whether or not it holds an id. */
export function startsAsRegistryFramed(value: Buffer | null | undefined): boolean {
  return !!value && value.length > 0 && value[0] === MAGIC_BYTE;
}

/** The schema id of a value in the registry's framing (byte 0 then a 4-byte big-endian id), else undefined. */
export function registryIdOf(value: Buffer | null | undefined): number | undefined {
  if (!value || value.length < HEADER_BYTES || value[0] !== MAGIC_BYTE) return undefined;
  return value.readUInt32BE(1);
}

/** The body of a value in the registry's framing: what follows the schema id. */
export function registryBodyOf(value: Buffer): Buffer {
  return value.subarray(HEADER_BYTES);
}

/** The registry's framing of a body written with schema `id`. */
export function frameForRegistry(id: number, body: Buffer): Buffer {
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header[0] = MAGIC_BYTE;
  header.writeUInt32BE(id, 1);
  return Buffer.concat([header, body]);
}
