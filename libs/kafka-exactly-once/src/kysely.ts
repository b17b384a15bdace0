/** kafka-exactly-once/kysely: handlers that write through Kysely (PostgresDialect) in the unit of work. */
export { kyselyDatabase, type KyselyDatabaseOptions, type KyselyUnitPool } from './database/kysely.database';
export { UnitConnectionError } from './database/unit-connection';
