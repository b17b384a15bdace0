export * from './rabin-fingerprint';
export * from './schema-registry';
export * from './single-object.codec';
