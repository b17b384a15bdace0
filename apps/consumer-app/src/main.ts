import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { KafkaExactlyOnceServer } from 'kafka-exactly-once/microservices';
import { consumerAppConfig } from './consumer-app.config';
import { ConsumerAppModule } from './consumer-app.module';

async function bootstrap(): Promise<void> {
  const config = consumerAppConfig();
  const app = await NestFactory.create(ConsumerAppModule, { logger: ['log', 'warn', 'error'] });
  // SIGTERM: stop fetching, finish and commit the chunk in flight, disconnect.
  app.enableShutdownHooks();
  if (config.transport === 'microservice') {
    // A hybrid application: its @EventPattern handlers are consumed through KafkaExactlyOnceServer.
    app.connectMicroservice({ strategy: app.get(KafkaExactlyOnceServer) });
    await app.startAllMicroservices();
  }
  await app.listen(config.httpPort, config.httpHost);
  const address = app.getHttpServer().address();
  new Logger('consumer-app').log(`data layer: ${config.dataLayer} (DATA_LAYER); handlers write through ctx.db`);
  new Logger('consumer-app').log(`listening on http://${config.httpHost}:${typeof address === 'object' && address ? address.port : config.httpPort} (GET /health)`);
}

bootstrap().catch((err) => {
  new Logger('consumer-app').error(`failed to start: ${err instanceof Error ? (err.stack ?? err.message) : err}`);
  process.exit(1);
});
