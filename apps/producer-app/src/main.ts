import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { producerAppConfig } from './producer-app.config';
import { ProducerAppModule } from './producer-app.module';

async function bootstrap(): Promise<void> {
  const config = producerAppConfig();
  const app = await NestFactory.create(ProducerAppModule);
  app.enableShutdownHooks();
  await app.listen(config.httpPort, config.httpHost);
  new Logger('producer-app').log(`listening on http://${config.httpHost}:${config.httpPort} (GET /health)`);
}

void bootstrap();
