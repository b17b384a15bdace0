import { Global, Inject, Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { PrismaPg } from '@prisma/adapter-pg';
import { Pool } from 'pg';
import { config } from './config';
import { PrismaClient } from './generated/prisma/client';

/** The node-postgres pool the application's PrismaClient runs on; kafka-exactly-once takes its units' connections from it too. */
export const PG_POOL = Symbol('PG_POOL');

/**
 * The application's own PrismaClient, for code outside handlers (a controller, OrderDesk). A handler never writes
 * through it: its writes would commit at once and run again on each redelivery. Handlers write through `ctx.db`.
 */
@Injectable()
export class PrismaService extends PrismaClient {
  constructor(@Inject(PG_POOL) pool: Pool) {
    super({ adapter: new PrismaPg(pool) });
  }
}

/** Ends the pool once Nest has stopped the consumer and the outbox relay (their hooks run before this one). */
@Injectable()
class PoolShutdown implements OnApplicationShutdown {
  constructor(
    @Inject(PG_POOL) private readonly pool: Pool,
    private readonly prisma: PrismaService,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await this.prisma.$disconnect();
    await this.pool.end();
  }
}

@Global()
@Module({
  providers: [
    // Pool sizing: one connection per partition handled at once, plus the library's jobs, plus the application's
    // own use (docs/data-layers.md, "Pool sizing").
    { provide: PG_POOL, useFactory: () => new Pool({ connectionString: config.databaseUrl, max: 10 }) },
    PrismaService,
    PoolShutdown,
  ],
  exports: [PG_POOL, PrismaService],
})
export class PrismaModule {}
