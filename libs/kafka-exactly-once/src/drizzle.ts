/** kafka-exactly-once/drizzle: handlers that write through Drizzle (node-postgres) in the unit of work. */
export { drizzleDatabase, type DrizzleDatabaseOptions } from './database/drizzle.database';
export { UnitConnectionError, type BoundPgClient } from './database/unit-connection';
