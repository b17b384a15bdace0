// The formats room's door (README.md): what the engine, the publisher, the outbox, the console and the CLI read and
// write values with. Files outside the room may import these files directly; nothing inside the room imports this one.
export * from './format.codec';
export { eventReader, type EventReader, type ReaderSpec } from './event-reader';
export { eventValidator, validationName, validationProblem, type EventValidation, type EventValidator, type StandardSchemaV1 } from './event-validator';
export { encodeDeclaredEvent, type EncodedEvent } from './declared-event.encoder';
export { checkReaders, formatPeersNeeded, warmUpIds, writesToRegistry } from './registry-boot';
export { formatRegistry, writerCodecs, type FormatRegistry } from './writer-codecs';
export { SchemaRegistry, type LoadedSchema, type SchemaRegistryOptions } from './avro/schema-registry';
export { EventCodec, type DecodedEvent, type EncodedMessage, type EncodeOptions } from './avro/event-codec';
export * from './avro/single-object.codec';
export * from './avro/rabin-fingerprint';
export { JSON_CODEC, encodeJsonValue, parseJsonValue } from './json/json.codec';
