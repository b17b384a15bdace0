import { Inject, Injectable, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { Pool } from 'pg';
import { type ConsumerAppConfig, consumerAppConfig } from '../consumer-app.config';
import { DATA_LAYER, type DemoDataLayer } from './demo-store';
import { typeormStore } from './typeorm.store';

/**
 * consumer-app's data layer by DATA_LAYER. TypeORM (the default) is the library's default data layer: no
 * `database` option, handlers get the unit's EntityManager. Prisma, Drizzle and Kysely run over a node-postgres
 * Pool of DATABASE_URL of their own, sized as TypeORM's (a connection per partition handled at once), and are
 * loaded only when chosen.
 */
export async function demoDataLayer(config: Pick<ConsumerAppConfig, 'dataLayer' | 'databaseUrl'>): Promise<DemoDataLayer> {
  if (config.dataLayer === 'typeorm') return { kind: 'typeorm', store: (db) => typeormStore(db as Parameters<typeof typeormStore>[0]), close: async () => undefined };
  const pool = new Pool({ connectionString: config.databaseUrl, max: 40 });
  // node-postgres emits an idle connection's failure (PostgreSQL restarted, pg_terminate_backend, a network cut) on
  // the pool: without a listener it ends the process. The pool drops that connection and opens another when needed.
  const logger = new Logger('DemoDataLayer');
  pool.on('error', (err) => logger.warn(`PostgreSQL pool (${config.dataLayer}): an idle connection failed (${err.message}); it is dropped`));
  switch (config.dataLayer) {
    case 'prisma':
      return (await import('./prisma.store')).prismaDataLayer(pool);
    case 'drizzle':
      return (await import('./drizzle.store')).drizzleDataLayer(pool);
    case 'kysely':
      return (await import('./kysely.store')).kyselyDataLayer(pool);
  }
}

/** Ends the layer's pool once the application has stopped its consumer (beforeApplicationShutdown) and disconnected. */
@Injectable()
class DataLayerShutdown implements OnApplicationShutdown {
  constructor(@Inject(DATA_LAYER) private readonly layer: DemoDataLayer) {}

  async onApplicationShutdown(): Promise<void> {
    await this.layer.close();
  }
}

/** Provides DATA_LAYER: to the library's options (its `database`) and to the handlers (their statements over ctx.db). */
@Module({
  providers: [{ provide: DATA_LAYER, useFactory: () => demoDataLayer(consumerAppConfig()) }, DataLayerShutdown],
  exports: [DATA_LAYER],
})
export class DemoDataLayerModule {}
