// The Schema Registry room's door (README.md). It knows no format: the formats room gives it a WriterBuilder.
export * from './registry-framing';
export * from './registry-schemas';
export { errorCodeOf, httpTransport, type RegistryAnswer, type RegistryOptions, type RegistryTransport } from './registry-http';
