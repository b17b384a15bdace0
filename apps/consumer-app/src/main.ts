import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { consumerAppConfig } from './consumer-app.config';
import { ConsumerAppModule } from './consumer-app.module';

async function bootstrap(): Promise<void> {
  const config = consumerAppConfig();
  const app = await NestFactory.create(ConsumerAppModule);
  app.enableShutdownHooks();
  await app.listen(config.httpPort, config.httpHost);
  new Logger('consumer-app').log(`listening on http://${config.httpHost}:${config.httpPort} (GET /health)`);
}

void bootstrap();
