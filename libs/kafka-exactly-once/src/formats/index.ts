export * from './json/json.codec';
export * from './avro/rabin-fingerprint';
export * from './avro/schema-registry';
export * from './avro/single-object.codec';
