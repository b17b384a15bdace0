import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { producerAppConfig } from './producer-app.config';
import { ProducerAppModule } from './producer-app.module';

async function bootstrap(): Promise<void> {
  const config = producerAppConfig();
  const app = await NestFactory.create<NestExpressApplication>(ProducerAppModule, { logger: ['log', 'warn', 'error'] });
  // Larger than Kafka's default record limit (1 MiB), so that the publisher, which knows each topic's limit,
  // decides what is too large for Kafka (413 with the sizes), not the JSON parser's 100 kB default.
  app.useBodyParser('json', { limit: '4mb' });
  // SIGTERM: finish the publishes in flight, stop the drainer, close the spool.
  app.enableShutdownHooks();
  // Keep idle client connections longer than common load balancers and HTTP clients do, so that a client
  // never reuses a connection at the moment the server closes it.
  const server = app.getHttpServer();
  server.keepAliveTimeout = 65000;
  server.headersTimeout = 66000;
  await app.listen(config.httpPort, config.httpHost);
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.httpPort;
  new Logger('producer-app').log(`listening on http://${config.httpHost}:${port} (POST /users/signups, POST /payments, GET /health)`);
}

bootstrap().catch((err) => {
  new Logger('producer-app').error(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
  process.exit(1);
});
