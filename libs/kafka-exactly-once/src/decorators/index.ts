export * from './idempotent-handler.decorator';
