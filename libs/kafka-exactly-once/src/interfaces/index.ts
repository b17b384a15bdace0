export * from './kafka-exactly-once-options.interface';
export * from './event-context.interface';
export * from './record-info.interface';
export * from './format-options.interface';
