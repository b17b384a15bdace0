import type { RegistryOptions, RegistryTransport } from '../registry/registry-http';
import { RegistrySchemas, type WriterBuilder } from '../registry/registry-schemas';
import { avroCodec, avroWriter } from './avro/avro.codec';
import type { LoadedSchema } from './avro/schema-registry';
import type { WriterCodec } from './format.codec';
import { jsonSchemaWriter } from './json-schema/json-schema.codec';
import { protobufWriter } from './protobuf/protobuf.codec';

/** The Schema Registry with the formats' codecs: what the module, the CLI and the console read and write it with. */
export type FormatRegistry = RegistrySchemas<WriterCodec, LoadedSchema>;

/**
 * How the registry's writer schemas become codecs, by their schemaType: AVRO (longs as the module reads them), JSON
 * (JSON Schema) and PROTOBUF; any other kind is one no handler reads. A schema the application writes with (an Avro
 * schema of its directory) is kept as its own codec for the id the registry gives it.
 */
export function writerCodecs(longs: 'bigint' | 'number'): WriterBuilder<WriterCodec, LoadedSchema> {
  return {
    reads: (schemaType) => schemaType === 'AVRO' || schemaType === 'JSON' || schemaType === 'PROTOBUF',
    build: (schema) => (schema.schemaType === 'JSON' ? jsonSchemaWriter(schema) : schema.schemaType === 'PROTOBUF' ? protobufWriter(schema) : avroWriter(schema, longs)),
    ownCodec: (schema) => avroCodec(schema.type),
  };
}

/** The Schema Registry of the `schemaRegistry` option, its writer schemas read by the formats' codecs. */
export function formatRegistry(options: RegistryOptions, longs: 'bigint' | 'number', transport?: RegistryTransport, now?: () => number): FormatRegistry {
  return new RegistrySchemas(options, writerCodecs(longs), transport, now);
}
