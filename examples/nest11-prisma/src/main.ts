import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { config } from './config';

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule);
  // SIGTERM drains: the unit of work in flight commits (or rolls back) before the process exits.
  app.enableShutdownHooks();
  new Logger('Example').log(`handling ${config.ordersTopic} as group ${config.groupId} on Node ${process.versions.node}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
