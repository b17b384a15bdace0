export * from './json.codec';
