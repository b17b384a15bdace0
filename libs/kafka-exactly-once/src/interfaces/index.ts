export * from './kafka-exactly-once-options.interface';
export * from './event-context.interface';
