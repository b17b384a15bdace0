export * from './kafka.health-indicator';
export * from './inbox.health-indicator';
