import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { AsyncMicroserviceOptions } from '@nestjs/microservices';
import { KafkaExactlyOnceServer } from 'kafka-exactly-once/microservices';
import { AppModule } from './app.module.js';
import { config } from './config.js';

async function main(): Promise<void> {
  // A Nest microservice whose transport is the module's exactly-once consumer.
  const app = await NestFactory.createMicroservice<AsyncMicroserviceOptions>(AppModule, {
    inject: [KafkaExactlyOnceServer],
    useFactory: (server: KafkaExactlyOnceServer) => ({ strategy: server }),
  });
  // SIGTERM drains: the unit of work in flight commits (or rolls back) before the process exits.
  app.enableShutdownHooks();
  await app.listen();
  new Logger('Example').log(`handling ${config.ordersTopic} as group ${config.groupId} on Node ${process.versions.node}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
