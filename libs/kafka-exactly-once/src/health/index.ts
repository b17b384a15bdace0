export * from './kafka.health-indicator';
export * from './inbox.health-indicator';
export * from './publisher.health-indicator';
export * from './outbox.health-indicator';
export type { HealthResult, HealthDetails, HealthCheckOptions } from './health-result';
