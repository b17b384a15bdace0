import type { ValueTransformer } from 'typeorm';

/** PostgreSQL bigint <-> JavaScript bigint (the pg driver returns bigint columns as strings). */
export const bigintColumn: ValueTransformer = {
  to: (value: bigint | null | undefined) => (value === null || value === undefined ? value : value.toString()),
  from: (value: string | null) => (value === null ? null : BigInt(value)),
};
