/** The details of one indicator's result; `status` is set by {@link up} and {@link down}. */
export type HealthDetails = Record<string, unknown>;

/**
 * One indicator's result, in the shape `HealthCheckService.check()` of @nestjs/terminus reads
 * (`HealthIndicatorResult`). The library builds it itself, so @nestjs/terminus is an optional peer: an
 * application without it can call the indicators and read `result[key].status`.
 */
export type HealthResult<Key extends string = string> = Record<Key, HealthDetails & { status: 'up' | 'down' }>;

export function up<const Key extends string>(key: Key, details: HealthDetails = {}): HealthResult<Key> {
  return { [key]: { ...details, status: 'up' } } as HealthResult<Key>;
}

export function down<const Key extends string>(key: Key, details: HealthDetails): HealthResult<Key> {
  return { [key]: { ...details, status: 'down' } } as HealthResult<Key>;
}

/** Options every indicator takes, as terminus's own indicators take `{ timeout }`. */
export interface HealthCheckOptions {
  /** How long the checked system may take to answer. Default 3000 ms. */
  timeoutMs?: number;
}
