export * from './idempotent-handler.decorator';
export * from './ordered-event.decorator';
