/** kafka-exactly-once/prisma: handlers that write through Prisma 7 (`@prisma/adapter-pg`) in the unit of work. */
export { prismaDatabase, type PrismaDatabaseOptions, type PrismaClientSettings } from './database/prisma.database';
export { UnitConnectionError } from './database/unit-connection';
